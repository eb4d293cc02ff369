/*
 * fj_buf: Fjord's RAM write buffer.
 *
 * Small writes are staged per file as extents sorted by offset; a write that
 * overlaps or touches staged data is merged into it, so spatially near but
 * temporally separate writes leave as one larger write, in offset order.
 * Eviction hands each extent to a callback (which writes it to its final
 * place or to the log) whenever the buffer is over capacity, the oldest data
 * is older than the age bound, or the caller flushes a file (fsync, read of
 * the native file, unmount...). Reads overlay staged bytes on what the native
 * file returned, so the buffer is invisible to applications.
 *
 * Locking: the functions taking a struct fj_file expect the caller to hold
 * f->lock, except fj_buf_reclaim, which takes file locks itself and must be
 * called with none held. The buffer's own lock (taken after a file lock)
 * protects the dirty list, the totals and the statistics.
 */
#ifndef FJ_BUF_H
#define FJ_BUF_H

#include <stdint.h>
#include <stddef.h>

#include "fj_file.h"

/* Writes one evicted extent; 0 or -errno (the extent then stays staged). */
typedef int (*fj_buf_evict_fn)(void *ctx, struct fj_file *f, uint64_t off,
			       const void *data, size_t len);

struct fj_buf_stats {
	uint64_t writes;	/* writes staged */
	uint64_t merged;	/* ... of which merged into staged data */
	uint64_t evicted;	/* extents handed to the callback */
	uint64_t evicted_bytes;
	uint64_t dropped_bytes;	/* staged bytes superseded or truncated */
	uint64_t bytes;		/* staged now */
	uint64_t peak_bytes;
	uint64_t files;		/* files with staged data now */
};

struct fj_buf;

/*
 * capacity: staged bytes above which fj_buf_reclaim evicts; max_extent: two
 * extents that merely touch are not merged beyond this size.
 */
struct fj_buf *fj_buf_new(uint64_t capacity, size_t max_extent,
			  fj_buf_evict_fn evict, void *ctx);
void fj_buf_free(struct fj_buf *b);

/* Stages a copy of data at off; 0 or -ENOMEM. */
int fj_buf_write(struct fj_buf *b, struct fj_file *f, uint64_t off,
		 const void *data, size_t len, uint64_t now_ns);

/*
 * buf holds native bytes for [off, off + len), the first native_n valid.
 * Overlays staged bytes (zero-filling any gap past native_n) and returns the
 * new valid length.
 */
size_t fj_buf_read(struct fj_file *f, uint64_t off, void *buf, size_t len,
		   size_t native_n);

/* End of the highest staged extent, 0 if nothing is staged. */
uint64_t fj_buf_end(const struct fj_file *f);

/* Drops staged bytes in [off, off + len); len UINT64_MAX: to the end. */
void fj_buf_discard(struct fj_buf *b, struct fj_file *f, uint64_t off,
		    uint64_t len);

/* Evicts every extent of f in offset order; stops at the first error. */
int fj_buf_flush_file(struct fj_buf *b, struct fj_file *f);

/*
 * Evicts whole files, oldest first, while the buffer is over capacity or
 * its oldest data arrived before now_ns - age_ns (age_ns 0: evict all).
 * Returns the number of files flushed or -errno of the first failure.
 */
int fj_buf_reclaim(struct fj_buf *b, uint64_t now_ns, uint64_t age_ns);

/* True when staged bytes exceed the capacity. */
int fj_buf_over(struct fj_buf *b);

void fj_buf_get_stats(struct fj_buf *b, struct fj_buf_stats *st);

#endif
