// SPDX-License-Identifier: MIT
/*
 * bFUSE's write buffer (seed 000, Jeong & Won 2014): a fixed array of
 * entries in which contiguous writes to the same file coalesce, and the
 * management thread that writes entries out.  The rules, each tested in
 * test_bf_buf.c:
 *
 * Entries.  An entry holds one contiguous range of one file, at most
 * entry_size bytes.  It ends at the next file offset that is entry_phase
 * modulo entry_size (off + entry_size when entry_phase is 0); a single
 * write across that cut is kept whole.  A write that continues, or rewrites
 * inside, the newest entry of its inode joins it (coalesced); otherwise it
 * takes a free entry and the newest one is sealed: only the newest entry of
 * an inode ever grows.  When no entry is free the writer seals the oldest
 * filling entry and waits for the management thread (full wait).
 *
 * Not buffered (direct): writes of 0 bytes, larger than an entry or than a
 * pool buffer, writes to an inode with a deferred error, and writes while
 * the buffer stops.  They go to the native file after the inode's entries.
 *
 * Segments.  An entry's bytes live in buffers of fusecore's receive pool.
 * A write of at least half a pool buffer arrives in a pool buffer of its
 * own and becomes a segment as it is; smaller ones are copied behind the
 * entry's last segment, or into a fresh pool buffer.  Buffers return to the
 * pool once the entry is written.
 *
 * Writing out.  One pwritev per entry.  The management thread writes sealed
 * entries at once, and every flush_ms the filling entries idle for flush_ms
 * or older than 100 x flush_ms, oldest first.  All entries of a file are
 * written out before fsync/fdatasync, close or last release of a writable
 * descriptor, truncate, utimes, open(O_TRUNC), fallocate and a direct write
 * of the file; everything at unmount.  A failed pwrite is a deferred error:
 * logged, kept on the inode and returned once, by the next fsync or close
 * of a writable descriptor of the file (a read-only descriptor neither
 * waits for nor takes it).  Entries hold a reference to the open file they
 * write with, so rename and unlink need nothing.
 *
 * Reading.  A read is served from the native file with the file's entries
 * laid over it, oldest first; buffered bytes past the native end extend the
 * reply (holes read as zeros).  Nothing is flushed.  stat's size is the
 * larger of the native size and the end of the buffered data.
 *
 * This file takes bytes in: entries, writes, reads and stat; bf_flush.c
 * takes them out.  Their shared data, its ordering and lock rules are in
 * bf_internal.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bf_internal.h"

/* ---- entries ---------------------------------------------------------- */

