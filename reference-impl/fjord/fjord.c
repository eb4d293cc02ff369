/*
 * fjord: a user-level Fjord (Kim & Ramachandran, "Fjord: Informed Storage
 * Management for Smartphones", seed 001) as a fusecore policy.
 *
 *   fjord [-f] -o preset=NAME[,key=value...] SOURCE MOUNTPOINT
 *
 * Mechanisms (enabled per preset, see fj_policy.c):
 *   rambuf  writes below `bypass` are staged in a RAM buffer (fj_buf), merged
 *           and reordered; evicted when the buffer is full, when data is
 *           older than flush_ms, on fsync of a critical file, before
 *           truncate-like metadata operations and at unmount.
 *   log     small critical data goes to the native file (page cache) *and*
 *           to a sequential checksummed log (fj_log); a critical fsync then
 *           only flushes the log. Checkpoints fdatasync the files and free
 *           the log. Replay runs at mount, before the mount is visible.
 *   relax   (fjord-*) fsync/fdatasync of a file under a whitelisted
 *           directory is acknowledged without writing anything; its data
 *           leaves the RAM buffer within flush_ms (then the native
 *           filesystem's own writeback applies). Metadata operations are
 *           never buffered; fsyncdir and every other file keep full
 *           durability.
 *
 * A critical fsync returns only once every byte written before it is either
 * fdatasync'ed in the native file or in a log record that is fdatasync'ed.
 * If the log cannot be written, critical fsyncs fail (EIO/ENOSPC) rather
 * than pretend.
 *
 * Per-inode state is a struct fj_file in fc_inode.pdata, created at the
 * first open for writing (with an own O_RDWR fd), classified critical or
 * not from its path at that moment, and flushed when the inode leaves the
 * core's table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "../fusecore/fusecore.h"
#include "fj_buf.h"
#include "fj_file.h"
#include "fj_log.h"
#include "fj_policy.h"

/* Written during option parsing and validate (single threaded), then read-only. */
static struct fj_config fj_cfg;
static struct fj_log *fj_log;
static struct fj_buf *fj_buf;
static struct fj_log_replay_report fj_replay;
static struct fj_log_stats fj_log_final;	/* after stop */
static bool fj_replayed;
static char *fj_whitelist_arg;
static struct fc_policy fj_policy;
static dev_t fj_log_dev;
static ino_t fj_log_ino;

/* Counters, atomic. */
static uint64_t fj_c_bypassed, fj_c_direct;
static uint64_t fj_c_fsync_honoured, fj_c_fsync_relaxed, fj_c_fsync_failed;
static uint64_t fj_c_bytes_native, fj_c_native_writes, fj_c_datasyncs;
static uint64_t fj_c_log_fallback;

#define FJ_ADD(c, v) __atomic_fetch_add(&(c), (v), __ATOMIC_RELAXED)
#define FJ_GET(c) __atomic_load_n(&(c), __ATOMIC_RELAXED)

static bool fj_is_native(void)
{
	return !fj_cfg.rambuf && !fj_cfg.log;
}

/* Does this file get full durability? */
static bool fj_critical(const struct fj_file *fj)
{
	return !fj_cfg.relax || fj->critical;
}

/* ---- storing data ------------------------------------------------------ */

static int fj_pwrite_native(struct fj_file *fj, uint64_t off, const void *data,
			    size_t len)
{
	ssize_t n = fc_pwrite_all(fj->fd, data, len, off);

	if (n < 0)
		return n;
	FJ_ADD(fj_c_bytes_native, len);
	FJ_ADD(fj_c_native_writes, 1);
	return 0;
}

/*
 * Writes data to its final place and, for critical data below `bypass`
 * with a log, to the log too. Caller holds fj->lock. Also the eviction
 * callback of the RAM buffer.
 */
