// SPDX-License-Identifier: MIT
/*
 * bFUSE: the buffered FUSE daemon of Jeong & Won, "Buffered FUSE: optimising
 * the Android IO stack for user-level filesystem" (IJES 2014), as a fusecore
 * policy.  Three ingredients, each an option:
 *
 *   1. the FUSE IO unit (max_write): 4 KiB on the legacy Android sdcard
 *      daemon, 512 KiB in bFUSE (io_unit=);
 *   2. a user-level write buffer: an array of fixed-size entries (8 MiB of
 *      2 MiB entries); a write that continues the newest entry of the same
 *      file is copied into it (coalesced), otherwise it takes a new entry
 *      (buffer=, entry=);
 *   3. a management thread that writes entries out, one pwrite per entry:
 *      at once when an entry is full, and every flush_ms for entries idle
 *      for flush_ms (or older than 100 x flush_ms) (flush_ms=).
 *
 * POSIX semantics with the buffer on: a read flushes the file's entries
 * first if one overlaps it (or the native file is too short); stat sizes include buffered data; truncate and utimes flush first;
 * close (FUSE_FLUSH), release, fsync and fdatasync flush the file's entries
 * before returning; a failed deferred pwrite (ENOSPC, EIO) is kept on the
 * inode and returned by the next fsync or close of the file, and later
 * writes of that file go straight to the native file; unmount flushes all.
 * Entries hold a reference to the open file whose fd they write with, so
 * rename and unlink need no flush.
 *
 * Ordering: entries of one inode are written in the order they were created
 * (seq), and only the newest entry of an inode is ever extended, so a later
 * write never lands before an earlier one.  All native writes of an inode
 * (entry flushes and unbuffered writes) are serialised by its flush_lock.
 *
 * Locking:
 *   bf_lock       protects bf_entries[] (state, bi, off, len, seq, times,
 *                 data contents while FILLING), bf_seq, bf_occupancy,
 *                 bf_stopping, and every bf_inode's nentries and err.
 *   bi->flush_lock  serialises native writes of one inode; taken before
 *                 bf_lock, never while waiting for a free entry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusecore.h"

#define BF_MAX_ENTRIES 4096
#define BF_ALL UINT64_MAX

enum bf_state { BF_FREE, BF_FILLING, BF_SEALED, BF_FLUSHING };

struct bf_inode {
	pthread_mutex_t flush_lock;
	unsigned int nentries;	/* bf_lock: entries not FREE */
	int err;		/* bf_lock: deferred errno, 0 = none */
};

struct bf_entry {
	enum bf_state state;
	struct bf_inode *bi;
	struct fc_file *file;	/* referenced while not FREE */
	off_t off;
	size_t len;
	uint64_t seq;
	uint64_t created_ns;
	uint64_t touched_ns;
	char *data;		/* entry_size bytes */
};

/* Configuration: set by options, constant once serving. */
static uint64_t bf_buffer_size = 8 << 20;
static uint64_t bf_entry_size = 2 << 20;
static uint64_t bf_flush_ms = 10;
static unsigned int bf_nentries;

static struct bf_entry *bf_entries;
static pthread_mutex_t bf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bf_cond_free;	/* an entry became FREE */
static pthread_cond_t bf_cond_work;	/* an entry was sealed / stopping */
static uint64_t bf_seq;
static uint64_t bf_occupancy;
static bool bf_stopping;
static pthread_t bf_flusher;
static bool bf_flusher_running;	/* start/stop only */

static struct fc_counter *bf_c_buffered, *bf_c_direct, *bf_c_coalesced;
static struct fc_counter *bf_c_entries_used, *bf_c_full_waits;
static struct fc_counter *bf_c_hwm_bytes, *bf_c_hwm_entries;
static struct fc_counter *bf_c_deferred_errors, *bf_c_errors_reported;
static struct fc_counter *bf_c_reads_unflushed;
static struct fc_counter *bf_c_flush[FC_CAUSE_COUNT];
static char bf_flush_names[FC_CAUSE_COUNT][48];

/* ---- options ---------------------------------------------------------- */

