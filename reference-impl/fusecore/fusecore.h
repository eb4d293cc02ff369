/* SPDX-License-Identifier: MIT */
/*
 * fusecore: the passthrough core shared by mobiperf's FUSE reference daemons
 * (bFUSE, Fjord).  It mirrors a SOURCE directory of the native filesystem at
 * MOUNTPOINT through libfuse3's low-level API (3.14), keeps an inode table of
 * O_PATH fds and a table of open files, parses the common options, counts
 * every request, and dumps the counters as JSON.  A daemon is the core plus a
 * *policy*: a table of hooks that decides what happens to data between the
 * FUSE request and the native file (buffer it, log it, relax fsync, ...).
 *
 * The core's .c files are compiled directly into each daemon (no library):
 * add the ../fusecore/ C files to the daemon's Makefile, define one struct fc_policy
 * and call fc_main() from main().
 *
 * ---------------------------------------------------------------------------
 * THE POLICY CONTRACT
 * ---------------------------------------------------------------------------
 * Every hook is optional; a NULL hook means "plain passthrough".  Hooks run on
 * the FUSE worker threads (any number, concurrently) unless said otherwise, so
 * a policy protects its own state with its own locks.  The core never holds
 * one of its locks while calling a hook.
 *
 * Options.  fc_main() splits every -o key=value.  "preset=NAME" is applied
 * first, whatever its position (policy->preset), then every other key in
 * order: the core's own keys (io_unit, threads, splice, writeback_cache,
 * own_loop, passthrough, counters, requests, timeout), then policy->parse_opt, and what nobody claims goes to
 * libfuse (allow_other, default_permissions, ...).  policy->validate runs
 * last, after SOURCE and MOUNTPOINT have been resolved and checked
 * (cfg->source and cfg->mountpoint are set, realpaths) and before anything
 * is mounted: a bad value is a clear message on stderr and exit status 1,
 * with nothing mounted.
 *
 * Lifetime.  policy->start runs after the mount, before the first request
 * (start threads there).  policy->stop runs once at unmount, after the last
 * request has been answered: it must write every byte it still holds to the
 * native files and stop its threads.  The counters JSON (-o counters=PATH) is
 * written after policy->stop, and also on SIGUSR1 (from a core thread).
 *
 * Files.  Each open()/create() makes one struct fc_file (fi->fh) with a
 * native fd opened with the caller's flags minus O_APPEND (the kernel
 * computes append offsets itself; with O_APPEND pwrite would ignore them)
 * and minus O_DIRECT (policy buffers have any alignment)
 * and, with writeback_cache, O_WRONLY widened to O_RDWR (the kernel then
 * reads partial pages through write-only files).  open() reopens the
 * inode's O_PATH fd through /proc/self/fd/N without O_NOFOLLOW.
 * FUSE_CAP_ATOMIC_O_TRUNC is off, so truncation at open arrives as
 * SETATTR(size) and meets the setattr hook.  A policy that keeps data for
 * a file after the request returns takes a reference with fc_file_get() and
 * drops it with fc_file_put(); the fd stays valid until the last put.  A
 * file reference also keeps its inode alive.
 *
 * Data hooks.
 *   write(f, in, off)   FUSE_WRITE.  in is libfuse's buffer vector (memory,
 *                       or a pipe when splice is on).  Return the bytes
 *                       accepted or -errno.  Without the hook the core writes
 *                       through with fc_write_bufvec().
 *   before_read(f,size,off)  called before the core serves FUSE_READ from the
 *                       native file; make the native file current for that
 *                       range (e.g. flush buffered data).  -errno fails the
 *                       read.
 *   read(f, buf, size, off)  if set, serves FUSE_READ instead of the core:
 *                       fill buf (may call fc_pread() and overlay), return
 *                       the length or -errno.  before_read is still called.
 *   flush(f)            FUSE_FLUSH, i.e. close(2) of one descriptor.  The
 *                       value is what close(2) returns: report deferred write
 *                       errors here.
 *   release(f)          FUSE_RELEASE, last close of the open file, before the
 *                       core drops its reference.  Return value is logged
 *                       only (the kernel ignores it).
 *   fsync(f, datasync)  FUSE_FSYNC.  Return <0 for an error, 0 to let the core
 *                       then fsync/fdatasync the native fd, FC_HANDLED to
 *                       answer success without a native sync (relaxed).
 *   fsyncdir(i, fd, datasync)  FUSE_FSYNCDIR of directory inode i; fd is the
 *                       native directory descriptor the core would sync.
 *                       Same return values as fsync.
 *   sync_inode(i, cause)  make the native file of inode i current (write out
 *                       everything held for it).  The core calls it before
 *                       fallocate and open(O_TRUNC); cause is an FC_CAUSE_*.
 *                       (copy_file_range and lseek(SEEK_DATA/HOLE) are not
 *                       implemented: the kernel falls back to READ/WRITE
 *                       and its own i_size, which the policy already sees.)
 *
 * Metadata hooks.
 *   getattr(i, st)      fix up a struct stat the core read from the native
 *                       inode (e.g. st_size = max(st_size, buffered end)).
 *                       Called for GETATTR, LOOKUP, CREATE, MKNOD, LINK and
 *                       SETATTR replies.
 *   setattr(i, f, attr, to_set)  before the core applies SETATTR (f may be
 *                       NULL).  For FUSE_SET_ATTR_SIZE the policy must drop
 *                       or write out its data beyond/before the new size.
 *   before_unlink(parent, name)   before unlink/rmdir of parent/name.
 *   before_rename(parent, name, newparent, newname, flags)  before rename.
 *                       fc_inode_find_child() finds the inode concerned.
 *   inode_free(i)       the inode is leaving the table: free i->pdata.
 *
 * Housekeeping.
 *   tick()              called every policy->tick_ms (if > 0) from a core
 *                       thread, between start and stop.
 *   conn_init(conn)     after the core has set its wants in FUSE_INIT.
 *   counters_json(out)  append policy members to the counters JSON: print
 *                       `"key": value` pairs separated by ",\n" without a
 *                       leading or trailing comma; they go inside "policy".
 *
 * Receive buffers (-o own_loop=1, splice off).  The core then reads each
 * request into a buffer of fc_rbuf_size() bytes of its own pool.  A write
 * hook that wants to keep the data where the kernel put it calls
 * fc_rbuf_adopt(in->buf[0].mem): if that memory is the current request's
 * buffer, the hook now owns the whole buffer (returned: its base) and gives
 * it back later with fc_rbuf_free(); otherwise (libfuse's loop, splice) it
 * returns NULL and the hook copies.  fc_rbuf_alloc() hands out pool buffers
 * for such copies.
 *
 * Passthrough (-o passthrough=1, fc_passthrough.c).  Regular files are
 * opened with kernel FUSE passthrough: their READ and WRITE requests never
 * reach the daemon, so the data hooks see none; metadata hooks still run.
 *
 * Request log (-o requests=PATH, fc_reqlog.c).  One line per FUSE request:
 * its header's ids, the requesting thread, the daemon thread that read it
 * and when, and its reply, on CLOCK_MONOTONIC; written at unmount and on
 * SIGUSR1.  Nothing for a policy to do.
 *
 * Counters.  The core counts requests and bytes per opcode by itself.
 * Policy counters are registered once (before start) with fc_counter_new()
 * and updated lock-free with fc_counter_add()/fc_counter_max().
 * ---------------------------------------------------------------------------
 */