static int fj_store(void *ctx, struct fj_file *fj, uint64_t off,
		    const void *data, size_t len)
{
	bool crit = fj_critical(fj);
	int r;

	(void)ctx;
	r = fj_pwrite_native(fj, off, data, len);
	if (r)
		return r;
	if (!fj_log || !crit) {
		fj->needs_datasync = true;
		return 0;
	}
	/*
	 * A big write goes to the log only if the file already has live
	 * records: replay must not put older logged bytes over it.
	 */
	if (len < fj_cfg.bypass || fj_log_is_live(fj_log, fj)) {
		r = fj_log_append_data(fj_log, fj, off, data, len);
		if (!r)
			return 0;
		if (r != -EFBIG && r != -ENOSPC) {
			/* log broken: the next critical fsync reports it */
			fj->log_failed = -r;
			return 0;
		}
		/* too big for the log: retire older records, then direct */
		FJ_ADD(fj_c_log_fallback, 1);
		if (fj_log_is_live(fj_log, fj)) {
			r = fj_log_checkpoint(fj_log);
			if (r) {
				fj->log_failed = -r;
				return 0;
			}
		}
	}
	fj->needs_datasync = true;
	return 0;
}

/* ---- per-inode state --------------------------------------------------- */

static struct fj_file *fj_of(struct fc_inode *i)
{
	struct fj_file *fj;

	pthread_mutex_lock(&i->lock);
	fj = i->pdata;
	pthread_mutex_unlock(&i->lock);
	return fj;
}

/* Path of i relative to SOURCE ("" if it cannot be told). */
static void fj_rel_path(struct fc_inode *i, char *rel, size_t size)
{
	char abs[PATH_MAX];
	size_t n = strlen(fc_cfg.source);

	rel[0] = '\0';
	if (fc_inode_path(i, abs, sizeof(abs)))
		return;
	if (!strncmp(abs, fc_cfg.source, n) && abs[n] == '/')
		snprintf(rel, size, "%s", abs + n + 1);
}

static int fj_attach(struct fc_inode *i)
{
	char proc[64], rel[PATH_MAX];
	struct fj_file *fj;
	int fd, r = 0;

	pthread_mutex_lock(&i->lock);
	if (i->pdata)
		goto out;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", i->fd);
	fd = open(proc, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		goto out;	/* not writable by us: plain passthrough */
	fj_rel_path(i, rel, sizeof(rel));
	fj = fj_file_new(fd, rel, !fj_config_is_whitelisted(&fj_cfg, rel));
	if (!fj) {
		r = -ENOMEM;
		goto out;
	}
	i->pdata = fj;
out:
	pthread_mutex_unlock(&i->lock);
	return r;
}

/* ---- directory syncs --------------------------------------------------- */

/*
 * SQLite (journal_mode=TRUNCATE, synchronous=FULL) fsyncs the journal's
 * directory at every transaction, although the directory has not changed:
 * on ext4 each of those is still a device cache flush. In fjord-* presets a
 * directory sync inside a whitelisted directory is honoured whenever the
 * directory changed (its ctime moved) since its last honoured sync, and
 * skipped when it would make nothing new durable. Metadata durability is
 * therefore kept: every create/unlink/rename an application syncs is synced.
 * A ctime is trusted only if it is 50 ms older than the start of the sync
 * that recorded it, so a change within the same clock tick is never missed.
 * This is fusecore's fsyncdir hook; every other sync is the core's.
 */
#define FJ_DIRSYNC_SLOTS 256
#define FJ_DIRSYNC_MARGIN_NS (50 * 1000000LL)

struct fj_dirsync {
	dev_t dev;
	ino_t ino;
	int64_t ctime_ns;	/* directory ctime seen before the sync */
	int64_t synced_ns;	/* realtime at the start of that sync */
};

static pthread_mutex_t fj_dirsync_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fj_dirsync fj_dirsyncs[FJ_DIRSYNC_SLOTS];	/* fj_dirsync_lock */
static uint64_t fj_c_dirsync_honoured, fj_c_dirsync_skipped;	/* atomic */

static bool fj_dir_whitelisted(int fd)
{
	char proc[64], abs[PATH_MAX];
	size_t n = strlen(fc_cfg.source);
	ssize_t len;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	len = readlink(proc, abs, sizeof(abs) - 1);
	if (len < 0)
		return false;
	abs[len] = '\0';
	if (strncmp(abs, fc_cfg.source, n) || abs[n] != '/')
		return false;
	return fj_config_dir_whitelisted(&fj_cfg, abs + n + 1);
}

static int fj_fsyncdir(struct fc_inode *dir, int fd, int datasync)
{
	struct fj_dirsync *e;
	struct timespec now;
	struct statx stx;
	int64_t ctime_ns, start;
	bool skip;
	int r;

	(void)dir;
	if (!fj_cfg.relax || !fj_dir_whitelisted(fd) ||
	    statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_CTIME, &stx))
		return 0;	/* the core syncs the directory */
	ctime_ns = stx.stx_ctime.tv_sec * 1000000000LL + stx.stx_ctime.tv_nsec;
	{
		dev_t dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		ino_t ino = stx.stx_ino;

		e = &fj_dirsyncs[(ino * 0x9e3779b97f4a7c15ULL ^ dev) %
				 FJ_DIRSYNC_SLOTS];
		pthread_mutex_lock(&fj_dirsync_lock);
		skip = e->dev == dev && e->ino == ino &&
		       e->ctime_ns == ctime_ns &&
		       e->synced_ns > ctime_ns + FJ_DIRSYNC_MARGIN_NS;
		pthread_mutex_unlock(&fj_dirsync_lock);
		if (skip) {
			FJ_ADD(fj_c_dirsync_skipped, 1);
			return FC_HANDLED;
		}
		clock_gettime(CLOCK_REALTIME, &now);
		start = now.tv_sec * 1000000000LL + now.tv_nsec;
		r = datasync ? fdatasync(fd) : fsync(fd);
		if (r < 0)
			return -errno;
		pthread_mutex_lock(&fj_dirsync_lock);
		*e = (struct fj_dirsync){ dev, ino, ctime_ns, start };
		pthread_mutex_unlock(&fj_dirsync_lock);
	}
	FJ_ADD(fj_c_dirsync_honoured, 1);
	return FC_HANDLED;
}