static int bf_preset(const char *name, struct fc_config *cfg)
{
	cfg->splice = false;
	cfg->writeback_cache = false;
	if (!strcmp(name, "legacy")) {
		/* old Android sdcard: 4 KiB, one thread, pwrite per request */
		cfg->io_unit = 4096;
		cfg->threads = 1;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "bfuse")) {
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		bf_buffer_size = 8 << 20;
		bf_entry_size = 2 << 20;
		bf_flush_ms = 10;
	} else if (!strcmp(name, "nobuf")) {
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "zerocopy")) {
		/* seed 003: big writes and splice, no buffer */
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		cfg->splice = true;
		bf_buffer_size = 0;
	} else {
		return -EINVAL;
	}
	return 0;
}

static int bf_bad(const struct fc_config *cfg, const char *key,
		  const char *val, const char *why)
{
	fprintf(stderr, "%s: invalid option %s=%s: %s\n", cfg->progname, key,
		val ? val : "", why);
	return -EINVAL;
}

static int bf_parse_opt(const char *key, const char *val,
			struct fc_config *cfg)
{
	uint64_t v;

	if (!strcmp(key, "buffer")) {
		if (fc_parse_size(val, &v))
			return bf_bad(cfg, key, val, "not a size (0, 8M)");
		if (v > (1ULL << 30))
			return bf_bad(cfg, key, val, "at most 1G");
		bf_buffer_size = v;
		return 1;
	}
	if (!strcmp(key, "entry")) {
		if (fc_parse_size(val, &v))
			return bf_bad(cfg, key, val, "not a size (2M)");
		if (v < 4096 || v > (64 << 20) || v % 4096)
			return bf_bad(cfg, key, val, "must be a multiple of "
				      "4k between 4k and 64M");
		bf_entry_size = v;
		return 1;
	}
	if (!strcmp(key, "flush_ms")) {
		if (fc_parse_duration_ms(val, &v))
			return bf_bad(cfg, key, val, "not a duration (10ms)");
		if (v < 1 || v > 60000)
			return bf_bad(cfg, key, val, "must be 1ms..60s");
		bf_flush_ms = v;
		return 1;
	}
	return 0;
}

static int bf_validate(struct fc_config *cfg)
{
	if (!cfg->preset && !cfg->io_unit)
		cfg->io_unit = 512 << 10;	/* default preset: bfuse */
	if (!bf_buffer_size) {
		bf_nentries = 0;
		return 0;
	}
	if (bf_buffer_size < bf_entry_size || bf_buffer_size % bf_entry_size) {
		fprintf(stderr, "%s: invalid option buffer=%llu: must be 0 or a "
			"multiple of entry=%llu\n", cfg->progname,
			(unsigned long long)bf_buffer_size,
			(unsigned long long)bf_entry_size);
		return -EINVAL;
	}
	if (cfg->io_unit && bf_entry_size < cfg->io_unit) {
		fprintf(stderr, "%s: invalid option entry=%llu: smaller than "
			"io_unit=%u, no write would fit an entry\n",
			cfg->progname, (unsigned long long)bf_entry_size,
			cfg->io_unit);
		return -EINVAL;
	}
	if (bf_buffer_size / bf_entry_size > BF_MAX_ENTRIES) {
		fprintf(stderr, "%s: invalid option buffer: more than %d "
			"entries\n", cfg->progname, BF_MAX_ENTRIES);
		return -EINVAL;
	}
	bf_nentries = bf_buffer_size / bf_entry_size;
	return 0;
}

/* ---- buffer ----------------------------------------------------------- */

static struct bf_inode *bf_inode_of(struct fc_inode *i)
{
	return __atomic_load_n((struct bf_inode **)&i->pdata,
			       __ATOMIC_ACQUIRE);
}

/* Newest entry of bi that is not FREE, or NULL.  Caller holds bf_lock. */
static struct bf_entry *bf_newest(struct bf_inode *bi)
{
	struct bf_entry *best = NULL;
	unsigned int k;

