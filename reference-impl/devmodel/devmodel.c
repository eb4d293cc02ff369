/*
 * devmodel.c - mobiperf's emulated storage device: a FUSE filesystem that
 * exposes one file, disk.img, backed by a real file, and serves every read,
 * write and fsync of it at the speed of a device profile (eMMC, UFS, or the
 * host's own speed).  A loop device attached to MOUNT/disk.img then behaves
 * like a phone's flash storage: a filesystem on it sees the device's
 * bandwidth, per-request latency and cache-flush cost.
 *
 *   devmodel [-f] -o profile=NAME[,write_bw=..,read_bw=..,rand_write_lat=..,
 *            rand_read_lat=..,seq_lat=..,flush_lat=..,burst=..,seq_window=..,
 *            counters=PATH,size=BYTES,direct_io=0|1,sync_backing=0|1,
 *            direct_backing=0|1]
 *            BACKING_FILE MOUNTPOINT
 *   devmodel --list-profiles
 *
 * Why FUSE: this kernel has neither device-mapper (dm-delay) nor nbd nor
 * ublk, and a loop device's requests on a FUSE file arrive in the daemon
 * one FUSE request per block request (up to max_write), with REQ_PREFLUSH
 * and FUA turned into fsync() of the file, i.e. FUSE_FSYNC.  disk.img is
 * opened direct_io so that the FUSE page cache cannot absorb the writes.
 *
 * The `host` profile passes the host's own costs through: aligned IO goes to
 * the backing file with O_DIRECT and a flush is an fdatasync() of it, so it
 * compares with a plain `losetup --direct-io=on` loop device.  Throttled
 * profiles use buffered IO and no host flush, so the host's disk stays out
 * of their timing (its costs overlap the modelled ones).
 *
 * Each request is admitted to the timing model (dm_model.c), which returns
 * the deadline at which the emulated device completes it; the request does
 * its real IO on the backing file, sleeps until the deadline, then replies.
 * The counters are written as JSON to counters=PATH on SIGUSR1 and at
 * unmount.
 */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dm_model.h"

#define DM_FILE_NAME "disk.img"
#define DM_FILE_INO 2
#define DM_ATTR_TIMEOUT 86400.0
#define DM_DEFAULT_NICE -10

/* Command-line options, as parsed by fuse_opt_parse(). */
struct dm_options {
	char *profile;
	char *write_bw, *read_bw, *burst, *size;
	char *rand_write_lat, *rand_read_lat, *seq_lat, *flush_lat;
	char *counters;
	int seq_window;
	int direct_io;
	int sync_backing;
	int direct_backing;
	char *nice;
	int list_profiles;
	int show_help;
};

static void dm_free_options(struct dm_options *o)
{
	char **strs[] = { &o->profile, &o->write_bw, &o->read_bw, &o->burst,
			  &o->size, &o->rand_write_lat, &o->rand_read_lat,
			  &o->seq_lat, &o->flush_lat, &o->counters, &o->nice };
	unsigned int i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

#define DM_OPT(t, p) { t, offsetof(struct dm_options, p), 1 }
static const struct fuse_opt dm_opt_spec[] = {
	DM_OPT("profile=%s", profile),
	DM_OPT("write_bw=%s", write_bw),
	DM_OPT("read_bw=%s", read_bw),
	DM_OPT("burst=%s", burst),
	DM_OPT("size=%s", size),
	DM_OPT("rand_write_lat=%s", rand_write_lat),
	DM_OPT("rand_read_lat=%s", rand_read_lat),
	DM_OPT("seq_lat=%s", seq_lat),
	DM_OPT("flush_lat=%s", flush_lat),
	DM_OPT("counters=%s", counters),
	DM_OPT("seq_window=%u", seq_window),
	DM_OPT("direct_io=%u", direct_io),
	DM_OPT("sync_backing=%u", sync_backing),
	DM_OPT("direct_backing=%u", direct_backing),
	DM_OPT("nice=%s", nice),
	DM_OPT("--list-profiles", list_profiles),
	DM_OPT("-h", show_help),
	DM_OPT("--help", show_help),
	FUSE_OPT_END
};

/*
 * The daemon's state.  Everything is set before the session starts and
 * read-only afterwards, except `model` (its own lock) and `size` (never
 * changes: disk.img cannot be resized).
 */
struct dm_state {
	int backing_fd;
	int direct_fd;		/* O_DIRECT on the same file, or -1 */
	uint64_t size;
	int direct_io;
	int sync_backing;
	const char *counters_path;
	struct dm_model model;
	struct fuse_session *se;
};

static struct dm_state dm;

static uint64_t dm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Sleep until deadline (CLOCK_MONOTONIC ns); returns the ns slept. */
static uint64_t dm_sleep_until(uint64_t deadline_ns)
{
	uint64_t before = dm_now_ns();
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
		.tv_nsec = (long)(deadline_ns % 1000000000ULL),
	};

	if (deadline_ns <= before)
		return 0;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	return dm_now_ns() - before;
}