/* ---- hooks ------------------------------------------------------------- */

static int fj_preset_hook(const char *name, struct fc_config *cfg)
{
	(void)cfg;
	return fj_config_preset(&fj_cfg, name);
}

static int fj_bad(const char *key, const char *val, const char *why)
{
	fprintf(stderr, "fjord: invalid option %s=%s: %s\n", key,
		val ? val : "", why);
	return -1;
}

static int fj_parse_opt(const char *key, const char *val,
			struct fc_config *cfg)
{
	uint64_t v;
	bool b;

	(void)cfg;
	if (!strcmp(key, "whitelist")) {
		/* parsed in validate, once the mountpoint is known */
		if (!val || !*val)
			return fj_bad(key, val, "needs DIR[:DIR...]");
		free(fj_whitelist_arg);
		fj_whitelist_arg = strdup(val);
		return 1;
	}
	if (!strcmp(key, "ram_buffer") || !strcmp(key, "bypass") ||
	    !strcmp(key, "log_size")) {
		if (fc_parse_size(val, &v))
			return fj_bad(key, val, "not a size (4k, 64k, 16M)");
		if (!strcmp(key, "ram_buffer")) {
			if (v < 64 * 1024)
				return fj_bad(key, val, "must be at least 64k");
			fj_cfg.ram_buffer = v;
		} else if (!strcmp(key, "bypass")) {
			if (v < 512)
				return fj_bad(key, val, "must be at least 512");
			fj_cfg.bypass = v;
		} else {
			fj_cfg.log_size = v;
		}
		return 1;
	}
	if (!strcmp(key, "flush_ms") || !strcmp(key, "checkpoint_ms")) {
		if (fc_parse_duration_ms(val, &v))
			return fj_bad(key, val, "not a duration (500, 2s)");
		if (!strcmp(key, "flush_ms"))
			fj_cfg.flush_ms = v ? v : 1;
		else
			fj_cfg.checkpoint_ms = v;
		return 1;
	}
	if (!strcmp(key, "log")) {
		if (!val || !*val)
			return fj_bad(key, val, "needs a path");
		free(fj_cfg.log_path);
		fj_cfg.log_path = strdup(val);
		return 1;
	}
	if (!strcmp(key, "log_prealloc")) {
		if (fc_parse_bool(val, &b))
			return fj_bad(key, val, "must be 0/1");
		fj_cfg.log_prealloc = b;
		return 1;
	}
	return 0;
}

static bool fj_path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

static void fj_print_replay(void)
{
	fprintf(stderr,
		"fjord: log replay: %llu records applied (%llu bytes), %llu skipped "
		"(file gone), stopped at offset %llu: %s; %llu valid-looking "
		"records after the stop not applied\n",
		(unsigned long long)fj_replay.records_applied,
		(unsigned long long)fj_replay.bytes_applied,
		(unsigned long long)fj_replay.records_skipped,
		(unsigned long long)fj_replay.stop_offset,
		fj_replay.stop_reason,
		(unsigned long long)fj_replay.records_after_stop);
}