	if (!bi->nentries)
		return NULL;
	for (k = 0; k < bf_nentries; k++) {
		struct bf_entry *e = &bf_entries[k];

		if (e->state != BF_FREE && e->bi == bi &&
		    (!best || e->seq > best->seq))
			best = e;
	}
	return best;
}

static void bf_seal(struct bf_entry *e)
{
	e->state = BF_SEALED;
	pthread_cond_signal(&bf_cond_work);
}

static int bf_cmp_seq(const void *a, const void *b)
{
	const struct bf_entry *x = *(struct bf_entry *const *)a;
	const struct bf_entry *y = *(struct bf_entry *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Write out bi's entries with seq <= max_seq, oldest first.  Caller holds
 * bi->flush_lock.  A failed pwrite is recorded in bi->err (kept until an
 * fsync or close reports it).  Returns the number of entries written.
 */
static unsigned int bf_flush_locked(struct bf_inode *bi, uint64_t max_seq,
				    enum fc_cause cause)
{
	struct bf_entry *batch[BF_MAX_ENTRIES];
	struct fc_file *files[BF_MAX_ENTRIES];
	unsigned int n = 0, k;

	pthread_mutex_lock(&bf_lock);
	if (bi->nentries) {
		for (k = 0; k < bf_nentries; k++) {
			struct bf_entry *e = &bf_entries[k];

			if (e->bi == bi && e->seq <= max_seq &&
			    (e->state == BF_FILLING ||
			     e->state == BF_SEALED)) {
				e->state = BF_FLUSHING;
				batch[n++] = e;
			}
		}
	}
	pthread_mutex_unlock(&bf_lock);
	if (!n)
		return 0;
	qsort(batch, n, sizeof(batch[0]), bf_cmp_seq);

	for (k = 0; k < n; k++) {
		struct bf_entry *e = batch[k];
		ssize_t res = fc_pwrite_all(e->file->fd, e->data, e->len,
					    e->off);

		if (res < 0) {
			fc_counter_add(bf_c_deferred_errors, 1);
			fc_log("deferred write of %zu bytes at %lld to inode %llu "
			       "failed: %s (reported at the next fsync/close)",
			       e->len, (long long)e->off,
			       (unsigned long long)e->file->inode->src_ino,
			       strerror((int)-res));
			pthread_mutex_lock(&bf_lock);
			if (!bi->err)
				bi->err = (int)-res;
			pthread_mutex_unlock(&bf_lock);
		}
	}

	pthread_mutex_lock(&bf_lock);
	for (k = 0; k < n; k++) {
		struct bf_entry *e = batch[k];

		/* once FREE the entry may be reused at once: keep nothing */
		files[k] = e->file;
		e->file = NULL;
		bf_occupancy -= e->len;
		e->state = BF_FREE;
		e->bi = NULL;
		__atomic_store_n(&bi->nentries, bi->nentries - 1,
				 __ATOMIC_RELAXED);
	}
	pthread_cond_broadcast(&bf_cond_free);
	pthread_mutex_unlock(&bf_lock);

	for (k = 0; k < n; k++)
		fc_file_put(files[k]);
	fc_counter_add(bf_c_flush[cause], n);
	return n;
}

static void bf_flush(struct bf_inode *bi, uint64_t max_seq,
		     enum fc_cause cause)
{
	pthread_mutex_lock(&bi->flush_lock);
	bf_flush_locked(bi, max_seq, cause);
	pthread_mutex_unlock(&bi->flush_lock);
}

/* Does bi hold buffered data?  (racy hint; callers then flush properly) */
static bool bf_has_entries(struct bf_inode *bi)
{
	return bi && __atomic_load_n(&bi->nentries, __ATOMIC_RELAXED);
}

/* Flush everything of inode i; return and clear its deferred error. */
static int bf_sync_and_take_error(struct fc_inode *i, enum fc_cause cause)
{
	struct bf_inode *bi = bf_inode_of(i);
	int err;

	if (!bi)
		return 0;
	if (bf_has_entries(bi))
		bf_flush(bi, BF_ALL, cause);
	pthread_mutex_lock(&bf_lock);
	err = bi->err;
	bi->err = 0;
	pthread_mutex_unlock(&bf_lock);
	if (err)
		fc_counter_add(bf_c_errors_reported, 1);
	return -err;
}

/* The management thread: sealed entries at once, idle ones on the timer. */
static void *bf_flusher_main(void *arg)
{
	uint64_t flush_ns = bf_flush_ms * 1000000ULL;

	(void)arg;
	pthread_mutex_lock(&bf_lock);
	while (!bf_stopping) {
		struct bf_entry *pick = NULL;
		uint64_t now = fc_now_ns();
		enum fc_cause cause = FC_CAUSE_FULL;
		struct timespec ts;
		unsigned int k;

		for (k = 0; k < bf_nentries; k++) {
			struct bf_entry *e = &bf_entries[k];
			bool due = e->state == BF_SEALED ||
				   (e->state == BF_FILLING &&
				    (now - e->touched_ns >= flush_ns ||
				     now - e->created_ns >= 100 * flush_ns));

			if (due && (!pick || e->seq < pick->seq))
				pick = e;
		}
		if (pick) {
			struct fc_file *f = pick->file;
			struct bf_inode *bi = pick->bi;
			uint64_t seq = pick->seq;

			if (pick->state == BF_FILLING)
				cause = FC_CAUSE_TIMER;
			/* the file reference keeps inode and bi alive */
			fc_file_get(f);
			pthread_mutex_unlock(&bf_lock);
			bf_flush(bi, seq, cause);
			fc_file_put(f);
			pthread_mutex_lock(&bf_lock);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)(bf_flush_ms % 1000) * 1000000L;
		ts.tv_sec += bf_flush_ms / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&bf_cond_work, &bf_lock, &ts);
	}
	pthread_mutex_unlock(&bf_lock);
	return NULL;
}

/* ---- hooks ------------------------------------------------------------ */

static int bf_start(const struct fc_config *cfg)
{
	pthread_condattr_t ca;
	unsigned int k;

	(void)cfg;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bf_cond_work, &ca);
	pthread_cond_init(&bf_cond_free, &ca);
	pthread_condattr_destroy(&ca);
	if (!bf_nentries)
		return 0;
	bf_entries = calloc(bf_nentries, sizeof(*bf_entries));
	if (!bf_entries)
		return -ENOMEM;
	for (k = 0; k < bf_nentries; k++) {
		bf_entries[k].data = malloc(bf_entry_size);
		if (!bf_entries[k].data)
			return -ENOMEM;
	}
	if (pthread_create(&bf_flusher, NULL, bf_flusher_main, NULL))
		return -EAGAIN;
	bf_flusher_running = true;
	return 0;
}