static int dm_write_counters(void)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (!dm.counters_path)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", dm.counters_path) >=
	    (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "devmodel: cannot write %s: %s\n", tmp,
			strerror(errno));
		return -1;
	}
	dm_model_write_json(&dm.model, f, dm_now_ns());
	if (fclose(f) || rename(tmp, dm.counters_path)) {
		fprintf(stderr, "devmodel: cannot write %s: %s\n",
			dm.counters_path, strerror(errno));
		return -1;
	}
	return 0;
}

static void dm_fill_attr(fuse_ino_t ino, struct stat *st)
{
	struct stat bst;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (fstat(dm.backing_fd, &bst) == 0) {
		st->st_atim = bst.st_atim;
		st->st_mtim = bst.st_mtim;
		st->st_ctim = bst.st_ctim;
		if (ino == DM_FILE_INO)
			st->st_blocks = bst.st_blocks;
	}
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return;
	}
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_size = (off_t)dm.size;
	st->st_blksize = 4096;
}

static void dm_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* the loop device is the only client: no locks, no writeback cache */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
}

static void dm_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID || strcmp(name, DM_FILE_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = DM_FILE_INO;
	e.attr_timeout = DM_ATTR_TIMEOUT;
	e.entry_timeout = DM_ATTR_TIMEOUT;
	dm_fill_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void dm_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != DM_FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	dm_fill_attr(ino, &st);
	fuse_reply_attr(req, &st, DM_ATTR_TIMEOUT);
}

static void dm_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	/* a device has a fixed size; times and modes are accepted, ignored */
	if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != dm.size) {
		fuse_reply_err(req, EPERM);
		return;
	}
	dm_fill_attr(ino, &st);
	fuse_reply_attr(req, &st, DM_ATTR_TIMEOUT);
}

static void dm_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	static const char *const names[] = { ".", "..", DM_FILE_NAME };
	static const fuse_ino_t inos[] = { FUSE_ROOT_ID, FUSE_ROOT_ID,
					   DM_FILE_INO };
	char buf[512];
	size_t used = 0;
	off_t i;

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (i = off; i < 3; i++) {
		struct stat st;
		size_t n;

		dm_fill_attr(inos[i], &st);
		n = fuse_add_direntry(req, buf + used, size - used, names[i],
				      &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static void dm_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != DM_FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->direct_io = dm.direct_io ? 1 : 0;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

/* Bytes of [off, off+len) inside the device, or -1 when off is beyond it. */
static ssize_t dm_clip(uint64_t off, size_t len)
{
	if (off > dm.size)
		return -1;
	if (len > dm.size - off)
		len = (size_t)(dm.size - off);
	return (ssize_t)len;
}

/*
 * Each FUSE worker thread has one page-aligned bounce buffer for O_DIRECT
 * IO on the backing file; the key's destructor frees it when libfuse ends
 * an idle thread.
 */
static pthread_key_t dm_buf_key;

struct dm_buf {
	size_t len;
	char *data;		/* page-aligned */
};

static void dm_buf_free(void *p)
{
	struct dm_buf *b = p;

	if (b) {
		free(b->data);
		free(b);
	}
}

static char *dm_thread_buf(size_t len)
{
	struct dm_buf *b = pthread_getspecific(dm_buf_key);
	void *data;

	if (b && b->len >= len)
		return b->data;
	if (posix_memalign(&data, 4096, len))
		return NULL;
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b) {
			free(data);
			return NULL;
		}
		pthread_setspecific(dm_buf_key, b);
	}
	free(b->data);
	b->data = data;
	b->len = len;
	return b->data;
}

