/*
 * fj_buf: per-file sorted extent lists with merge-on-write, a global dirty
 * list in arrival order, and eviction through a callback (see fj_buf.h).
 *
 * Lock order: f->lock, then b->lock. b->lock protects the dirty list (and
 * each file's buf_* fields), the totals and the statistics. A file's
 * dirty_since_ns is written with both locks held, so either one suffices to
 * read it.
 */
#include "fj_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fj_buf {
	uint64_t capacity;		/* immutable */
	size_t max_extent;		/* immutable */
	fj_buf_evict_fn evict;		/* immutable */
	void *ctx;			/* immutable */

	pthread_mutex_t lock;
	struct fj_file *head, *tail;	/* dirty files, oldest first, refs */
	struct fj_buf_stats st;
};

struct fj_buf *fj_buf_new(uint64_t capacity, size_t max_extent,
			  fj_buf_evict_fn evict, void *ctx)
{
	struct fj_buf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->capacity = capacity;
	b->max_extent = max_extent;
	b->evict = evict;
	b->ctx = ctx;
	pthread_mutex_init(&b->lock, NULL);
	return b;
}

void fj_buf_free(struct fj_buf *b)
{
	if (!b)
		return;
	while (b->head) {
		struct fj_file *f = b->head;

		b->head = f->buf_next;
		f->buf_listed = false;
		fj_file_put(f);
	}
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* Caller holds f->lock and b->lock. */
static void fj_list_add(struct fj_buf *b, struct fj_file *f, uint64_t now)
{
	if (f->buf_listed)
		return;
	f->buf_listed = true;
	f->dirty_since_ns = now;
	f->buf_next = NULL;
	f->buf_prev = b->tail;
	if (b->tail)
		b->tail->buf_next = f;
	else
		b->head = f;
	b->tail = fj_file_get(f);
	b->st.files++;
}

/* Caller holds f->lock and b->lock; drops the list's reference later. */
static bool fj_list_del(struct fj_buf *b, struct fj_file *f)
{
	if (!f->buf_listed)
		return false;
	if (f->buf_prev)
		f->buf_prev->buf_next = f->buf_next;
	else
		b->head = f->buf_next;
	if (f->buf_next)
		f->buf_next->buf_prev = f->buf_prev;
	else
		b->tail = f->buf_prev;
	f->buf_listed = false;
	f->buf_next = f->buf_prev = NULL;
	f->dirty_since_ns = 0;
	b->st.files--;
	return true;
}

/* Updates totals after f->buffered changed by delta; caller holds f->lock. */
static void fj_account(struct fj_buf *b, struct fj_file *f, int64_t delta,
		       uint64_t now, bool staged, bool merged)
{
	bool unlisted = false;

	pthread_mutex_lock(&b->lock);
	b->st.bytes += delta;
	if (b->st.bytes > b->st.peak_bytes)
		b->st.peak_bytes = b->st.bytes;
	if (staged) {
		b->st.writes++;
		if (merged)
			b->st.merged++;
	}
	if (f->buffered)
		fj_list_add(b, f, now);
	else
		unlisted = fj_list_del(b, f);
	pthread_mutex_unlock(&b->lock);
	if (unlisted)
		fj_file_put(f);	/* f->lock keeps f alive for the caller */
}

/* First extent whose end reaches off (touching counts). */
static size_t fj_first_reaching(const struct fj_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->n_ext;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->ext[mid].off + f->ext[mid].len < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int fj_ext_reserve(struct fj_file *f, size_t n)
{
	if (n <= f->cap_ext)
		return 0;
	size_t cap = f->cap_ext ? f->cap_ext * 2 : 8;

	while (cap < n)
		cap *= 2;
	void *v = realloc(f->ext, cap * sizeof(*f->ext));

	if (!v)
		return -ENOMEM;
	f->ext = v;
	f->cap_ext = cap;
	return 0;
}

static int fj_ext_insert(struct fj_file *f, size_t at, uint64_t off,
			 const void *data, size_t len)
{
	unsigned char *copy = malloc(len);

	if (!copy || fj_ext_reserve(f, f->n_ext + 1)) {
		free(copy);
		return -ENOMEM;
	}
	memcpy(copy, data, len);
	memmove(&f->ext[at + 1], &f->ext[at],
		(f->n_ext - at) * sizeof(*f->ext));
	f->ext[at] = (struct fj_extent){ off, len, copy };
	f->n_ext++;
	return 0;
}

int fj_buf_write(struct fj_buf *b, struct fj_file *f, uint64_t off,
		 const void *data, size_t len, uint64_t now_ns)
{
	uint64_t end = off + len, new_off, new_end, old_bytes = 0;
	size_t lo, hi, k;
	bool overlap = false;
	unsigned char *nd;
	int r;

	if (!len)
		return 0;
	lo = fj_first_reaching(f, off);
	for (hi = lo; hi < f->n_ext && f->ext[hi].off <= end; hi++) {
		if (f->ext[hi].off < end &&
		    f->ext[hi].off + f->ext[hi].len > off)
			overlap = true;
	}
	k = hi - lo;
	if (!k) {
		r = fj_ext_insert(f, lo, off, data, len);
		if (!r) {
			f->buffered += len;
			fj_account(b, f, len, now_ns, true, false);
		}
		return r;
	}
	new_off = f->ext[lo].off < off ? f->ext[lo].off : off;
	new_end = f->ext[hi - 1].off + f->ext[hi - 1].len;
	if (end > new_end)
		new_end = end;
	if (!overlap && new_end - new_off > b->max_extent) {
		/* only touching, and too big to merge: a separate extent */
		size_t at = lo + (f->ext[lo].off < off ? 1 : 0);

		r = fj_ext_insert(f, at, off, data, len);
		if (!r) {
			f->buffered += len;
			fj_account(b, f, len, now_ns, true, false);
		}
		return r;
	}
	if (k == 1 && f->ext[lo].off <= off &&
	    f->ext[lo].off + f->ext[lo].len >= end) {
		/* overwrite inside one extent */
		memcpy(f->ext[lo].data + (off - f->ext[lo].off), data, len);
		pthread_mutex_lock(&b->lock);
		b->st.writes++;
		b->st.merged++;
		b->st.dropped_bytes += len;
		pthread_mutex_unlock(&b->lock);
		return 0;
	}
	nd = malloc(new_end - new_off);
	if (!nd)
		return -ENOMEM;
	for (size_t i = lo; i < hi; i++) {
		memcpy(nd + (f->ext[i].off - new_off), f->ext[i].data,
		       f->ext[i].len);
		old_bytes += f->ext[i].len;
		free(f->ext[i].data);
	}
	memcpy(nd + (off - new_off), data, len);
	f->ext[lo] = (struct fj_extent){ new_off, new_end - new_off, nd };
	memmove(&f->ext[lo + 1], &f->ext[hi],
		(f->n_ext - hi) * sizeof(*f->ext));
	f->n_ext -= k - 1;
	f->buffered += (new_end - new_off) - old_bytes;
	if (overlap) {
		pthread_mutex_lock(&b->lock);
		b->st.dropped_bytes += old_bytes + len - (new_end - new_off);
		pthread_mutex_unlock(&b->lock);
	}
	fj_account(b, f, (int64_t)(new_end - new_off) - (int64_t)old_bytes,
		   now_ns, true, true);
	return 0;
}

size_t fj_buf_read(struct fj_file *f, uint64_t off, void *buf, size_t len,
		   size_t native_n)
{
	uint64_t end = off + len, last;
	size_t valid = native_n, i;
	unsigned char *out = buf;

	if (!f->n_ext)
		return native_n;
	i = fj_first_reaching(f, off);
	/*
	 * Staged data extends the file: everything up to the end of the
	 * highest extent is file content (zeros where nothing was written).
	 * A short reply would make the kernel shrink the file.
	 */
	last = fj_buf_end(f);
	if (last > off) {
		size_t v = last - off < len ? last - off : len;

		if (v > valid)
			valid = v;
	}
	if (valid > native_n)
		memset(out + native_n, 0, valid - native_n);
	for (; i < f->n_ext && f->ext[i].off < end; i++) {
		const struct fj_extent *x = &f->ext[i];
		uint64_t s = x->off > off ? x->off : off;
		uint64_t e = x->off + x->len < end ? x->off + x->len : end;

		if (s < e)
			memcpy(out + (s - off), x->data + (s - x->off), e - s);
	}
	return valid;
}

uint64_t fj_buf_end(const struct fj_file *f)
{
	if (!f->n_ext)
		return 0;
	return f->ext[f->n_ext - 1].off + f->ext[f->n_ext - 1].len;
}

void fj_buf_discard(struct fj_buf *b, struct fj_file *f, uint64_t off,
		    uint64_t len)
{
	uint64_t end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
	uint64_t dropped = 0;
	size_t i = fj_first_reaching(f, off);

	while (i < f->n_ext && f->ext[i].off < end) {
		struct fj_extent *x = &f->ext[i];
		uint64_t xe = x->off + x->len;

		if (xe <= off) {
			i++;
			continue;
		}
		if (x->off >= off && xe <= end) {
			/* wholly inside: remove */
			dropped += x->len;
			free(x->data);
			memmove(x, x + 1, (f->n_ext - i - 1) * sizeof(*x));
			f->n_ext--;
			continue;
		}
		if (x->off < off && xe > end) {
			/* the hole is inside: split in two */
			size_t tail = xe - end;

			if (fj_ext_insert(f, i + 1, end,
					  f->ext[i].data + (end - f->ext[i].off),
					  tail))
				return;	/* ENOMEM: keep the data */
			x = &f->ext[i];
			dropped += end - off;
			x->len = off - x->off;
			i += 2;
			continue;
		}
		if (x->off < off) {
			/* keep the head */
			dropped += xe - off;
			x->len = off - x->off;
		} else {
			/* keep the tail */
			size_t keep = xe - end;

			dropped += end - x->off;
			memmove(x->data, x->data + (end - x->off), keep);
			x->off = end;
			x->len = keep;
		}
		i++;
	}
	if (!dropped)
		return;
	f->buffered -= dropped;
	pthread_mutex_lock(&b->lock);
	b->st.dropped_bytes += dropped;
	pthread_mutex_unlock(&b->lock);
	fj_account(b, f, -(int64_t)dropped, 0, false, false);
}

int fj_buf_flush_file(struct fj_buf *b, struct fj_file *f)
{
	uint64_t evicted = 0, bytes = 0;
	size_t i;
	int r = 0;

	for (i = 0; i < f->n_ext; i++) {
		r = b->evict(b->ctx, f, f->ext[i].off, f->ext[i].data,
			     f->ext[i].len);
		if (r)
			break;
		evicted++;
		bytes += f->ext[i].len;
		free(f->ext[i].data);
	}
	if (!i)
		return r;
	memmove(f->ext, f->ext + i, (f->n_ext - i) * sizeof(*f->ext));
	f->n_ext -= i;
	f->buffered -= bytes;
	pthread_mutex_lock(&b->lock);
	b->st.evicted += evicted;
	b->st.evicted_bytes += bytes;
	pthread_mutex_unlock(&b->lock);
	fj_account(b, f, -(int64_t)bytes, 0, false, false);
	return r;
}

int fj_buf_reclaim(struct fj_buf *b, uint64_t now_ns, uint64_t age_ns)
{
	int done = 0;

	for (;;) {
		struct fj_file *f;
		bool over, old;
		int r;

		pthread_mutex_lock(&b->lock);
		f = b->head;
		over = b->st.bytes > b->capacity;
		old = f && (age_ns == 0 ||
			    (now_ns > age_ns &&
			     f->dirty_since_ns <= now_ns - age_ns));
		if (!f || !(over || old)) {
			pthread_mutex_unlock(&b->lock);
			return done;
		}
		fj_file_get(f);
		pthread_mutex_unlock(&b->lock);

		pthread_mutex_lock(&f->lock);
		r = fj_buf_flush_file(b, f);
		pthread_mutex_unlock(&f->lock);
		fj_file_put(f);
		if (r)
			return r;
		done++;
	}
}

int fj_buf_over(struct fj_buf *b)
{
	int over;

	pthread_mutex_lock(&b->lock);
	over = b->st.bytes > b->capacity;
	pthread_mutex_unlock(&b->lock);
	return over;
}

void fj_buf_get_stats(struct fj_buf *b, struct fj_buf_stats *st)
{
	pthread_mutex_lock(&b->lock);
	*st = b->st;
	pthread_mutex_unlock(&b->lock);
}