static void bf_stop(void)
{
	unsigned int k, left = 0;

	if (!bf_nentries)
		return;
	pthread_mutex_lock(&bf_lock);
	bf_stopping = true;
	pthread_cond_broadcast(&bf_cond_work);
	pthread_mutex_unlock(&bf_lock);
	if (bf_flusher_running)
		pthread_join(bf_flusher, NULL);
	bf_flusher_running = false;

	/* no request is being served any more: write out what is left */
	for (;;) {
		struct bf_inode *bi = NULL;
		struct fc_file *f = NULL;

		pthread_mutex_lock(&bf_lock);
		for (k = 0; k < bf_nentries && !bi; k++)
			if (bf_entries[k].state != BF_FREE) {
				bi = bf_entries[k].bi;
				f = bf_entries[k].file;
				fc_file_get(f);
			}
		pthread_mutex_unlock(&bf_lock);
		if (!bi)
			break;
		bf_flush(bi, BF_ALL, FC_CAUSE_UNMOUNT);
		pthread_mutex_lock(&bf_lock);
		if (bi->err) {
			fc_log("unmount: a deferred write error (%s) could not "
			       "be reported to any application",
			       strerror(bi->err));
			left++;
			bi->err = 0;
		}
		pthread_mutex_unlock(&bf_lock);
		fc_file_put(f);
	}
	if (left)
		fc_log("unmount: %u files lost data to write errors", left);
}