/*
 * Read or write [off, off+len) of the backing file: through the O_DIRECT
 * descriptor when the request is sector-aligned (the host page cache then
 * holds nothing of the emulated device, as with `losetup --direct-io`),
 * else, or when O_DIRECT refuses, through the buffered one.  buf must be
 * page-aligned for the direct path.  Returns 0 or an errno.
 */
static int dm_backing_io(int is_write, char *buf, size_t len, off_t off)
{
	int fd = dm.direct_fd;
	size_t done = 0;

	if (fd < 0 || (off | (off_t)len) & 511 || ((uintptr_t)buf & 4095))
		fd = dm.backing_fd;
	while (done < len) {
		ssize_t n = is_write ?
			pwrite(fd, buf + done, len - done, off + done) :
			pread(fd, buf + done, len - done, off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && fd != dm.backing_fd) {
			fd = dm.backing_fd;	/* alignment the host refuses */
			continue;
		}
		if (n < 0)
			return errno;
		if (n == 0) {
			if (is_write)
				return EIO;
			/* a sparse tail past the backing EOF */
			memset(buf + done, 0, len - done);
			break;
		}
		done += (size_t)n;
	}
	return 0;
}

static void dm_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct dm_ticket t;
	ssize_t len = dm_clip((uint64_t)off, size);
	uint64_t slept;
	char *buf;
	int err;

	(void)ino;
	(void)fi;
	if (len <= 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	t = dm_model_admit(&dm.model, DM_OP_READ, (uint64_t)off, (uint64_t)len,
			   dm_now_ns());
	buf = dm_thread_buf((size_t)len);
	err = buf ? dm_backing_io(0, buf, (size_t)len, off) : ENOMEM;
	slept = dm_sleep_until(t.deadline_ns);
	dm_model_complete(&dm.model, &t, err ? 0 : (uint64_t)len, dm_now_ns(),
			  slept, err);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, (size_t)len);
}

static void dm_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct dm_ticket t;
	ssize_t len = dm_clip((uint64_t)off, size);
	uint64_t slept;
	char *bounce = NULL;
	int err;

	(void)ino;
	(void)fi;
	if (len <= 0) {
		if (size)
			fuse_reply_err(req, ENOSPC);
		else
			fuse_reply_write(req, 0);
		return;
	}
	t = dm_model_admit(&dm.model, DM_OP_WRITE, (uint64_t)off,
			   (uint64_t)len, dm_now_ns());
	/* the request's data follows FUSE headers: copy it to aligned memory */
	if (dm.direct_fd >= 0 && !(((off_t)len | off) & 511))
		bounce = dm_thread_buf((size_t)len);
	if (bounce) {
		memcpy(bounce, buf, (size_t)len);
		err = dm_backing_io(1, bounce, (size_t)len, off);
	} else {
		err = dm_backing_io(1, (char *)buf, (size_t)len, off);
	}
	slept = dm_sleep_until(t.deadline_ns);
	dm_model_complete(&dm.model, &t, err ? 0 : (uint64_t)len, dm_now_ns(),
			  slept, err);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, (size_t)len);
}

/* FUSE_FSYNC: what the loop device sends for REQ_PREFLUSH and FUA. */
static void dm_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct dm_ticket t;
	uint64_t slept;
	int err = 0;

	(void)ino;
	(void)fi;
	t = dm_model_admit(&dm.model, DM_OP_FLUSH, 0, 0, dm_now_ns());
	/*
	 * A device flush makes written data durable; the image file's own
	 * timestamps do not matter, so fdatasync is the exact equivalent.
	 */
	(void)datasync;
	if (dm.sync_backing && fdatasync(dm.backing_fd))
		err = errno;
	slept = dm_sleep_until(t.deadline_ns);
	dm_model_complete(&dm.model, &t, 0, dm_now_ns(), slept, err);
	fuse_reply_err(req, err);
}