/* Everything that can fail is checked here, before anything is mounted. */
static int fj_validate(struct fc_config *cfg)
{
	char err[1024], abspath[PATH_MAX];
	struct stat st;
	int r, mount_fd;

	/* the core has resolved and checked SOURCE and MOUNTPOINT already */
	if (!cfg->preset) {
		fprintf(stderr, "fjord: no preset given (-o preset=NAME, one "
			"of native, logging, rambuf, both, fjord-ram, "
			"fjord-both)\n");
		return -1;
	}
	if (fj_whitelist_arg &&
	    fj_config_whitelist(&fj_cfg, fj_whitelist_arg, cfg->mountpoint, err,
				sizeof(err))) {
		fprintf(stderr, "fjord: invalid option whitelist=%s: %s\n",
			fj_whitelist_arg, err);
		return -1;
	}
	fj_policy.tick_ms = fj_cfg.flush_ms / 4 < 5 ? 5 :
			    fj_cfg.flush_ms / 4 > 100 ? 100 : fj_cfg.flush_ms / 4;
	/* a whitelisted directory must not resolve outside SOURCE */
	for (unsigned int k = 0; k < fj_cfg.n_whitelist; k++) {
		char p[PATH_MAX], real[PATH_MAX];

		snprintf(p, sizeof(p), "%s/%s", cfg->source,
			 fj_cfg.whitelist[k]);
		if (realpath(p, real) && !fj_path_under(real, cfg->source)) {
			fprintf(stderr, "fjord: invalid option whitelist: '%s' "
				"resolves to %s, outside the mount\n",
				fj_cfg.whitelist[k], real);
			return -1;
		}
	}
	if (fj_cfg.n_whitelist && !fj_cfg.relax)
		fprintf(stderr, "fjord: note: preset %s keeps full durability "
			"for every file; the whitelist only matters for "
			"fjord-ram and fjord-both\n", fj_cfg.preset);
	if (fj_cfg.bypass > fj_cfg.ram_buffer) {
		fprintf(stderr, "fjord: bypass (%llu) must not exceed "
			"ram_buffer (%llu)\n",
			(unsigned long long)fj_cfg.bypass,
			(unsigned long long)fj_cfg.ram_buffer);
		return -1;
	}
	if (!fj_cfg.log)
		return 0;

	if (!fj_cfg.log_path) {
		snprintf(abspath, sizeof(abspath), "%s/.fjord.log",
			 cfg->source);
	} else if (!realpath(fj_cfg.log_path, abspath)) {
		/* not there yet: resolve its directory */
		char dir[PATH_MAX], *slash;

		snprintf(dir, sizeof(dir), "%s", fj_cfg.log_path);
		slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		if (!realpath(slash ? (dir[0] ? dir : "/") : ".", abspath)) {
			fprintf(stderr, "fjord: log directory of %s: %s\n",
				fj_cfg.log_path, strerror(errno));
			return -1;
		}
		strncat(abspath, "/", sizeof(abspath) - strlen(abspath) - 1);
		strncat(abspath, slash ? slash + 1 : fj_cfg.log_path,
			sizeof(abspath) - strlen(abspath) - 1);
	}
	if (fj_path_under(abspath, cfg->mountpoint)) {
		fprintf(stderr, "fjord: the log %s must not lie inside the "
			"mountpoint %s\n", abspath, cfg->mountpoint);
		return -1;
	}
	if (fj_cfg.log_size < FJ_LOG_MIN_SIZE ||
	    fj_cfg.log_size < 4 * fj_cfg.bypass + (64 << 10)) {
		fprintf(stderr, "fjord: log_size %llu is too small: it must "
			"be at least %u bytes and 4 x bypass + 64k\n",
			(unsigned long long)fj_cfg.log_size, FJ_LOG_MIN_SIZE);
		return -1;
	}
	r = fj_log_open(&fj_log, abspath, fj_cfg.log_size,
			fj_cfg.log_prealloc, err, sizeof(err));
	if (r) {
		fprintf(stderr, "fjord: %s\n", err);
		return -1;
	}
	free(fj_cfg.log_path);
	fj_cfg.log_path = strdup(abspath);
	if (!stat(abspath, &st)) {
		fj_log_dev = st.st_dev;
		fj_log_ino = st.st_ino;
	}
	mount_fd = open(cfg->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mount_fd < 0) {
		fprintf(stderr, "fjord: source %s: %s\n", cfg->source,
			strerror(errno));
		return -1;
	}
	r = fj_log_replay(fj_log, mount_fd, &fj_replay);
	close(mount_fd);
	if (r) {
		fprintf(stderr, "fjord: log replay failed: %s\n", strerror(-r));
		return -1;
	}
	fj_replayed = true;
	if (fj_replay.records_applied || fj_replay.records_skipped ||
	    fj_replay.records_after_stop || strcmp(fj_replay.stop_reason, "end"))
		fj_print_replay();
	return 0;
}