static int bf_open(struct fc_file *f)
{
	struct fc_inode *i = f->inode;
	struct bf_inode *bi;

	if (!bf_nentries || bf_inode_of(i))
		return 0;
	bi = calloc(1, sizeof(*bi));
	if (!bi)
		return -ENOMEM;
	pthread_mutex_init(&bi->flush_lock, NULL);
	pthread_mutex_lock(&i->lock);
	if (!i->pdata) {
		__atomic_store_n((struct bf_inode **)&i->pdata, bi,
				 __ATOMIC_RELEASE);
		bi = NULL;
	}
	pthread_mutex_unlock(&i->lock);
	if (bi) {
		pthread_mutex_destroy(&bi->flush_lock);
		free(bi);
	}
	return 0;
}

static void bf_inode_free(struct fc_inode *i)
{
	struct bf_inode *bi = i->pdata;

	if (!bi)
		return;
	pthread_mutex_destroy(&bi->flush_lock);
	free(bi);
	i->pdata = NULL;
}

/* Write that is not buffered: after the inode's entries, in order. */
static ssize_t bf_write_direct(struct fc_file *f, struct bf_inode *bi,
			       struct fuse_bufvec *in, off_t off)
{
	ssize_t n;

	fc_counter_add(bf_c_direct, 1);
	if (!bi)
		return fc_write_bufvec(f, in, off);
	pthread_mutex_lock(&bi->flush_lock);
	bf_flush_locked(bi, BF_ALL, FC_CAUSE_OVERLAP);
	n = fc_write_bufvec(f, in, off);
	pthread_mutex_unlock(&bi->flush_lock);
	return n;
}

static ssize_t bf_write(struct fc_file *f, struct fuse_bufvec *in, off_t off)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	size_t size = fuse_buf_size(in);
	struct bf_entry *e, *newest;
	uint64_t now;
	ssize_t n;
	unsigned int k;

	if (!bf_nentries || !bi || size > bf_entry_size || size == 0)
		return bf_write_direct(f, bi, in, off);

	pthread_mutex_lock(&bf_lock);
	if (bi->err || bf_stopping) {
		pthread_mutex_unlock(&bf_lock);
		return bf_write_direct(f, bi, in, off);
	}
	now = fc_now_ns();
	newest = bf_newest(bi);
	if (newest && newest->state == BF_FILLING && off >= newest->off &&
	    off <= newest->off + (off_t)newest->len &&
	    (uint64_t)(off - newest->off) + size <= bf_entry_size) {
		/* continue (or rewrite inside) the newest entry */
		size_t at = off - newest->off;

		n = fc_copy_bufvec(in, newest->data + at, size);
		if (n != (ssize_t)size) {
			pthread_mutex_unlock(&bf_lock);
			return n < 0 ? n : -EIO;
		}
		if (at + size > newest->len) {
			bf_occupancy += at + size - newest->len;
			newest->len = at + size;
		}
		newest->touched_ns = now;
		if (newest->len == bf_entry_size)
			bf_seal(newest);
		fc_counter_add(bf_c_coalesced, 1);
		fc_counter_add(bf_c_buffered, 1);
		fc_counter_max(bf_c_hwm_bytes, bf_occupancy);
		pthread_mutex_unlock(&bf_lock);
		return size;
	}
	if (newest && newest->state == BF_FILLING)
		bf_seal(newest);	/* only the newest entry may grow */

	for (;;) {
		struct bf_entry *oldest = NULL;

		e = NULL;
		for (k = 0; k < bf_nentries; k++) {
			struct bf_entry *x = &bf_entries[k];

			if (x->state == BF_FREE) {
				if (!e)
					e = x;
				continue;
			}
			if (x->state == BF_FILLING &&
			    (!oldest || x->seq < oldest->seq))
				oldest = x;
		}
		if (e)
			break;
		/* buffer full: make room, let the management thread work */
		if (oldest)
			bf_seal(oldest);
		else
			pthread_cond_signal(&bf_cond_work);
		fc_counter_add(bf_c_full_waits, 1);
		pthread_cond_wait(&bf_cond_free, &bf_lock);
		if (bi->err || bf_stopping) {
			pthread_mutex_unlock(&bf_lock);
			return bf_write_direct(f, bi, in, off);
		}
	}

	n = fc_copy_bufvec(in, e->data, size);
	if (n != (ssize_t)size) {
		pthread_mutex_unlock(&bf_lock);
		return n < 0 ? n : -EIO;
	}
	e->state = size == bf_entry_size ? BF_SEALED : BF_FILLING;
	e->bi = bi;
	e->file = f;
	fc_file_get(f);
	e->off = off;
	e->len = size;
	e->seq = ++bf_seq;
	e->created_ns = now;
	e->touched_ns = now;
	__atomic_store_n(&bi->nentries, bi->nentries + 1, __ATOMIC_RELAXED);
	bf_occupancy += size;
	if (e->state == BF_SEALED)
		pthread_cond_signal(&bf_cond_work);
	fc_counter_add(bf_c_buffered, 1);
	fc_counter_add(bf_c_entries_used, 1);
	fc_counter_max(bf_c_hwm_bytes, bf_occupancy);
	{
		unsigned int used = 0;

		for (k = 0; k < bf_nentries; k++)
			used += bf_entries[k].state != BF_FREE;
		fc_counter_max(bf_c_hwm_entries, used);
	}
	pthread_mutex_unlock(&bf_lock);
	return size;
}