/* Punch-hole and zero-range: the loop device's discard and write-zeroes. */
static void dm_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t off, off_t length, struct fuse_file_info *fi)
{
	struct dm_ticket t;
	int err = 0;

	(void)ino;
	(void)fi;
	if ((uint64_t)off > dm.size || (uint64_t)length > dm.size - off) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	t = dm_model_admit(&dm.model, DM_OP_DISCARD, (uint64_t)off,
			   (uint64_t)length, dm_now_ns());
	if (fallocate(dm.backing_fd, mode | FALLOC_FL_KEEP_SIZE, off, length))
		err = errno;
	dm_model_complete(&dm.model, &t, err ? 0 : (uint64_t)length,
			  dm_now_ns(), 0, err);
	fuse_reply_err(req, err);
}

static void dm_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(dm.backing_fd, &sv)) {
		fuse_reply_err(req, errno);
		return;
	}
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops dm_ops = {
	.init = dm_init,
	.lookup = dm_lookup,
	.getattr = dm_getattr,
	.setattr = dm_setattr,
	.readdir = dm_readdir,
	.open = dm_open,
	.read = dm_read,
	.write = dm_write,
	.fsync = dm_fsync,
	.fallocate = dm_fallocate,
	.statfs = dm_statfs,
};

/* SIGUSR1 is blocked in every thread and taken here with sigwait(). */
static volatile int dm_stopping;

static void *dm_signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (dm_stopping)
			return NULL;
		dm_write_counters();
	}
}

static void dm_usage(FILE *f)
{
	unsigned int i;

	fprintf(f,
"usage: devmodel [-f] [-s] -o OPTIONS BACKING_FILE MOUNTPOINT\n"
"       devmodel --list-profiles\n"
"Serves BACKING_FILE as MOUNTPOINT/" DM_FILE_NAME " at the speed of a device "
"profile.\n"
"options (-o, comma separated):\n"
"  profile=NAME        base profile (default host):");
	for (i = 0; i < dm_nr_profiles; i++)
		fprintf(f, " %s", dm_profiles[i].name);
	fprintf(f, "\n"
"  write_bw=SIZE       write bandwidth per second (k/M/G = 1024-based; 0 = unlimited)\n"
"  read_bw=SIZE        read bandwidth per second\n"
"  rand_write_lat=DUR  latency of a random write (ns/us/ms/s)\n"
"  rand_read_lat=DUR   latency of a random read\n"
"  seq_lat=DUR         latency of a request that continues a recent one\n"
"  flush_lat=DUR       cost of a cache flush (fsync of " DM_FILE_NAME ")\n"
"  burst=SIZE          token bucket depth (default 0: no bursts)\n"
"  seq_window=N        recent request ends that count as sequential (1..%d)\n"
"  size=SIZE           size of " DM_FILE_NAME " (default: the backing file's)\n"
"  counters=PATH       counters JSON, written on SIGUSR1 and at unmount\n"
"  direct_io=0|1       bypass the FUSE page cache (default 1)\n"
"  sync_backing=0|1    also fsync the backing file on flush (host: 1, else 0)\n"
"  nice=N              scheduling priority of the daemon (default -10)\n"
"  direct_backing=0|1  aligned IO to the backing file with O_DIRECT\n"
"                      (default: as sync_backing)\n"
"example: devmodel -f -o profile=emmc-2012,counters=c.json disk.raw /mnt/dm\n",
		DM_SEQ_WINDOW_MAX);
}