#ifndef FUSECORE_H
#define FUSECORE_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define FC_HANDLED 1		/* fsync hook: answered, skip native sync */

/* Why buffered data was written out (for counters and sync_inode). */
enum fc_cause {
	FC_CAUSE_TIMER,		/* periodic flush thread */
	FC_CAUSE_FULL,		/* an entry filled up / buffer needed room */
	FC_CAUSE_FSYNC,		/* fsync or fdatasync */
	FC_CAUSE_CLOSE,		/* FUSE_FLUSH or FUSE_RELEASE */
	FC_CAUSE_READ,		/* a read of buffered data */
	FC_CAUSE_TRUNCATE,	/* setattr size / open O_TRUNC */
	FC_CAUSE_OVERLAP,	/* a write that could not be buffered */
	FC_CAUSE_METADATA,	/* rename, unlink, fallocate, lseek, copy */
	FC_CAUSE_UNMOUNT,	/* policy->stop */
	FC_CAUSE_COUNT
};

extern const char *const fc_cause_names[FC_CAUSE_COUNT];

/* Options common to every daemon; policy-specific options live in the policy. */
struct fc_config {
	const char *progname;
	char *source;		/* SOURCE dir (realpath), owned by the core */
	char *mountpoint;	/* MOUNTPOINT (realpath) */
	char *preset;		/* preset name given, or NULL */
	char *counters_path;	/* -o counters=PATH, or NULL */
	char *requests_path;	/* -o requests=PATH (fc_reqlog.c), or NULL */
	uint32_t io_unit;	/* max_write, 4k..1M; 0 = libfuse default */
	unsigned int threads;	/* 1 = single-threaded loop */
	bool splice;		/* splice in/out (zero copy, seed 003) */
	bool writeback_cache;	/* kernel writeback cache */
	bool own_loop;		/* fc_loop.c instead of libfuse's loop */
	bool passthrough;	/* kernel FUSE passthrough (fc_passthrough.c) */
	bool foreground;	/* -f */
	bool debug;		/* -d */
	double timeout;		/* entry/attr timeout, seconds */
};