/*
 * A read needs the file's entries written out only if one of them overlaps
 * the range, or if the native file ends before the range does (an entry
 * further on may have extended the file: the hole must read as zeros, and a
 * short read would make the kernel shrink i_size).  Entries that appear
 * meanwhile come from concurrent writes, which may be ordered either way.
 */
static int bf_before_read(struct fc_file *f, size_t size, off_t off)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	bool overlap = false;
	struct stat st;
	unsigned int k;

	if (!bf_has_entries(bi))
		return 0;
	pthread_mutex_lock(&bf_lock);
	for (k = 0; bi->nentries && k < bf_nentries && !overlap; k++) {
		struct bf_entry *e = &bf_entries[k];

		overlap = e->state != BF_FREE && e->bi == bi &&
			  e->off < off + (off_t)size &&
			  e->off + (off_t)e->len > off;
	}
	pthread_mutex_unlock(&bf_lock);
	if (!overlap && fstat(f->fd, &st) == 0 &&
	    st.st_size >= off + (off_t)size) {
		fc_counter_add(bf_c_reads_unflushed, 1);
		return 0;
	}
	bf_flush(bi, BF_ALL, FC_CAUSE_READ);
	return 0;
}

static int bf_flush_hook(struct fc_file *f)
{
	return bf_sync_and_take_error(f->inode, FC_CAUSE_CLOSE);
}

static int bf_release(struct fc_file *f)
{
	struct bf_inode *bi = bf_inode_of(f->inode);

	/* data goes out on last close; an error stays for the next opener */
	if (bf_has_entries(bi))
		bf_flush(bi, BF_ALL, FC_CAUSE_CLOSE);
	return 0;
}

static int bf_fsync(struct fc_file *f, int datasync)
{
	(void)datasync;
	/* 0: the core then fsyncs / fdatasyncs the native fd */
	return bf_sync_and_take_error(f->inode, FC_CAUSE_FSYNC);
}

static int bf_sync_inode(struct fc_inode *i, enum fc_cause cause)
{
	struct bf_inode *bi = bf_inode_of(i);

	if (bf_has_entries(bi))
		bf_flush(bi, BF_ALL, cause);
	return 0;
}

/*
 * st_size = max(native size, end of buffered data).  The native size is
 * read again under bf_lock: an entry leaves the buffer (under bf_lock) only
 * after its pwrite, so no byte is missed between the core's stat and here.
 */
