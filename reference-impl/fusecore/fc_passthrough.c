// SPDX-License-Identifier: MIT
/*
 * fusecore's FUSE passthrough (-o passthrough=1; bfuse's preset
 * "passthrough"): the kernel reads and writes an open file's backing file
 * itself, so no READ or WRITE request for it reaches the daemon.  This is
 * how Android 12 and later serve /sdcard (MediaProvider's FUSE daemon), and
 * the baseline bFUSE is compared with: data that never reaches a daemon
 * cannot be buffered by one.  Upstream Linux 6.9 (CONFIG_FUSE_PASSTHROUGH):
 *
 *   FUSE_INIT   the kernel offers FUSE_PASSTHROUGH (flags2); the reply
 *               takes it, with max_stack_depth = 1 (the backing files are on
 *               a filesystem that stacks on nothing).  Passthrough and the
 *               writeback cache exclude each other.
 *   open        ioctl(FUSE_DEV_IOC_BACKING_OPEN, {fd}) registers the native
 *               file and returns a backing id (needs CAP_SYS_ADMIN); the
 *               OPEN/CREATE reply carries FOPEN_PASSTHROUGH and that id.
 *               Every open of one inode must name the same backing file
 *               (the kernel refuses another with EBUSY while the inode is
 *               open), so the id is kept per inode while it has open files
 *               and closed (FUSE_DEV_IOC_BACKING_CLOSE) after the last.
 *
 * libfuse 3.14 knows none of this, so it is done beneath it: the core's own
 * receive loop shows each raw request to fc_pt_received() (the INIT offer),
 * and every reply goes through fc_pt_writev (the core's custom io, fc_io.c)
 * that patches the INIT reply and the reply to an open on the same thread, named
 * by fc_pt_open() just before fuse_reply_open/create.  Right after the INIT
 * reply, a BACKING_OPEN of the source directory checks that the ioctl is
 * there at all: the kernel answers a directory with EISDIR/EINVAL, while an
 * emulator that does not pass the ioctl through (qemu-user) answers ENOSYS,
 * and a kernel without it ENOTTY.  Then the daemon says why and exits.
 *
 * A file the kernel will not take (ELOOP: a backing file on a stacked
 * filesystem) is opened without passthrough, counted and logged once.
 *
 * Locking: fc_pt_lock protects every inode's pt_id and pt_opens.  The INIT
 * state is written by the thread serving INIT before any other request is
 * served.  fc_pt_pending is thread-local.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fc_internal.h"

/* Linux 6.9 UAPI, absent from older headers (Debian 12 has 6.1's). */
#define FC_PT_INIT_EXT		(1u << 30)
#define FC_PT_FLAGS2		(1u << (37 - 32))	/* FUSE_PASSTHROUGH */
#define FC_PT_FOPEN		(1u << 7)		/* FOPEN_PASSTHROUGH */
#define FC_PT_KERNEL_MAJOR	6
#define FC_PT_KERNEL_MINOR	9

struct fc_pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define FC_PT_IOC_BACKING_OPEN	_IOW(229, 1, struct fc_pt_backing_map)
#define FC_PT_IOC_BACKING_CLOSE	_IOW(229, 2, uint32_t)

/* The parts of the INIT messages that matter here (UAPI layout). */
struct fc_pt_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
};

struct fc_pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
};

struct fc_pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

static int fc_pt_devfd = -1;			/* /dev/fuse; constant */
static struct fuse_session *fc_pt_se;
static uint64_t fc_pt_init_unique;		/* the INIT request */
static bool fc_pt_offered;			/* kernel offered it */
static pthread_mutex_t fc_pt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_counter *fc_pt_c_opens, *fc_pt_c_fallbacks;
static atomic_bool fc_pt_fallback_logged;

/* The reply this thread is about to send for an open: patch it. */
static __thread struct {
	uint64_t fh;
	int32_t id;
} fc_pt_pending;

int fc_pt_check_kernel(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) == 0)
		sscanf(u.release, "%d.%d", &major, &minor);
	if (major > FC_PT_KERNEL_MAJOR ||
	    (major == FC_PT_KERNEL_MAJOR && minor >= FC_PT_KERNEL_MINOR))
		return 0;
	fprintf(stderr, "%s: passthrough needs FUSE passthrough "
		"(FUSE_DEV_IOC_BACKING_OPEN, FOPEN_PASSTHROUGH): Linux %d.%d or "
		"later; this kernel is %s\n", fc_cfg.progname,
		FC_PT_KERNEL_MAJOR, FC_PT_KERNEL_MINOR, u.release);
	return -1;
}

void fc_pt_received(const void *req, size_t len)
{
	const struct fuse_in_header *in = req;
	const struct fc_pt_init_in *init = (const void *)(in + 1);

	if (len < sizeof(*in) + sizeof(*init) || in->opcode != FUSE_INIT)
		return;
	fc_pt_init_unique = in->unique;
	fc_pt_offered = (init->flags & FC_PT_INIT_EXT) &&
			(init->flags2 & FC_PT_FLAGS2);
}