/*
 * An inode of the mirrored tree.  ino (the FUSE node id) is the address of
 * this struct; the root is FUSE_ROOT_ID and maps to fc_root.
 * Policies read fd, src_dev, src_ino, is_reg freely, own pdata, and may use
 * 'lock' (initialised by the core, never taken by it) to protect pdata.
 * nlookup, refs and hnext belong to the core (inode table lock).
 */
struct fc_inode {
	int fd;			/* O_PATH fd of the native inode; constant */
	dev_t src_dev;		/* native identity; constant */
	ino_t src_ino;
	bool is_reg;		/* regular file (at lookup time) */
	void *pdata;		/* policy's per-inode state */
	pthread_mutex_t lock;	/* for the policy; the core never takes it */
	uint64_t nlookup;	/* kernel lookups not yet forgotten (table lock) */
	uint64_t refs;		/* open files + policy references (table lock) */
	struct fc_inode *hnext;	/* inode table chain (table lock) */
	int32_t pt_id;		/* passthrough backing id, while pt_opens */
	unsigned int pt_opens;	/* open passthrough files (fc_pt_lock) */
};

/* An open file (FUSE fi->fh). */
struct fc_file {
	int fd;			/* native fd, no O_APPEND; constant */
	int flags;		/* open(2) flags as the application gave them */
	struct fc_inode *inode;	/* referenced for the file's lifetime */
	atomic_uint refs;	/* fc_file_get/put */
	void *pdata;		/* policy's per-open-file state */
	int32_t pt_id;		/* kernel passthrough backing id, 0 = none */
};

enum fc_counter_kind {
	FC_COUNTER_SUM,		/* incremented: calls, bytes */
	FC_COUNTER_MAX,		/* high-water mark */
	FC_COUNTER_GAUGE,	/* current value, set */
};

struct fc_counter {
	const char *name;	/* JSON key, e.g. "daemon_pwrite_calls" */
	enum fc_counter_kind kind;
	_Atomic uint64_t value;
};

struct fc_policy {
	const char *name;	/* "bfuse", "fjord": logs, JSON "daemon" */
	const char *options_help;	/* printed by --help after core options */
	unsigned int tick_ms;	/* period of tick(); 0 = no tick */

	int (*preset)(const char *name, struct fc_config *cfg);
	/* 1 = consumed, 0 = not mine, <0 = bad value (message printed) */
	int (*parse_opt)(const char *key, const char *val,
			 struct fc_config *cfg);
	int (*validate)(struct fc_config *cfg);	/* 0 ok, <0 message printed */
	int (*start)(const struct fc_config *cfg);	/* 0 ok, <0 -errno */
	void (*stop)(void);
	void (*conn_init)(struct fuse_conn_info *conn);

	ssize_t (*write)(struct fc_file *f, struct fuse_bufvec *in, off_t off);
	int (*before_read)(struct fc_file *f, size_t size, off_t off);
	ssize_t (*read)(struct fc_file *f, char *buf, size_t size, off_t off);
	int (*flush)(struct fc_file *f);
	int (*release)(struct fc_file *f);
	int (*fsync)(struct fc_file *f, int datasync);
	int (*fsyncdir)(struct fc_inode *i, int fd, int datasync);
	int (*sync_inode)(struct fc_inode *i, enum fc_cause cause);
	int (*open)(struct fc_file *f);		/* after native open; <0 fails */