static void bf_seal(struct bf_buf *b, struct bf_entry *e)
{
	e->state = BF_SEALED;
	pthread_cond_signal(&b->cond_work);
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
static off_t bf_entry_limit(const struct bf_buf *b, off_t off)
{
	off_t e = (off_t)b->p.entry_size, phase = (off_t)b->p.entry_phase;
	off_t rel, k;

	if (!phase)
		return off + e;
	rel = off - phase;
	k = rel >= 0 ? rel / e : -((-rel + e - 1) / e);	/* floor */
	return phase + (k + 1) * e;
}

/* Free room behind the last segment of e.  Caller holds b->lock. */
static size_t bf_tail_room(const struct bf_buf *b, const struct bf_entry *e)
{
	const struct bf_seg *g;

	if (!e->nseg)
		return 0;
	g = &e->seg[e->nseg - 1];
	return (size_t)((char *)g->base + b->seg_size - (g->data + g->len));
}

/*
 * Does a write of [off, off + size) continue, or rewrite inside, e (the
 * newest entry of its inode, FILLING)?  Caller holds b->lock.
 */
static bool bf_entry_joins(const struct bf_buf *b, const struct bf_entry *e,
			   off_t off, size_t size)
{
	return off >= e->off && off <= e->off + (off_t)e->len &&
	       off + (off_t)size <= e->limit && e->nseg + 1 < b->max_segs;
}

/*
 * A FREE entry off the free list, or NULL when there is none: then the
 * oldest FILLING entry is sealed (with none, the management thread is
 * woken) so that the management thread frees one.  Caller holds b->lock.
 */
static struct bf_entry *bf_entry_take_free(struct bf_buf *b)
{
	struct bf_entry *e = b->free, *oldest = NULL;
	unsigned int k;

	if (e) {
		b->free = e->next;
		e->next = NULL;
		return e;
	}
	for (k = 0; k < b->p.nentries; k++) {
		struct bf_entry *x = &b->entries[k];

		if (x->state == BF_FILLING && (!oldest || x->seq < oldest->seq))
			oldest = x;
	}
	if (oldest)
		bf_seal(b, oldest);
	else
		pthread_cond_signal(&b->cond_work);
	return NULL;
}

/* Make e, just off the free list, bi's newest entry.  b->lock held. */
static void bf_entry_claim(struct bf_buf *b, struct bf_entry *e,
			   struct bf_inode *bi, struct fc_file *f, off_t off,
			   size_t size, uint64_t now)
{
	e->state = BF_FILLING;
	e->bi = bi;
	e->file = f;
	fc_file_get(f);
	e->off = off;
	e->len = 0;
	e->limit = bf_entry_limit(b, off);
	if (e->limit < off + (off_t)size)
		e->limit = off + size;	/* one write across the cut */
	e->nseg = 0;
	e->seq = ++b->seq;
	e->created_ns = now;
	e->next = NULL;
	if (bi->tail)
		bi->tail->next = e;
	else
		bi->head = e;
	bi->tail = e;
	__atomic_store_n(&bi->nentries, bi->nentries + 1, __ATOMIC_RELAXED);
	b->nused++;
	fc_counter_add(b->c->entries_filled, 1);
}

/*
 * The entry a write of [off, off + size) to bi goes into: bi's newest entry
 * if the write joins it, else a free one, claimed (the newest is sealed).
 * Waits while the buffer is full.  NULL: do not buffer (a deferred error on
 * bi, or the buffer is stopping).  *now: the clock when it was found.
 * Caller holds b->lock.
 */
static struct bf_entry *bf_entry_for_write(struct bf_buf *b,
					   struct bf_inode *bi,
					   struct fc_file *f, off_t off,
					   size_t size, uint64_t *now)
{
	struct bf_entry *e;

	for (;;) {
		if (bi->err || b->stopping)
			return NULL;
		*now = b->p.clock();
		e = bi->tail;
		if (e && e->state == BF_FILLING) {
			if (bf_entry_joins(b, e, off, size)) {
				fc_counter_add(b->c->coalesced, 1);
				return e;
			}
			bf_seal(b, e);	/* only the newest entry may grow */
		}
		e = bf_entry_take_free(b);
		if (e) {
			bf_entry_claim(b, e, bi, f, off, size, *now);
			return e;
		}
		fc_counter_add(b->c->full_waits, 1);
		pthread_cond_wait(&b->cond_free, &b->lock);
	}
}

/* Copy src over bytes [at, at + n) that e already holds.  b->lock held. */
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
 * buffer the caller got beforehand; consumed if used).  b->lock held;
 * the caller checked that a segment slot is free.
 */
