/* SPDX-License-Identifier: MIT */
/*
 * fusecore internals shared between the core's own .c files (not for
 * policies): the low-level operation table, op counters, core counters.
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include "fusecore.h"

enum fc_op {
	FC_OP_INIT, FC_OP_DESTROY, FC_OP_LOOKUP, FC_OP_FORGET, FC_OP_GETATTR,
	FC_OP_SETATTR, FC_OP_READLINK, FC_OP_MKNOD, FC_OP_MKDIR, FC_OP_UNLINK,
	FC_OP_RMDIR, FC_OP_SYMLINK, FC_OP_RENAME, FC_OP_LINK, FC_OP_OPEN,
	FC_OP_READ, FC_OP_WRITE, FC_OP_STATFS, FC_OP_RELEASE, FC_OP_FSYNC,
	FC_OP_SETXATTR, FC_OP_GETXATTR, FC_OP_LISTXATTR, FC_OP_REMOVEXATTR,
	FC_OP_FLUSH, FC_OP_OPENDIR, FC_OP_READDIR, FC_OP_RELEASEDIR,
	FC_OP_FSYNCDIR, FC_OP_CREATE, FC_OP_FALLOCATE, FC_OP_BATCH_FORGET,
	FC_OP_COUNT
};

/* Per-opcode request and payload byte counts (lock-free). */
void fc_op_count(enum fc_op op, uint64_t bytes);

extern const struct fuse_lowlevel_ops fc_ll_ops;	/* fc_ops.c */
extern const struct fc_policy *fc_pol;		/* fc_policy.c */

/* Core counters, registered by fc_counters_init(). */
extern struct fc_counter *fc_c_pwrite_calls, *fc_c_pwrite_bytes;
extern struct fc_counter *fc_c_pread_calls, *fc_c_pread_bytes;
extern struct fc_counter *fc_c_splice_calls, *fc_c_splice_bytes;
extern struct fc_counter *fc_c_fsync_calls, *fc_c_fdatasync_calls;
void fc_counters_init(void);

/* Inode table: open the root; stop() has nothing to do at exit. */
int fc_table_init(const char *source);

/* Serve with fusecore's own receive loop (fc_loop.c); 0 or -errno. */
int fc_loop_run(struct fuse_session *se, unsigned int nthreads);

/*
 * The running configuration and policy (fc_policy.c; fc_cfg is declared in
 * fusecore.h).  fc_start_policy: policy->start, 0 or its -errno.
 * fc_stop_policy: policy->stop, once, at unmount (after the last request or
 * on FUSE_DESTROY), and only if start succeeded.
 */
int fc_start_policy(void);
void fc_stop_policy(void);

/* Kernel FUSE passthrough (fc_passthrough.c). */
int fc_pt_check_kernel(void);		/* 0, or -1 with a message */
void fc_pt_attach(struct fuse_session *se);	/* after mount */
void fc_pt_received(const void *req, size_t len);	/* each raw request */
struct iovec;
ssize_t fc_pt_writev(int fd, struct iovec *iov, int count);	/* replies */
void fc_pt_counters_init(void);
void fc_pt_open(struct fc_file *f);	/* right before the open's reply */
void fc_pt_close(struct fc_file *f);	/* when the file is freed */

/* The request log (fc_reqlog.c, -o requests=PATH). */
void fc_rl_init(void);			/* before serving: the start clocks */
void fc_rl_received(const void *req, size_t n, uint64_t now_ns);
void fc_rl_replying(uint64_t unique, int32_t error, size_t len);
int fc_rl_dump(const char *path);	/* atomic; 0 or -errno */

/*
 * The core's custom io (fc_io.c): every raw request and reply passes here
 * when passthrough or the request log needs to see it.  fc_io_attach after
 * the mount (0 or -1); fc_io_received for a request read by fc_loop.c.
 */
int fc_io_attach(struct fuse_session *se);
void fc_io_received(const void *req, size_t n);
bool fc_io_wanted(void);

#endif /* FC_INTERNAL_H */
