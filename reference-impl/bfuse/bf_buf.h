/* SPDX-License-Identifier: MIT */
/*
 * bf_buf: bFUSE's write buffer, the part of the daemon that decides where a
 * write's bytes wait and when they reach the native file (the rules are in
 * bf_buf.c's purpose block).  It works on fusecore's files, inodes and
 * receive-buffer pool and needs no FUSE session: bfuse.c hands it the bytes
 * of each FUSE request, and test_bf_buf.c drives it with files of its own.
 *
 * The functions taking only a file or an inode have the signatures of the
 * fusecore policy hooks they implement (fusecore.h), and do nothing for an
 * inode opened while no buffer existed.
 */
#ifndef BF_BUF_H
#define BF_BUF_H

#include "fusecore.h"

/* Sizes and timing, constant for the buffer's life. */
struct bf_buf_params {
	uint64_t entry_size;	/* bytes an entry holds at most */
	uint64_t entry_phase;	/* entries end at this offset mod entry_size;
				 * 0: where they fill (must be < entry_size) */
	unsigned int nentries;	/* entries in the buffer, >= 1 */
	uint64_t flush_ms;	/* timer period and idle time, >= 1 */
	uint64_t (*clock)(void);	/* monotonic ns; NULL = fc_now_ns */
};

/* The counters the buffer updates; the daemon registers them (fusecore). */
struct bf_counters {
	struct fc_counter *buffered, *direct, *coalesced, *entries_filled;
	struct fc_counter *full_waits, *hwm_bytes, *hwm_entries;
	struct fc_counter *deferred_errors, *errors_reported;
	struct fc_counter *reads_from_buffer;
	struct fc_counter *flushed[FC_CAUSE_COUNT];
};

/* A run of a write's bytes inside a pool buffer (fc_rbuf_*). */
struct bf_seg {
	void *base;		/* the buffer, fc_rbuf_size() bytes */
	char *data;		/* first byte, inside the buffer */
	size_t len;
};

struct bf_buf;
struct bf_inode;

/* Made after fusecore's io_unit is known (segments are pool buffers). */
struct bf_buf *bf_buf_new(const struct bf_buf_params *p,
			  const struct bf_counters *c);
int bf_buf_start(struct bf_buf *b);	/* management thread; 0 or -errno */
void bf_buf_stop(struct bf_buf *b);	/* unmount: stop it, write all out */
void bf_buf_free(struct bf_buf *b);	/* after stop, nothing in flight */

/* Per-inode state, made at an open (the open hook); 0 or -ENOMEM. */
int bf_buf_open(struct bf_buf *b, struct fc_file *f);
void bf_buf_inode_free(struct fc_inode *i);

/*
 * Writing.  bf_buf_takes: is a write of size bytes to f buffered?  If not,
 * the caller writes it between bf_buf_direct_begin and _end (which write the
 * inode's entries out first and keep later ones out meanwhile) and counts
 * it in counters->direct.  Otherwise bf_buf_write takes the bytes at src:
 * when own->base is set, src lies inside that pool buffer, which the buffer
 * may keep as a segment (own->base is then cleared; the caller frees what
 * is left).  Writes of at least bf_buf_own_min() bytes should come that
 * way.  Returns size or -errno; it may block while the buffer is full.
 */
bool bf_buf_takes(const struct bf_buf *b, const struct fc_file *f,
		  size_t size);
size_t bf_buf_own_min(const struct bf_buf *b);
ssize_t bf_buf_write(struct bf_buf *b, struct fc_file *f, const char *src,
		     size_t size, off_t off, struct bf_seg *own);
struct bf_inode *bf_buf_direct_begin(struct fc_file *f);
void bf_buf_direct_end(struct bf_inode *bi);

/* Policy hooks (fusecore.h): what reads, stat, close, fsync... see. */
ssize_t bf_buf_read(struct fc_file *f, char *buf, size_t size, off_t off);
void bf_buf_getattr(struct fc_inode *i, struct stat *st);
int bf_buf_setattr(struct fc_inode *i, struct fc_file *f,
		   const struct stat *attr, int to_set);
int bf_buf_close(struct fc_file *f);
int bf_buf_release(struct fc_file *f);
int bf_buf_fsync(struct fc_file *f, int datasync);
int bf_buf_sync_inode(struct fc_inode *i, enum fc_cause cause);

/*
 * One round of the management thread: write out, oldest first, every entry
 * that is due at the buffer's clock.  Returns the number of flushes (each
 * writes the entry picked and the older entries of its inode).
 */
unsigned int bf_buf_flush_due(struct bf_buf *b);

#endif /* BF_BUF_H */