/* Apply the options on top of the base profile; -1 after an error. */
static int dm_build_profile(const struct dm_options *o, struct dm_profile *p)
{
	const struct dm_profile *base = dm_profile_find(o->profile ?
							o->profile : "host");
	struct { const char *key, *val; uint64_t *dst; int is_time; } v[] = {
		{ "write_bw", o->write_bw, &p->write_bw, 0 },
		{ "read_bw", o->read_bw, &p->read_bw, 0 },
		{ "burst", o->burst, &p->burst_bytes, 0 },
		{ "rand_write_lat", o->rand_write_lat, &p->rand_write_lat_ns, 1 },
		{ "rand_read_lat", o->rand_read_lat, &p->rand_read_lat_ns, 1 },
		{ "seq_lat", o->seq_lat, &p->seq_lat_ns, 1 },
		{ "flush_lat", o->flush_lat, &p->flush_lat_ns, 1 },
	};
	unsigned int i;

	if (!base) {
		fprintf(stderr, "devmodel: unknown profile '%s'; valid:",
			o->profile);
		for (i = 0; i < dm_nr_profiles; i++)
			fprintf(stderr, " %s", dm_profiles[i].name);
		fputc('\n', stderr);
		return -1;
	}
	*p = *base;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		int bad;

		if (!v[i].val)
			continue;
		bad = v[i].is_time ? dm_parse_duration(v[i].val, v[i].dst) :
				     dm_parse_size(v[i].val, v[i].dst);
		if (bad) {
			fprintf(stderr,
				"devmodel: bad value for %s: '%s' (expected %s)\n",
				v[i].key, v[i].val, v[i].is_time ?
				"a duration like 500us, 2ms, 0" :
				"a size like 4096, 512k, 40M");
			return -1;
		}
	}
	if (o->sync_backing >= 0) {
		if (o->sync_backing > 1) {
			fprintf(stderr,
				"devmodel: bad value for sync_backing: %d (expected 0 or 1)\n",
				o->sync_backing);
			return -1;
		}
		p->sync_backing = o->sync_backing;
	}
	if (o->seq_window) {
		if (o->seq_window < 1 || o->seq_window > DM_SEQ_WINDOW_MAX) {
			fprintf(stderr,
				"devmodel: bad value for seq_window: %d (expected 1..%d)\n",
				o->seq_window, DM_SEQ_WINDOW_MAX);
			return -1;
		}
		p->seq_window = (unsigned int)o->seq_window;
	}
	return 0;
}

