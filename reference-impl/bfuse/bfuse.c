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
 *      file joins it (coalesced), otherwise it takes a new entry
 *      (buffer=, entry=);
 *   3. a management thread that writes entries out, one pwritev per entry:
 *      at once when an entry is full, and every flush_ms for entries idle
 *      for flush_ms (or older than 100 x flush_ms) (flush_ms=).
 *
 * An entry's bytes live in segments: buffers of fusecore's receive-buffer
 * pool.  A large write (at least half a receive buffer) becomes a segment of
 * its own: with fusecore's own receive loop (own_loop=1, the bfuse preset)
 * the buffer the kernel wrote the request into is adopted; with splice it
 * is read from the pipe straight into a pool buffer;
 * either way each byte is copied once into the daemon and once out (kernel
 * -> daemon memory -> native file).  With libfuse's loop and no splice it
 * is copied once more.  Small writes are packed by memcpy into
 * the spare room of the entry's last segment.  Buffers go back to the pool
 * after the flush: nothing is allocated per entry once warm.
 *
 * POSIX semantics with the buffer on: a read is served from the native file
 * with the buffered bytes of the file laid over it (no flush); stat sizes
 * include buffered data; truncate and utimes flush first; close
 * (FUSE_FLUSH) and release of a writable descriptor, fsync and fdatasync
 * flush the file's entries before returning; a failed deferred pwrite
 * (ENOSPC, EIO) is kept on the inode and returned by the next fsync or
 * close of a writable descriptor of the file, and later
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
 *                 segments and their contents while FILLING), bf_seq,
 *                 bf_occupancy, bf_stopping, and every bf_inode's nentries
 *                 and err.  A FLUSHING entry belongs to the thread flushing
 *                 it (which holds the inode's flush_lock); its segments are
 *                 written and returned to the pool without bf_lock.
 *   bi->flush_lock  serialises native writes of one inode, and reads that
 *                 overlay buffered bytes (no entry of the inode can leave
 *                 the buffer meanwhile); taken before bf_lock, never while
 *                 waiting for a free entry.  No pwrite runs under bf_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
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

/* A run of an entry's bytes inside a pool buffer (fc_rbuf_*). */
struct bf_seg {
	void *base;		/* the buffer, fc_rbuf_size() bytes */
	char *data;		/* first byte, inside the buffer */
	size_t len;
};

struct bf_entry {
	enum bf_state state;
	struct bf_inode *bi;
	struct fc_file *file;	/* referenced while not FREE */
	off_t off;
	size_t len;
	off_t limit;		/* the entry never grows past this offset */
	uint64_t seq;
	uint64_t created_ns;
	uint64_t touched_ns;
	unsigned int nseg;
	struct bf_seg *seg;	/* bf_max_segs, in file order */
	struct iovec *iov;	/* bf_max_segs: the flusher's pwritev vector */
};

/* Configuration: set by options, constant once serving. */
static uint64_t bf_buffer_size = 8 << 20;
static uint64_t bf_entry_size = 2 << 20;
#define BF_PHASE_AUTO UINT64_MAX	/* 1M for 2M entries, else 0 */
static uint64_t bf_entry_phase = BF_PHASE_AUTO;	/* 0: cut where they fill */
static uint64_t bf_flush_ms = 10;
static unsigned int bf_nentries;
static size_t bf_rbuf_size;		/* fc_rbuf_size(), set at start */
static size_t bf_adopt_min;		/* writes this large get a segment */
static unsigned int bf_max_segs;	/* segments per entry */

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
static struct fc_counter *bf_c_reads_from_buffer, *bf_c_adopted;
static struct fc_counter *bf_c_copied;
static struct fc_counter *bf_c_flush[FC_CAUSE_COUNT];
static char bf_flush_names[FC_CAUSE_COUNT][48];

/* ---- options ---------------------------------------------------------- */

static int bf_preset(const char *name, struct fc_config *cfg)
{
	cfg->splice = false;
	cfg->writeback_cache = false;
	cfg->own_loop = false;
	cfg->passthrough = false;
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
		/* no native write covers a 2 MiB-aligned range: see README */
		bf_entry_phase = BF_PHASE_AUTO;
		/*
		 * One kernel->user copy per byte: the request is spliced
		 * into a pipe and the pipe read straight into the entry's
		 * pool buffer (seed 003).  fusecore's own loop (adopted
		 * receive buffers) is the same copy count and takes over
		 * with splice=0; it measured equal in a fast VM state and
		 * 2-4x more daemon CPU per GiB in a slow one (README).
		 */
		cfg->splice = true;
		cfg->own_loop = true;
	} else if (!strcmp(name, "nobuf")) {
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "passthrough")) {
		/*
		 * Today's /sdcard (Android 12+): kernel FUSE passthrough, no
		 * data through the daemon, so no buffer either: the baseline
		 * bFUSE's buffering is compared with.  fusecore's own loop.
		 */
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		cfg->passthrough = true;
		cfg->own_loop = true;
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

static struct fc_policy bf_policy;

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
	if (!strcmp(key, "entry_phase")) {
		if (fc_parse_size(val, &v) || v % 4096)
			return bf_bad(cfg, key, val, "not a size, a multiple "
				      "of 4k (0, 1M)");
		bf_entry_phase = v;
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
	/*
	 * Only 2 MiB entries need a phase: smaller ones never cover a whole
	 * 2 MiB-aligned range, larger ones always do.
	 */
	if (bf_entry_phase == BF_PHASE_AUTO)
		bf_entry_phase = bf_entry_size == (2 << 20) ? 1 << 20 : 0;
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
	if (bf_entry_phase >= bf_entry_size) {
		fprintf(stderr, "%s: invalid option entry_phase=%llu: must be "
			"smaller than entry=%llu\n", cfg->progname,
			(unsigned long long)bf_entry_phase,
			(unsigned long long)bf_entry_size);
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

static int bf_validate_hook(struct fc_config *cfg)
{
	int res = bf_validate(cfg);

	/* without a buffer the core's read (splice when on) is the fastest */
	if (!res && !bf_nentries)
		bf_policy.read = NULL;
	return res;
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

/* One pwritev of a FLUSHING entry (owned by the caller, no lock). */
static ssize_t bf_entry_write(struct bf_entry *e)
{
	unsigned int k;

	for (k = 0; k < e->nseg; k++) {
		e->iov[k].iov_base = e->seg[k].data;
		e->iov[k].iov_len = e->seg[k].len;
	}
	return fc_pwritev_all(e->file->fd, e->iov, (int)e->nseg, e->off);
}

/* Give a FLUSHING entry's buffers back to the pool (no lock needed). */
static void bf_entry_release_segs(struct bf_entry *e)
{
	unsigned int k;

	for (k = 0; k < e->nseg; k++)
		fc_rbuf_free(e->seg[k].base);
	e->nseg = 0;
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
		ssize_t res = bf_entry_write(e);

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
		bf_entry_release_segs(e);
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
	bf_rbuf_size = fc_rbuf_size();
	bf_adopt_min = bf_rbuf_size / 2;
	/*
	 * A segment holds a large write (>= bf_adopt_min) or packed small
	 * ones: between two large writes at most one segment of small ones.
	 */
	bf_max_segs = 2 * (bf_entry_size / bf_adopt_min) + 4;
	bf_entries = calloc(bf_nentries, sizeof(*bf_entries));
	if (!bf_entries)
		return -ENOMEM;
	for (k = 0; k < bf_nentries; k++) {
		bf_entries[k].seg = calloc(bf_max_segs, sizeof(struct bf_seg));
		bf_entries[k].iov = calloc(bf_max_segs, sizeof(struct iovec));
		if (!bf_entries[k].seg || !bf_entries[k].iov)
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

/*
 * Write that is not buffered: after the inode's entries, in order.  The
 * bytes are either still in the request (in) or already taken out of it
 * (mem: a pool buffer filled from a pipe, or an adopted receive buffer).
 */
static ssize_t bf_write_direct(struct fc_file *f, struct bf_inode *bi,
			       struct fuse_bufvec *in, const char *mem,
			       size_t size, off_t off)
{
	ssize_t n;

	fc_counter_add(bf_c_direct, 1);
	if (bi) {
		pthread_mutex_lock(&bi->flush_lock);
		bf_flush_locked(bi, BF_ALL, FC_CAUSE_OVERLAP);
	}
	n = mem ? fc_pwrite_all(f->fd, mem, size, off) :
		  fc_write_bufvec(f, in, off);
	if (bi)
		pthread_mutex_unlock(&bi->flush_lock);
	return n;
}

/*
 * End of an entry that starts at off: entry bytes on, cut at the next file
 * offset that is entry_phase modulo the entry size (if entry_phase is set).
 * With 2 MiB entries and entry_phase=1M a sequential stream fills entries
 * [0,1M) [1M,3M) [3M,5M) ...: one native write per 2 MiB as before, but no
 * write covers a whole 2 MiB-aligned range, so the native filesystem never
 * allocates a PMD-sized (order-9) page-cache folio for it (ext4 does since
 * Linux 6.16).  Why that matters is in the README ("2 MiB folios").
 */
static off_t bf_entry_limit(off_t off)
{
	off_t e = (off_t)bf_entry_size, rel, k;

	if (!bf_entry_phase)
		return off + e;
	rel = off - (off_t)bf_entry_phase;
	k = rel >= 0 ? rel / e : -((-rel + e - 1) / e);	/* floor */
	return (off_t)bf_entry_phase + (k + 1) * e;
}

/* Free room behind the last segment of e.  Caller holds bf_lock. */
static size_t bf_tail_room(const struct bf_entry *e)
{
	const struct bf_seg *g;

	if (!e->nseg)
		return 0;
	g = &e->seg[e->nseg - 1];
	return (size_t)((char *)g->base + bf_rbuf_size - (g->data + g->len));
}

/* Copy src over bytes [at, at + n) that e already holds.  bf_lock held. */
static void bf_entry_overwrite(struct bf_entry *e, size_t at, const char *src,
			       size_t n)
{
	size_t pos = 0;
	unsigned int k;

	for (k = 0; k < e->nseg && n; k++) {
		struct bf_seg *g = &e->seg[k];

		if (at < pos + g->len) {
			size_t in_seg = at - pos;
			size_t m = g->len - in_seg < n ? g->len - in_seg : n;

			memcpy(g->data + in_seg, src, m);
			src += m;
			at += m;
			n -= m;
		}
		pos += g->len;
	}
}

/*
 * Append n bytes to e: as the segment *own (src lies inside it; *own is
 * consumed), or copied behind the last segment, or into *spare (a pool
 * buffer the caller got beforehand; consumed if used).  bf_lock held;
 * the caller checked that a segment slot is free.
 */
static void bf_entry_append(struct bf_entry *e, const char *src, size_t n,
			    struct bf_seg *own, void **spare)
{
	struct bf_seg *g;

	if (own->base) {
		e->seg[e->nseg++] = (struct bf_seg){ own->base, (char *)src, n };
		own->base = NULL;
	} else if (bf_tail_room(e) >= n) {
		g = &e->seg[e->nseg - 1];
		memcpy(g->data + g->len, src, n);
		g->len += n;
	} else {
		e->seg[e->nseg++] = (struct bf_seg){ *spare, *spare, n };
		memcpy(*spare, src, n);
		*spare = NULL;
	}
	e->len += n;
}

/*
 * The request's bytes, contiguous, before bf_lock is taken.  A large
 * write gets a buffer of its own (*own): the receive buffer itself when
 * fusecore's loop lets us adopt it, else a pool buffer filled from the
 * pipe or libfuse's buffer.  A small one is used in place (libfuse's or our
 * receive buffer, valid until the reply) or read from the pipe into *tmp.
 * Returns the bytes, or NULL with *err set.
 */
static const char *bf_request_bytes(struct fuse_bufvec *in, size_t size,
				    struct bf_seg *own, void **tmp, int *err)
{
	const struct fuse_buf *b = &in->buf[in->idx];
	bool in_memory = in->count - in->idx == 1 &&
			 !(b->flags & FUSE_BUF_IS_FD);
	void *buf;
	ssize_t n;

	if (in_memory && size >= bf_adopt_min &&
	    (own->base = fc_rbuf_adopt(b->mem))) {
		fc_counter_add(bf_c_adopted, 1);
		own->data = (char *)b->mem + in->off;
		own->len = size;
		return own->data;
	}
	if (in_memory && size < bf_adopt_min)
		return (const char *)b->mem + in->off;
	buf = fc_rbuf_alloc();
	if (!buf) {
		*err = -ENOMEM;
		return NULL;
	}
	n = fc_copy_bufvec(in, buf, size);
	if (n != (ssize_t)size) {
		fc_rbuf_free(buf);
		*err = n < 0 ? (int)n : -EIO;
		return NULL;
	}
	fc_counter_add(bf_c_copied, 1);
	if (size >= bf_adopt_min)
		*own = (struct bf_seg){ buf, buf, size };
	else
		*tmp = buf;
	return buf;
}

static ssize_t bf_write(struct fc_file *f, struct fuse_bufvec *in, off_t off)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	size_t size = fuse_buf_size(in);
	struct bf_seg own = { 0 };
	void *tmp = NULL, *spare = NULL;
	struct bf_entry *e, *newest;
	const char *src;
	ssize_t res = size;
	uint64_t now;
	unsigned int k;
	int err = 0;

	if (!bf_nentries || !bi || size > bf_entry_size || size == 0 ||
	    size > bf_rbuf_size)
		return bf_write_direct(f, bi, in, NULL, size, off);
	src = bf_request_bytes(in, size, &own, &tmp, &err);
	if (!src)
		return err;

	pthread_mutex_lock(&bf_lock);
	for (;;) {
		if (bi->err || bf_stopping) {
			pthread_mutex_unlock(&bf_lock);
			res = bf_write_direct(f, bi, NULL, src, size, off);
			goto out;
		}
		now = fc_now_ns();
		newest = bf_newest(bi);
		if (newest && newest->state == BF_FILLING &&
		    off >= newest->off &&
		    off <= newest->off + (off_t)newest->len &&
		    off + (off_t)size <= newest->limit &&
		    newest->nseg + 1 < bf_max_segs) {
			e = newest;
			break;	/* continue (or rewrite inside) the newest entry */
		}
		if (newest && newest->state == BF_FILLING)
			bf_seal(newest);	/* only the newest entry may grow */
		e = NULL;
		{
			struct bf_entry *oldest = NULL;

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
		}
		fc_counter_add(bf_c_full_waits, 1);
		pthread_cond_wait(&bf_cond_free, &bf_lock);
	}

	if (e->state == BF_FREE) {
		e->state = BF_FILLING;
		e->bi = bi;
		e->file = f;
		fc_file_get(f);
		e->off = off;
		e->len = 0;
		e->limit = bf_entry_limit(off);
		if (e->limit < off + (off_t)size)
			e->limit = off + size;	/* one write across the cut */
		e->nseg = 0;
		e->seq = ++bf_seq;
		e->created_ns = now;
		__atomic_store_n(&bi->nentries, bi->nentries + 1,
				 __ATOMIC_RELAXED);
		fc_counter_add(bf_c_entries_used, 1);
	} else {
		fc_counter_add(bf_c_coalesced, 1);
	}
	{
		size_t at = off - e->off;
		size_t overlap = e->len - at < size ? e->len - at : size;
		size_t rest = size - overlap;

		if (rest && !own.base && bf_tail_room(e) < rest) {
			/* small write, no room behind: the pool lock nests */
			spare = fc_rbuf_alloc();
			if (!spare) {
				if (!e->len)
					bf_seal(e);	/* empty: flushed as nothing */
				pthread_mutex_unlock(&bf_lock);
				res = -ENOMEM;
				goto out;
			}
		}
		bf_entry_overwrite(e, at, src, overlap);
		if (rest) {
			bf_occupancy += rest;
			bf_entry_append(e, src + overlap, rest, &own, &spare);
		}
	}
	e->touched_ns = now;
	if (e->off + (off_t)e->len == e->limit || e->nseg + 1 >= bf_max_segs)
		bf_seal(e);
	fc_counter_add(bf_c_buffered, 1);
	fc_counter_max(bf_c_hwm_bytes, bf_occupancy);
	{
		unsigned int used = 0;

		for (k = 0; k < bf_nentries; k++)
			used += bf_entries[k].state != BF_FREE;
		fc_counter_max(bf_c_hwm_entries, used);
	}
	pthread_mutex_unlock(&bf_lock);
out:
	/* bytes rewritten inside the entry leave their own buffer unused */
	fc_rbuf_free(own.base);
	fc_rbuf_free(spare);
	fc_rbuf_free(tmp);
	return res;
}

/*
 * READ with the buffer on: pread the native file, then lay the file's
 * buffered bytes over it, oldest entry first (later writes win).  Holding
 * the inode's flush_lock keeps every entry of the file in the buffer
 * between the pread and the overlay (an entry leaves only after its
 * pwrite, under flush_lock), so no byte is missed or read stale.  Buffered
 * data past the native end extends the reply (holes read as zeros), so the
 * kernel never sees a short read and never shrinks i_size.
 */
static ssize_t bf_read(struct fc_file *f, char *buf, size_t size, off_t off)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	struct bf_entry *mine[BF_MAX_ENTRIES];
	unsigned int n = 0, k, j;
	off_t end, max_end = 0;
	ssize_t got;

	if (!bf_has_entries(bi))
		return fc_pread(f->fd, buf, size, off);
	pthread_mutex_lock(&bi->flush_lock);
	got = fc_pread(f->fd, buf, size, off);
	if (got < 0) {
		pthread_mutex_unlock(&bi->flush_lock);
		return got;
	}
	pthread_mutex_lock(&bf_lock);
	for (k = 0; bi->nentries && k < bf_nentries; k++) {
		struct bf_entry *e = &bf_entries[k];

		if (e->state == BF_FREE || e->bi != bi)
			continue;
		mine[n++] = e;
		if (e->off + (off_t)e->len > max_end)
			max_end = e->off + e->len;
	}
	end = off + got;
	if (max_end > end)
		end = max_end < off + (off_t)size ? max_end : off + (off_t)size;
	if (end > off + got)
		memset(buf + got, 0, end - off - got);
	qsort(mine, n, sizeof(mine[0]), bf_cmp_seq);
	for (j = 0; j < n; j++) {
		struct bf_entry *e = mine[j];
		off_t pos = e->off;

		for (k = 0; k < e->nseg && pos < end; k++) {
			const struct bf_seg *g = &e->seg[k];
			off_t lo = pos > off ? pos : off;
			off_t hi = pos + (off_t)g->len < end ?
				   pos + (off_t)g->len : end;

			if (lo < hi)
				memcpy(buf + (lo - off), g->data + (lo - pos),
				       hi - lo);
			pos += g->len;
		}
	}
	pthread_mutex_unlock(&bf_lock);
	pthread_mutex_unlock(&bi->flush_lock);
	if (n)
		fc_counter_add(bf_c_reads_from_buffer, 1);
	return end - off;
}

/*
 * A read-only descriptor wrote nothing: its close neither waits for other
 * descriptors' data nor takes their error (that goes to their close/fsync).
 */
static bool bf_wrote_through(const struct fc_file *f)
{
	return (f->flags & O_ACCMODE) != O_RDONLY;
}

static int bf_flush_hook(struct fc_file *f)
{
	if (!bf_wrote_through(f))
		return 0;
	return bf_sync_and_take_error(f->inode, FC_CAUSE_CLOSE);
}

static int bf_release(struct fc_file *f)
{
	struct bf_inode *bi = bf_inode_of(f->inode);

	/* data goes out on last close; an error stays for the next opener */
	if (bf_wrote_through(f) && bf_has_entries(bi))
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
		"    \"entries\": %u,\n    \"flush_ms\": %llu,\n"
		"    \"entry_phase_bytes\": %llu",
		(unsigned long long)bf_buffer_size,
		(unsigned long long)bf_entry_size, bf_nentries,
		(unsigned long long)bf_flush_ms,
		(unsigned long long)bf_entry_phase);
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
	bf_c_reads_from_buffer = fc_counter_new("reads_from_buffer",
						FC_COUNTER_SUM);
	bf_c_adopted = fc_counter_new("adopted_writes", FC_COUNTER_SUM);
	bf_c_copied = fc_counter_new("copied_writes", FC_COUNTER_SUM);
	for (c = 0; c < FC_CAUSE_COUNT; c++) {
		snprintf(bf_flush_names[c], sizeof(bf_flush_names[c]),
			 "flushed_entries_%s", fc_cause_names[c]);
		bf_c_flush[c] = fc_counter_new(bf_flush_names[c],
					       FC_COUNTER_SUM);
	}
}

static struct fc_policy bf_policy = {
	.name = "bfuse",
	.options_help =
	"    -o preset=NAME       legacy | bfuse (default) | nobuf | zerocopy |\n"
	"                         passthrough (kernel FUSE passthrough)\n"
	"    -o buffer=SIZE       write buffer total, 0 = off (8M)\n"
	"    -o entry=SIZE        buffer entry size (2M)\n"
	"    -o flush_ms=DURATION management thread period (10ms)\n"
	"    -o entry_phase=SIZE  cut entries at this offset modulo entry\n"
	"                         (1M for 2M entries; 0 = where they fill)\n",
	.preset = bf_preset,
	.parse_opt = bf_parse_opt,
	.validate = bf_validate_hook,
	.start = bf_start,
	.stop = bf_stop,
	.write = bf_write,
	.read = bf_read,	/* dropped when the buffer is off */
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
	bf_preset("bfuse", &fc_cfg);	/* no preset means bfuse */
	return fc_main(argc, argv, &bf_policy);
}