/* After the INIT reply: is the ioctl there at all?  0 or -errno. */
static int fc_pt_selftest(void)
{
	struct fc_pt_backing_map map = { 0 };
	int dirfd = open(fc_cfg.source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int id, err;

	if (dirfd < 0)
		return -errno;
	map.fd = dirfd;
	id = ioctl(fc_pt_devfd, FC_PT_IOC_BACKING_OPEN, &map);
	err = id < 0 ? errno : 0;
	close(dirfd);
	if (id > 0) {	/* should not be: a directory is no backing file */
		uint32_t bid = id;

		ioctl(fc_pt_devfd, FC_PT_IOC_BACKING_CLOSE, &bid);
		return 0;
	}
	return err == EISDIR || err == EINVAL ? 0 : -err;
}

static void fc_pt_refuse(const char *why, int err)
{
	fc_log("passthrough refused: %s%s%s", why, err ? ": " : "",
	       err ? strerror(err) : "");
	fuse_session_exit(fc_pt_se);
}

static void fc_pt_patch_init(struct iovec *iov, int count)
{
	struct fc_pt_init_out *out;

	if (count < 2 || iov[1].iov_len < sizeof(*out)) {
		fc_pt_refuse("the kernel's FUSE protocol is too old", 0);
		return;
	}
	if (!fc_pt_offered) {
		fc_pt_refuse("the kernel does not offer FUSE_PASSTHROUGH in "
			     "FUSE_INIT (Linux 6.9 or later built with "
			     "CONFIG_FUSE_PASSTHROUGH)", 0);
		return;
	}
	out = iov[1].iov_base;
	out->flags |= FC_PT_INIT_EXT;
	out->flags2 |= FC_PT_FLAGS2;
	out->max_stack_depth = 1;
}

static void fc_pt_patch_open(struct iovec *iov, int count)
{
	struct fc_pt_open_out *out;

	/* OPEN: fuse_open_out alone; CREATE: fuse_entry_out, then it */
	if (count < 2 || iov[1].iov_len < sizeof(*out))
		return;
	out = (void *)((char *)iov[1].iov_base + iov[1].iov_len -
		       sizeof(*out));
	if (out->fh != fc_pt_pending.fh)
		return;
	out->open_flags |= FC_PT_FOPEN;
	out->backing_id = fc_pt_pending.id;
}

ssize_t fc_pt_writev(int fd, struct iovec *iov, int count)
{
	const struct fuse_out_header *hdr = iov[0].iov_base;
	bool init = hdr->unique == fc_pt_init_unique && fc_pt_init_unique;
	ssize_t res;
	int err;

	if (init && !hdr->error)
		fc_pt_patch_init(iov, count);
	else if (fc_pt_pending.id && !hdr->error)
		fc_pt_patch_open(iov, count);
	fc_pt_pending.id = 0;
	res = writev(fd, iov, count);
	err = errno;
	if (init && res >= 0 && !fuse_session_exited(fc_pt_se)) {
		fc_pt_init_unique = 0;
		int st = fc_pt_selftest();

		if (st == -EPERM)
			fc_pt_refuse("FUSE_DEV_IOC_BACKING_OPEN needs "
				     "CAP_SYS_ADMIN (run the daemon as root)",
				     0);
		else if (st)
			fc_pt_refuse("FUSE_DEV_IOC_BACKING_OPEN is not "
				     "available (an emulator such as qemu-user "
				     "does not pass it through; a kernel "
				     "without it says ENOTTY)", -st);
	}
	errno = err;
	return res;
}

void fc_pt_attach(struct fuse_session *se)
{
	fc_pt_se = se;
	fc_pt_devfd = fuse_session_fd(se);
}

void fc_pt_counters_init(void)
{
	fc_pt_c_opens = fc_counter_new("passthrough_opens", FC_COUNTER_SUM);
	fc_pt_c_fallbacks = fc_counter_new("passthrough_fallbacks",
					   FC_COUNTER_SUM);
}

void fc_pt_open(struct fc_file *f)
{
	struct fc_inode *i = f->inode;
	struct fc_pt_backing_map map = { .fd = f->fd };
	int id, err = 0;

	pthread_mutex_lock(&fc_pt_lock);
	if (i->pt_opens) {
		id = i->pt_id;
	} else {
		id = ioctl(fc_pt_devfd, FC_PT_IOC_BACKING_OPEN, &map);
		err = errno;
		if (id > 0)
			i->pt_id = id;
	}
	if (id > 0)
		i->pt_opens++;
	pthread_mutex_unlock(&fc_pt_lock);
	if (id <= 0) {
		fc_counter_add(fc_pt_c_fallbacks, 1);
		if (!atomic_exchange(&fc_pt_fallback_logged, true))
			fc_log("passthrough: inode %llu opened without it: "
			       "FUSE_DEV_IOC_BACKING_OPEN: %s (logged once)",
			       (unsigned long long)i->src_ino, strerror(err));
		return;
	}
	f->pt_id = id;
	fc_counter_add(fc_pt_c_opens, 1);
	fc_pt_pending.fh = (uintptr_t)f;
	fc_pt_pending.id = id;
}

void fc_pt_close(struct fc_file *f)
{
	struct fc_inode *i = f->inode;
	uint32_t id = 0;

	pthread_mutex_lock(&fc_pt_lock);
	if (--i->pt_opens == 0) {
		id = i->pt_id;
		i->pt_id = 0;
	}
	pthread_mutex_unlock(&fc_pt_lock);
	if (id && ioctl(fc_pt_devfd, FC_PT_IOC_BACKING_CLOSE, &id) < 0)
		fc_log("passthrough: closing backing id %u: %s", id,
		       strerror(errno));
	f->pt_id = 0;
}