/* Open (creating if needed) the backing file and fix the device size. */
static int dm_open_backing(const char *path, const char *size_opt)
{
	struct stat st;
	uint64_t size = 0;

	if (size_opt && (dm_parse_size(size_opt, &size) || size == 0)) {
		fprintf(stderr,
			"devmodel: bad value for size: '%s' (expected a size like 256M)\n",
			size_opt);
		return -1;
	}
	dm.backing_fd = open(path, O_RDWR | O_CLOEXEC | (size ? O_CREAT : 0),
			     0644);
	if (dm.backing_fd < 0 || fstat(dm.backing_fd, &st)) {
		fprintf(stderr, "devmodel: cannot open %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "devmodel: %s is not a regular file\n", path);
		return -1;
	}
	if (size && (uint64_t)st.st_size < size &&
	    ftruncate(dm.backing_fd, (off_t)size)) {
		fprintf(stderr, "devmodel: cannot grow %s to %" PRIu64 ": %s\n",
			path, size, strerror(errno));
		return -1;
	}
	/* refused by some filesystems (tmpfs before 6.6): then buffered only */
	dm.direct_fd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
	dm.size = size ? size : (uint64_t)st.st_size;
	if (dm.size == 0) {
		fprintf(stderr,
			"devmodel: %s is empty; give its size with -o size=\n",
			path);
		return -1;
	}
	return 0;
}

/* Collect BACKING_FILE then MOUNTPOINT; pass every option on to FUSE. */
struct dm_positional {
	char *backing;
	char *mountpoint;
	int extra;
};

static int dm_opt_proc(void *data, const char *arg, int key,
		       struct fuse_args *outargs)
{
	struct dm_positional *pos = data;

	(void)outargs;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (!pos->backing)
		pos->backing = strdup(arg);
	else if (!pos->mountpoint)
		pos->mountpoint = strdup(arg);
	else
		pos->extra = 1;
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct dm_options o = { .direct_io = 1, .sync_backing = -1,
				 .direct_backing = -1 };
	struct dm_positional pos = { 0 };
	struct fuse_cmdline_opts copts = { 0 };
	struct fuse_loop_config *lcfg;
	struct dm_profile prof;
	pthread_t sigthr;
	int have_sigthr = 0;
	int nice_value = DM_DEFAULT_NICE;
	sigset_t set;
	int ret = 1;

	if (fuse_opt_parse(&args, &o, dm_opt_spec, NULL) == -1)
		return 2;
	if (o.show_help) {
		dm_usage(stdout);
		return 0;
	}
	if (o.list_profiles) {
		dm_profiles_write_json(stdout);
		return 0;
	}
	if (fuse_opt_parse(&args, &pos, NULL, dm_opt_proc) == -1)
		return 2;
	if (!pos.backing || !pos.mountpoint || pos.extra) {
		dm_usage(stderr);
		return 2;
	}
	if (dm_build_profile(&o, &prof))
		return 2;
	if (o.nice) {
		char *end;
		long v = strtol(o.nice, &end, 10);

		if (*o.nice == '\0' || *end || v < -20 || v > 19) {
			fprintf(stderr,
				"devmodel: bad value for nice: '%s' (expected -20..19)\n",
				o.nice);
			return 2;
		}
		nice_value = (int)v;
	}
	if (dm_open_backing(pos.backing, o.size))
		return 2;
	dm.direct_io = o.direct_io;
	dm.sync_backing = prof.sync_backing;
	dm.counters_path = o.counters;
	/*
	 * The host profile pays the host's real costs (flush and direct IO,
	 * as a plain `losetup --direct-io` would); a throttled profile keeps
	 * the host's disk out of its timing: buffered IO and no host flush.
	 */
	if (o.direct_backing < 0)
		o.direct_backing = prof.sync_backing;
	if (!o.direct_backing && dm.direct_fd >= 0) {
		close(dm.direct_fd);
		dm.direct_fd = -1;
	}
	if (pthread_key_create(&dm_buf_key, dm_buf_free)) {
		fprintf(stderr, "devmodel: cannot create a thread key\n");
		return 1;
	}
	dm_model_init(&dm.model, &prof, dm_now_ns());
	/* sleeps of a few hundred us must not overshoot by the 50 us slack */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/*
	 * A device does not wait for the host's CPU: on a loaded host the
	 * daemon's wake-ups would otherwise add scheduling delay to every
	 * request.  Raising the priority needs CAP_SYS_NICE; without it the
	 * daemon runs at the caller's priority.
	 */
	if (setpriority(PRIO_PROCESS, 0, nice_value) && nice_value < 0 &&
	    errno != EACCES && errno != EPERM)
		fprintf(stderr, "devmodel: setpriority: %s\n", strerror(errno));

	if (fuse_opt_add_arg(&args, pos.mountpoint) ||
	    fuse_opt_add_arg(&args, "-ofsname=devmodel,subtype=devmodel") ||
	    fuse_parse_cmdline(&args, &copts) != 0) {
		fprintf(stderr, "devmodel: bad FUSE options\n");
		return 2;
	}

	/* blocked before any thread exists, so only dm_signal_thread takes it */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	dm.se = fuse_session_new(&args, &dm_ops, sizeof(dm_ops), NULL);
	if (!dm.se)
		goto out_sig;
	if (fuse_set_signal_handlers(dm.se))
		goto out_session;
	if (fuse_session_mount(dm.se, copts.mountpoint))
		goto out_handlers;
	/* threads do not survive the fork of fuse_daemonize(): start after */
	fuse_daemonize(copts.foreground);
	if (pthread_create(&sigthr, NULL, dm_signal_thread, &set)) {
		fprintf(stderr, "devmodel: cannot start the signal thread\n");
		goto out_unmount;
	}
	have_sigthr = 1;
	dm_write_counters();
	if (copts.singlethread) {
		ret = fuse_session_loop(dm.se);
	} else {
		lcfg = fuse_loop_cfg_create();
		if (!lcfg) {
			ret = 1;
			goto out_unmount;
		}
		fuse_loop_cfg_set_clone_fd(lcfg, (unsigned int)copts.clone_fd);
		/* UINT_MAX is fuse_parse_cmdline()'s "not given" */
		if (copts.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lcfg,
						       copts.max_idle_threads);
		fuse_loop_cfg_set_max_threads(lcfg, copts.max_threads);
		ret = fuse_session_loop_mt(dm.se, lcfg);
		fuse_loop_cfg_destroy(lcfg);
	}
out_unmount:
	fuse_session_unmount(dm.se);
	if (dm_write_counters())
		ret = 1;
out_handlers:
	fuse_remove_signal_handlers(dm.se);
out_session:
	fuse_session_destroy(dm.se);
out_sig:
	if (have_sigthr) {
		dm_stopping = 1;
		pthread_kill(sigthr, SIGUSR1);
		pthread_join(sigthr, NULL);
	}
	dm_model_destroy(&dm.model);
	close(dm.backing_fd);
	if (dm.direct_fd >= 0)
		close(dm.direct_fd);
	free(copts.mountpoint);
	dm_free_options(&o);
	free(pos.backing);
	free(pos.mountpoint);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