static void bf_entry_append(struct bf_buf *b, struct bf_entry *e,
			    const char *src, size_t n, struct bf_seg *own,
			    void **spare)
{
	struct bf_seg *g;

	if (own->base) {
		e->seg[e->nseg++] = (struct bf_seg){ own->base, (char *)src, n };
		own->base = NULL;
	} else if (bf_tail_room(b, e) >= n) {
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
 * Put a joining write's bytes into e: over the bytes e holds, then behind
 * them.  0, or -ENOMEM when no pool buffer was left for a small write that
 * does not fit behind the last segment (e is unchanged).  b->lock held.
 */
static int bf_entry_put(struct bf_buf *b, struct bf_entry *e, off_t off,
			const char *src, size_t size, struct bf_seg *own)
{
	size_t at = off - e->off;
	size_t overlap = e->len - at < size ? e->len - at : size;
	size_t rest = size - overlap;
	void *spare = NULL;

	/* bf_entry_append's last case, got before anything changes */
	if (rest && !own->base && bf_tail_room(b, e) < rest) {
		spare = fc_rbuf_alloc();	/* the pool lock nests */
		if (!spare)
			return -ENOMEM;
	}
	bf_entry_overwrite(e, at, src, overlap);
	if (rest) {
		b->occupancy += rest;
		bf_entry_append(b, e, src + overlap, rest, own, &spare);
	}
	return 0;
}

/* Lay e's bytes over buf, which holds [off, end).  b->lock held. */
static void bf_entry_overlay(const struct bf_entry *e, char *buf, off_t off,
			     off_t end)
{
	off_t pos = e->off;
	unsigned int k;

	for (k = 0; k < e->nseg && pos < end; k++) {
		const struct bf_seg *g = &e->seg[k];
		off_t lo = pos > off ? pos : off;
		off_t hi = pos + (off_t)g->len < end ? pos + (off_t)g->len : end;

		if (lo < hi)
			memcpy(buf + (lo - off), g->data + (lo - pos), hi - lo);
		pos += g->len;
	}
}

/* ---- life ------------------------------------------------------------- */

struct bf_buf *bf_buf_new(const struct bf_buf_params *p,
			  const struct bf_counters *c)
{
	struct bf_buf *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;
	unsigned int k;

	if (!b)
		return NULL;
	b->p = *p;
	if (!b->p.clock)
		b->p.clock = fc_now_ns;
	b->c = c;
	b->seg_size = fc_rbuf_size();
	b->own_min = b->seg_size / 2;
	/*
	 * A segment holds a large write (>= own_min) or packed small ones:
	 * between two large writes at most one segment of small ones.
	 */
	b->max_segs = 2 * (p->entry_size / b->own_min) + 4;
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond_work, &ca);
	pthread_cond_init(&b->cond_free, &ca);
	pthread_condattr_destroy(&ca);
	b->entries = calloc(p->nentries, sizeof(*b->entries));
	if (!b->entries)
		goto fail;
	for (k = p->nentries; k-- > 0;) {
		struct bf_entry *e = &b->entries[k];

		e->seg = calloc(b->max_segs, sizeof(*e->seg));
		e->iov = calloc(b->max_segs, sizeof(*e->iov));
		if (!e->seg || !e->iov)
			goto fail;
		e->next = b->free;
		b->free = e;
	}
	return b;
fail:
	bf_buf_free(b);
	return NULL;
}

void bf_buf_free(struct bf_buf *b)
{
	unsigned int k;

	if (!b)
		return;
	for (k = 0; b->entries && k < b->p.nentries; k++) {
		free(b->entries[k].seg);
		free(b->entries[k].iov);
	}
	free(b->entries);
	pthread_cond_destroy(&b->cond_work);
	pthread_cond_destroy(&b->cond_free);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

int bf_buf_open(struct bf_buf *b, struct fc_file *f)
{
	struct fc_inode *i = f->inode;
	struct bf_inode *bi;

	if (!b || bf_inode_of(i))
		return 0;
	bi = calloc(1, sizeof(*bi));
	if (!bi)
		return -ENOMEM;
	bi->b = b;
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

void bf_buf_inode_free(struct fc_inode *i)
{
	struct bf_inode *bi = i->pdata;

	if (!bi)
		return;
	pthread_mutex_destroy(&bi->flush_lock);
	free(bi);
	i->pdata = NULL;
}

/* ---- writes ----------------------------------------------------------- */

bool bf_buf_takes(const struct bf_buf *b, const struct fc_file *f,
		  size_t size)
{
	return bf_inode_of(f->inode) && size && size <= b->p.entry_size &&
	       size <= b->seg_size;
}

size_t bf_buf_own_min(const struct bf_buf *b)
{
	return b->own_min;
}

ssize_t bf_buf_write(struct bf_buf *b, struct fc_file *f, const char *src,
		     size_t size, off_t off, struct bf_seg *own)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	struct bf_entry *e;
	uint64_t now;
	ssize_t res;
	int err;

	pthread_mutex_lock(&b->lock);
	e = bf_entry_for_write(b, bi, f, off, size, &now);
	if (!e) {
		pthread_mutex_unlock(&b->lock);
		fc_counter_add(b->c->direct, 1);
		bi = bf_buf_direct_begin(f);
		res = fc_pwrite_all(f->fd, src, size, off);
		bf_buf_direct_end(bi);
		return res;
	}
	err = bf_entry_put(b, e, off, src, size, own);
	if (err) {
		if (!e->len)
			bf_seal(b, e);	/* empty: written out as nothing */
		pthread_mutex_unlock(&b->lock);
		return err;
	}
	e->touched_ns = now;
	if (e->off + (off_t)e->len == e->limit || e->nseg + 1 >= b->max_segs)
		bf_seal(b, e);
	fc_counter_add(b->c->buffered, 1);
	fc_counter_max(b->c->hwm_bytes, b->occupancy);
	fc_counter_max(b->c->hwm_entries, b->nused);
	pthread_mutex_unlock(&b->lock);
	return size;
}

/* ---- reads and stat ----------------------------------------------------- */

/*
 * Holding the inode's flush_lock keeps every entry of the file in the
 * buffer between the pread and the overlay (an entry leaves only after its
 * pwrite, under flush_lock), so no byte is missed or read stale.  Extending
 * the reply past the native end means the kernel never sees a short read
 * and never shrinks i_size.
 */
ssize_t bf_buf_read(struct fc_file *f, char *buf, size_t size, off_t off)
{
	struct bf_inode *bi = bf_inode_of(f->inode);
	const struct bf_entry *e;
	off_t end, max_end = 0;
	bool overlaid;
	ssize_t got;

	if (!bf_has_entries(bi))
		return fc_pread(f->fd, buf, size, off);
	pthread_mutex_lock(&bi->flush_lock);
	got = fc_pread(f->fd, buf, size, off);
	if (got < 0) {
		pthread_mutex_unlock(&bi->flush_lock);
		return got;
	}
	pthread_mutex_lock(&bi->b->lock);
	for (e = bi->head; e; e = e->next)
		if (e->off + (off_t)e->len > max_end)
			max_end = e->off + e->len;
	end = off + got;
	if (max_end > end)
		end = max_end < off + (off_t)size ? max_end : off + (off_t)size;
	if (end > off + got)
		memset(buf + got, 0, end - off - got);
	for (e = bi->head; e; e = e->next)	/* oldest first: later win */
		bf_entry_overlay(e, buf, off, end);
	overlaid = bi->head;
	pthread_mutex_unlock(&bi->b->lock);
	pthread_mutex_unlock(&bi->flush_lock);
	if (overlaid)
		fc_counter_add(bi->b->c->reads_from_buffer, 1);
	return end - off;
}

/*
 * The native size is read again under b->lock: an entry leaves the buffer
 * (under b->lock) only after its pwrite, so no byte is missed between the
 * core's stat and here.
 */
void bf_buf_getattr(struct fc_inode *i, struct stat *st)
{
	struct bf_inode *bi = bf_inode_of(i);
	const struct bf_entry *e;
	struct stat now;

	if (!bi)
		return;
	pthread_mutex_lock(&bi->b->lock);
	if (fstatat(i->fd, "", &now, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
		*st = now;
	for (e = bi->head; e; e = e->next)
		if (e->off + (off_t)e->len > st->st_size)
			st->st_size = e->off + e->len;
	pthread_mutex_unlock(&bi->b->lock);
}