	void (*getattr)(struct fc_inode *i, struct stat *st);
	int (*setattr)(struct fc_inode *i, struct fc_file *f,
		       const struct stat *attr, int to_set);
	int (*before_unlink)(struct fc_inode *parent, const char *name);
	int (*before_rename)(struct fc_inode *parent, const char *name,
			     struct fc_inode *newparent, const char *newname,
			     unsigned int flags);
	void (*inode_free)(struct fc_inode *i);

	void (*tick)(void);
	void (*counters_json)(FILE *out);
};

/* Entry point: parse argv, mount, serve, unmount.  Returns exit status. */
int fc_main(int argc, char *argv[], const struct fc_policy *policy);

/* The running configuration (valid after option parsing). */
extern struct fc_config fc_cfg;

/* Option value parsers: 0 on success, -EINVAL on a malformed value. */
int fc_parse_size(const char *s, uint64_t *out);	/* 4096, 4k, 512K, 8M, 1G */
int fc_parse_duration_ms(const char *s, uint64_t *out_ms); /* 10ms, 2s, 500us(->0), 10 */
int fc_parse_bool(const char *s, bool *out);		/* 1/0, yes/no, on/off, true/false, "" = true */

/* Counters. fc_counter_new is not thread-safe: call before start. */
struct fc_counter *fc_counter_new(const char *name, enum fc_counter_kind kind);
static inline void fc_counter_add(struct fc_counter *c, uint64_t v)
{
	atomic_fetch_add_explicit(&c->value, v, memory_order_relaxed);
}
void fc_counter_max(struct fc_counter *c, uint64_t v);
static inline void fc_counter_set(struct fc_counter *c, uint64_t v)
{
	atomic_store_explicit(&c->value, v, memory_order_relaxed);
}
int fc_counters_dump(const char *path);	/* atomic (tmp + rename); -errno */
/* PATH written whole by fill() or not at all (tmp + fsync + rename). */
int fc_write_atomic(const char *path, void (*fill)(FILE *out),
		    const char *what);

/* References. */
void fc_file_get(struct fc_file *f);
void fc_file_put(struct fc_file *f);	/* last put closes fd, frees */
void fc_inode_get(struct fc_inode *i);
void fc_inode_put(struct fc_inode *i);
/* Inode of parent/name if the kernel knows it (referenced), else NULL. */
struct fc_inode *fc_inode_find_child(struct fc_inode *parent, const char *name);
/* Native path of an inode (from /proc/self/fd); 0 or -errno. */
int fc_inode_path(struct fc_inode *i, char *buf, size_t size);

/*
 * Native IO, counted as daemon calls ("daemon_pwrite_calls/bytes",
 * "daemon_pread_calls/bytes").  fc_pwrite_all loops over short writes and
 * EINTR; it returns size or -errno (bytes before the error are written).
 */
ssize_t fc_pwrite_all(int fd, const void *buf, size_t size, off_t off);
ssize_t fc_pread(int fd, void *buf, size_t size, off_t off);
/* One pwritev(2) per IOV_MAX vectors (loops over short writes); counted
 * as pwrite calls.  iov is modified.  Returns the total or -errno. */
struct iovec;
ssize_t fc_pwritev_all(int fd, struct iovec *iov, int iovcnt, off_t off);
/* Write a FUSE buffer vector straight to f->fd at off (splice if a pipe). */
ssize_t fc_write_bufvec(struct fc_file *f, struct fuse_bufvec *in, off_t off);
/* Copy a FUSE buffer vector into memory (from a pipe or memory). */
ssize_t fc_copy_bufvec(struct fuse_bufvec *in, void *dst, size_t size);

/* Receive buffers of the core's own loop (see the contract above). */
size_t fc_rbuf_size(void);
void *fc_rbuf_alloc(void);		/* NULL if out of memory */
void fc_rbuf_free(void *base);
void *fc_rbuf_adopt(const void *p);

uint64_t fc_now_ns(void);	/* CLOCK_MONOTONIC */
void fc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* FUSECORE_H */