static int fj_start(const struct fc_config *cfg)
{
	(void)cfg;
	if (fj_cfg.log && !fj_log)
		return -EINVAL;
	if (fj_cfg.rambuf) {
		fj_buf = fj_buf_new(fj_cfg.ram_buffer, fj_cfg.bypass, fj_store,
				    NULL);
		if (!fj_buf)
			return -ENOMEM;
	}
	if (fj_log)
		return fj_log_start(fj_log, fj_cfg.checkpoint_ms);
	return 0;
}

static void fj_stop(void)
{
	if (fj_buf) {
		int r = fj_buf_reclaim(fj_buf, fc_now_ns(), 0);

		if (r < 0)
			fc_log("unmount: buffered data could not be written: %s",
			       strerror(-r));
	}
	if (fj_log) {
		/* keep the final figures for the counters dumped after stop */
		fj_log_checkpoint(fj_log);
		fj_log_get_stats(fj_log, &fj_log_final);
		fj_log_close(fj_log, false);
		fj_log = NULL;
	}
	/* fj_buf stays allocated: counters are dumped after stop */
}

static bool fj_is_log_inode(struct fc_inode *i)
{
	return fj_log && i->src_dev == fj_log_dev && i->src_ino == fj_log_ino;
}

static int fj_open(struct fc_file *f)
{
	if (fj_is_log_inode(f->inode))
		return -EACCES;
	if (fj_is_native() || !f->inode->is_reg ||
	    (f->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	return fj_attach(f->inode);
}

static ssize_t fj_write(struct fc_file *f, struct fuse_bufvec *in, off_t off)
{
	struct fj_file *fj = fj_is_native() ? NULL : fj_of(f->inode);
	size_t size = fuse_buf_size(in);
	unsigned char *data;
	ssize_t n;
	int r;

	if (!fj) {
		n = fc_write_bufvec(f, in, off);
		if (n > 0) {
			FJ_ADD(fj_c_bytes_native, n);
			FJ_ADD(fj_c_native_writes, 1);
			FJ_ADD(fj_c_direct, 1);
		}
		return n;
	}
	data = malloc(size ? size : 1);
	if (!data)
		return -ENOMEM;
	n = fc_copy_bufvec(in, data, size);
	if (n < 0) {
		free(data);
		return n;
	}
	size = n;

	pthread_mutex_lock(&fj->lock);
	if (size >= fj_cfg.bypass) {
		/* newer than anything staged for the range */
		if (fj_buf)
			fj_buf_discard(fj_buf, fj, off, size);
		FJ_ADD(fj_c_bypassed, 1);
		r = fj_store(NULL, fj, off, data, size);
	} else if (fj_buf) {
		r = fj_buf_write(fj_buf, fj, off, data, size, fc_now_ns());
	} else {
		r = fj_store(NULL, fj, off, data, size);
	}
	pthread_mutex_unlock(&fj->lock);
	free(data);
	if (r)
		return r;
	if (fj_buf && fj_buf_over(fj_buf)) {
		r = fj_buf_reclaim(fj_buf, fc_now_ns(), UINT64_MAX);
		if (r < 0)
			fc_log("eviction failed: %s", strerror(-r));
	}
	return size;
}

static ssize_t fj_read(struct fc_file *f, char *buf, size_t size, off_t off)
{
	struct fj_file *fj = fj_of(f->inode);
	ssize_t n;

	if (!fj)
		return fc_pread(f->fd, buf, size, off);
	pthread_mutex_lock(&fj->lock);
	n = fc_pread(f->fd, buf, size, off);
	if (n == -EBADF)
		n = fc_pread(fj->fd, buf, size, off);
	if (n >= 0)
		n = fj_buf_read(fj, off, buf, size, n);
	pthread_mutex_unlock(&fj->lock);
	return n;
}

static int fj_fsync(struct fc_file *f, int datasync)
{
	struct fj_file *fj = fj_of(f->inode);
	bool need_datasync;
	uint64_t seq;
	int r = 0, failed;

	if (!fj) {
		FJ_ADD(fj_c_fsync_honoured, 1);
		return 0;	/* the core fsyncs the native fd */
	}
	if (!fj_critical(fj)) {
		FJ_ADD(fj_c_fsync_relaxed, 1);
		return FC_HANDLED;
	}
	pthread_mutex_lock(&fj->lock);
	if (fj_buf)
		r = fj_buf_flush_file(fj_buf, fj);
	/*
	 * The log restores data and size. A native sync is still needed for
	 * data written outside it, without a log at all, and once after
	 * the inode was attached or its attributes changed (a fresh create
	 * must exist after a crash for its logged data to be replayed).
	 */
	need_datasync = fj->needs_datasync || !fj_log || fj->meta_dirty;
	fj->needs_datasync = false;
	fj->meta_dirty = false;
	seq = fj->log_seq;
	failed = fj->log_failed;
	pthread_mutex_unlock(&fj->lock);
	if (!r && failed)
		r = -failed;
	if (!r && fj_log && seq)
		r = fj_log_sync(fj_log, seq);
	if (r) {
		FJ_ADD(fj_c_fsync_failed, 1);
		fc_log("fsync of critical file %s FAILED: %s", fj->path,
		       strerror(-r));
		if (r != -EIO && r != -ENOSPC && r != -EDQUOT)
			r = -EIO;
		return r;
	}
	FJ_ADD(fj_c_fsync_honoured, 1);
	if (need_datasync) {
		FJ_ADD(fj_c_datasyncs, 1);
		return 0;	/* the core fsyncs/fdatasyncs the native fd */
	}
	(void)datasync;
	return FC_HANDLED;
}

static int fj_sync_inode(struct fc_inode *i, enum fc_cause cause)
{
	struct fj_file *fj = fj_of(i);
	int r = 0;

	(void)cause;
	if (!fj || !fj_buf)
		return 0;
	pthread_mutex_lock(&fj->lock);
	r = fj_buf_flush_file(fj_buf, fj);
	pthread_mutex_unlock(&fj->lock);
	return r;
}

/*
 * Release of a writable open file: its staged data goes to the native file
 * (page cache, no sync), so that what is on the native filesystem after
 * close matches what the application wrote; durability is still fsync's.
 */
static int fj_release(struct fc_file *f)
{
	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	return fj_sync_inode(f->inode, FC_CAUSE_CLOSE);
}

static void fj_getattr(struct fc_inode *i, struct stat *st)
{
	struct fj_file *fj;
	struct stat now;
	uint64_t end;

	if (!fj_buf || !(fj = fj_of(i)))
		return;
	/*
	 * The core's stat may predate an eviction that just moved bytes
	 * from the buffer to the file: look at both under the file lock,
	 * or the kernel could be told a size too small and cut the file.
	 */
	pthread_mutex_lock(&fj->lock);
	end = fj_buf_end(fj);
	if (!fstat(fj->fd, &now) && now.st_size > st->st_size)
		st->st_size = now.st_size;
	pthread_mutex_unlock(&fj->lock);
	if ((off_t)end > st->st_size)
		st->st_size = end;
}

static int fj_setattr(struct fc_inode *i, struct fc_file *f,
		      const struct stat *attr, int to_set)
{
	struct fj_file *fj = fj_of(i);
	int r = 0;

	(void)f;
	if (!fj)
		return 0;
	pthread_mutex_lock(&fj->lock);
	if (to_set & ~FUSE_SET_ATTR_SIZE)
		fj->meta_dirty = true;
	if (!(to_set & FUSE_SET_ATTR_SIZE)) {
		pthread_mutex_unlock(&fj->lock);
		return 0;
	}
	if (fj_buf)
		fj_buf_discard(fj_buf, fj, attr->st_size, UINT64_MAX);
	if (fj_log && fj_critical(fj) && fj_log_is_live(fj_log, fj)) {
		/* replay must truncate where the application did */
		r = fj_log_append_trunc(fj_log, fj, attr->st_size);
		if (r) {
			fj->log_failed = -r;
			r = 0;
		}
	} else {
		fj->needs_datasync = true;
	}
	pthread_mutex_unlock(&fj->lock);
	return r;
}

static int fj_protect_log(struct fc_inode *parent, const char *name)
{
	struct stat st;

	if (!fj_log || fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return 0;
	return st.st_dev == fj_log_dev && st.st_ino == fj_log_ino ? -EBUSY : 0;
}

static int fj_before_unlink(struct fc_inode *parent, const char *name)
{
	return fj_protect_log(parent, name);
}

static int fj_before_rename(struct fc_inode *parent, const char *name,
			    struct fc_inode *newparent, const char *newname,
			    unsigned int flags)
{
	(void)flags;
	if (fj_protect_log(parent, name))
		return -EBUSY;
	return fj_protect_log(newparent, newname);
}

static void fj_inode_free(struct fc_inode *i)
{
	struct fj_file *fj = i->pdata;

	if (!fj)
		return;
	i->pdata = NULL;
	if (fj_buf) {
		int r;

		pthread_mutex_lock(&fj->lock);
		r = fj_buf_flush_file(fj_buf, fj);
		pthread_mutex_unlock(&fj->lock);
		if (r)
			fc_log("%s: buffered data lost: %s", fj->path,
			       strerror(-r));
	}
	fj_file_put(fj);
}

static void fj_tick(void)
{
	if (fj_buf) {
		int r = fj_buf_reclaim(fj_buf, fc_now_ns(),
				       fj_cfg.flush_ms * 1000000ull);

		if (r < 0)
			fc_log("timed flush failed: %s", strerror(-r));
	}
}

static void fj_json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void fj_counters_json(FILE *out)
{
	struct fj_buf_stats bs = { 0 };
	struct fj_log_stats ls = { 0 };

	if (fj_buf)
		fj_buf_get_stats(fj_buf, &bs);
	if (fj_log)
		fj_log_get_stats(fj_log, &ls);
	else
		ls = fj_log_final;
	fprintf(out, "    \"fjord_preset\": ");
	fj_json_str(out, fj_cfg.preset);
	fprintf(out, ",\n    \"mechanisms\": {\"rambuf\": %s, \"log\": %s, "
		"\"relax\": %s}",
		fj_cfg.rambuf ? "true" : "false",
		fj_cfg.log ? "true" : "false",
		fj_cfg.relax ? "true" : "false");
	fprintf(out, ",\n    \"config\": {\"ram_buffer\": %llu, \"bypass\": "
		"%llu, \"flush_ms\": %llu, \"checkpoint_ms\": %llu, "
		"\"log_size\": %llu, \"log\": ",
		(unsigned long long)fj_cfg.ram_buffer,
		(unsigned long long)fj_cfg.bypass,
		(unsigned long long)fj_cfg.flush_ms,
		(unsigned long long)fj_cfg.checkpoint_ms,
		(unsigned long long)(fj_cfg.log ? fj_cfg.log_size : 0));
	if (fj_cfg.log)
		fj_json_str(out, fj_cfg.log_path);
	else
		fprintf(out, "null");
	fprintf(out, ", \"whitelist\": [");
	for (unsigned int k = 0; k < fj_cfg.n_whitelist; k++) {
		fprintf(out, "%s", k ? ", " : "");
		fj_json_str(out, fj_cfg.whitelist[k]);
	}
	fprintf(out, "]}");
#define FJ_KV(name, v) \
	fprintf(out, ",\n    \"" name "\": %llu", (unsigned long long)(v))
	FJ_KV("writes_buffered", bs.writes);
	FJ_KV("writes_merged", bs.merged);
	FJ_KV("writes_bypassed", FJ_GET(fj_c_bypassed));
	FJ_KV("writes_direct", FJ_GET(fj_c_direct));
	FJ_KV("writes_logged", ls.data_records);
	FJ_KV("writes_checkpointed", ls.checkpointed);
	FJ_KV("fsyncs_honoured", FJ_GET(fj_c_fsync_honoured));
	FJ_KV("fsyncs_relaxed", FJ_GET(fj_c_fsync_relaxed));
	FJ_KV("fsyncs_failed", FJ_GET(fj_c_fsync_failed));
	FJ_KV("fsyncs_native_sync", FJ_GET(fj_c_datasyncs));
	FJ_KV("dirsyncs_honoured", FJ_GET(fj_c_dirsync_honoured));
	FJ_KV("dirsyncs_skipped", FJ_GET(fj_c_dirsync_skipped));
	FJ_KV("bytes_native", FJ_GET(fj_c_bytes_native));
	FJ_KV("native_writes", FJ_GET(fj_c_native_writes));
	FJ_KV("bytes_log", ls.bytes_written);
	FJ_KV("log_syncs", ls.syncs);
	FJ_KV("log_checkpoints", ls.checkpoints);
	FJ_KV("log_file_syncs", ls.file_syncs);
	FJ_KV("log_used_bytes", ls.used);
	FJ_KV("log_fallback_direct", FJ_GET(fj_c_log_fallback));
	FJ_KV("log_error", ls.error);
	FJ_KV("buffer_bytes", bs.bytes);
	FJ_KV("buffer_peak_bytes", bs.peak_bytes);
	FJ_KV("buffer_files", bs.files);
	FJ_KV("buffer_evicted_extents", bs.evicted);
	FJ_KV("buffer_evicted_bytes", bs.evicted_bytes);
	FJ_KV("buffer_dropped_bytes", bs.dropped_bytes);
	fprintf(out, ",\n    \"replay\": ");
	if (!fj_replayed) {
		fprintf(out, "null");
		return;
	}
	fprintf(out, "{\"records_applied\": %llu, \"bytes_applied\": %llu, "
		"\"records_skipped\": %llu, \"records_after_stop\": %llu, "
		"\"files\": %llu, \"first_seq\": %llu, \"last_good_seq\": %llu, "
		"\"stop_offset\": %llu, \"stop_reason\": ",
		(unsigned long long)fj_replay.records_applied,
		(unsigned long long)fj_replay.bytes_applied,
		(unsigned long long)fj_replay.records_skipped,
		(unsigned long long)fj_replay.records_after_stop,
		(unsigned long long)fj_replay.files,
		(unsigned long long)fj_replay.first_seq,
		(unsigned long long)fj_replay.last_good_seq,
		(unsigned long long)fj_replay.stop_offset);
	fj_json_str(out, fj_replay.stop_reason);
	fprintf(out, "}");
#undef FJ_KV
}

static struct fc_policy fj_policy = {
	.name = "fjord",
	.options_help =
		"    -o preset=NAME       native, logging, rambuf, both, fjord-ram, fjord-both\n"
		"    -o whitelist=D1:D2   directories (relative to the mount root) whose\n"
		"                         files are non-critical (fjord-* relax their fsync)\n"
		"    -o ram_buffer=SIZE   RAM write buffer (16M)\n"
		"    -o bypass=SIZE       writes of at least SIZE skip buffer and log (64k)\n"
		"    -o flush_ms=MS       age bound of buffered data (5000)\n"
		"    -o log=PATH          non-volatile log (SOURCE/.fjord.log)\n"
		"    -o log_size=SIZE     log size (128M)\n"
		"    -o checkpoint_ms=MS  log checkpoint period, 0 = only when half full (5000)\n"
		"    -o log_prealloc=BOOL zero-fill a new log (1)\n"
		"\nexamples:\n"
		"    fjord -o preset=fjord-ram,whitelist=cache SRC MNT\n"
		"    fjord -f -o preset=both,log=/data/fjord.log,log_size=64M,counters=/tmp/c.json SRC MNT\n",
	.preset = fj_preset_hook,
	.parse_opt = fj_parse_opt,
	.validate = fj_validate,
	.start = fj_start,
	.stop = fj_stop,
	.write = fj_write,
	.read = fj_read,
	.fsync = fj_fsync,
	.fsyncdir = fj_fsyncdir,
	.sync_inode = fj_sync_inode,
	.release = fj_release,
	.open = fj_open,
	.getattr = fj_getattr,
	.setattr = fj_setattr,
	.before_unlink = fj_before_unlink,
	.before_rename = fj_before_rename,
	.inode_free = fj_inode_free,
	.tick = fj_tick,
	.counters_json = fj_counters_json,
};

int main(int argc, char *argv[])
{
	fj_config_init(&fj_cfg);
	fj_policy.tick_ms = 100;
	return fc_main(argc, argv, &fj_policy);
}