static void bf_getattr(struct fc_inode *i, struct stat *st)
{
	struct bf_inode *bi = bf_inode_of(i);
	struct stat now;
	unsigned int k;

	if (!bi)
		return;
	pthread_mutex_lock(&bf_lock);
	if (fstatat(i->fd, "", &now, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
		*st = now;
	for (k = 0; bi->nentries && k < bf_nentries; k++) {
		struct bf_entry *e = &bf_entries[k];

		if (e->state != BF_FREE && e->bi == bi &&
		    e->off + (off_t)e->len > st->st_size)
			st->st_size = e->off + e->len;
	}
	pthread_mutex_unlock(&bf_lock);
}

static int bf_setattr(struct fc_inode *i, struct fc_file *f,
		      const struct stat *attr, int to_set)
{
	struct bf_inode *bi = bf_inode_of(i);

	(void)f;
	(void)attr;
	if (!bf_has_entries(bi))
		return 0;
	if (to_set & FUSE_SET_ATTR_SIZE)
		bf_flush(bi, BF_ALL, FC_CAUSE_TRUNCATE);
	else if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME |
			   FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_ATIME_NOW))
		bf_flush(bi, BF_ALL, FC_CAUSE_METADATA);
	return 0;
}

static void bf_counters_json(FILE *out)
{
	fprintf(out, "    \"buffer_bytes\": %llu,\n    \"entry_bytes\": %llu,\n"
		"    \"entries\": %u,\n    \"flush_ms\": %llu",
		(unsigned long long)bf_buffer_size,
		(unsigned long long)bf_entry_size, bf_nentries,
		(unsigned long long)bf_flush_ms);
}

static void bf_register_counters(void)
{
	int c;

	bf_c_buffered = fc_counter_new("buffered_writes", FC_COUNTER_SUM);
	bf_c_direct = fc_counter_new("direct_writes", FC_COUNTER_SUM);
	bf_c_coalesced = fc_counter_new("coalesced_requests", FC_COUNTER_SUM);
	bf_c_entries_used = fc_counter_new("entries_filled", FC_COUNTER_SUM);
	bf_c_full_waits = fc_counter_new("buffer_full_waits", FC_COUNTER_SUM);
	bf_c_hwm_bytes = fc_counter_new("buffer_hwm_bytes", FC_COUNTER_MAX);
	bf_c_hwm_entries = fc_counter_new("buffer_hwm_entries",
					  FC_COUNTER_MAX);
	bf_c_deferred_errors = fc_counter_new("deferred_write_errors",
					      FC_COUNTER_SUM);
	bf_c_errors_reported = fc_counter_new("deferred_errors_reported",
					      FC_COUNTER_SUM);
	bf_c_reads_unflushed = fc_counter_new("reads_without_flush",
					      FC_COUNTER_SUM);
	for (c = 0; c < FC_CAUSE_COUNT; c++) {
		snprintf(bf_flush_names[c], sizeof(bf_flush_names[c]),
			 "flushed_entries_%s", fc_cause_names[c]);
		bf_c_flush[c] = fc_counter_new(bf_flush_names[c],
					       FC_COUNTER_SUM);
	}
}

static const struct fc_policy bf_policy = {
	.name = "bfuse",
	.options_help =
	"    -o preset=NAME       legacy | bfuse (default) | nobuf | zerocopy\n"
	"    -o buffer=SIZE       write buffer total, 0 = off (8M)\n"
	"    -o entry=SIZE        buffer entry size (2M)\n"
	"    -o flush_ms=DURATION management thread period (10ms)\n",
	.preset = bf_preset,
	.parse_opt = bf_parse_opt,
	.validate = bf_validate,
	.start = bf_start,
	.stop = bf_stop,
	.write = bf_write,
	.before_read = bf_before_read,
	.flush = bf_flush_hook,
	.release = bf_release,
	.fsync = bf_fsync,
	.sync_inode = bf_sync_inode,
	.open = bf_open,
	.getattr = bf_getattr,
	.setattr = bf_setattr,
	.inode_free = bf_inode_free,
	.counters_json = bf_counters_json,
};

int main(int argc, char *argv[])
{
	bf_register_counters();
	return fc_main(argc, argv, &bf_policy);
}
