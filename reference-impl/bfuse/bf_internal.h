/* SPDX-License-Identifier: MIT */
/*
 * The write buffer's data, shared by its two halves and by nothing else:
 * bf_buf.c takes bytes in (entries, writes, reads, stat) and bf_flush.c
 * takes them out (flushes, deferred errors, the management thread, the
 * hooks that write a file out).  bf_buf.c calls into bf_flush.c (a write
 * that is not buffered), never the other way.
 *
 * Ordering: entries of an inode are written in the order they were made
 * (seq), and only the newest one grows, so a later write never lands before
 * an earlier one.  All native writes of an inode (entry flushes and direct
 * writes) are serialised by its flush_lock.
 *
 * Locking:
 *   b->lock       protects every entry's state, bi, file, off, len, limit,
 *                 seq, times, segments and their contents while FILLING or
 *                 SEALED; the free list, nused, seq, occupancy, stopping;
 *                 and every bf_inode's entry list, nentries and err.  A
 *                 FLUSHING entry belongs to the thread flushing it (which
 *                 holds the inode's flush_lock): it writes the segments,
 *                 returns them to the pool and drops the file without
 *                 b->lock.  No pwrite runs under b->lock.
 *   bi->flush_lock  serialises native writes of one inode, and reads that
 *                 overlay buffered bytes (no entry of the inode can leave
 *                 the buffer meanwhile); taken before b->lock, never while
 *                 waiting for a free entry.
 *   The pool's lock nests inside b->lock (a small write's fresh buffer).
 */
#ifndef BF_INTERNAL_H
#define BF_INTERNAL_H

#include <sys/uio.h>

#include "bf_buf.h"

#define BF_ALL UINT64_MAX

enum bf_state { BF_FREE, BF_FILLING, BF_SEALED, BF_FLUSHING };

struct bf_entry {
	enum bf_state state;
	struct bf_inode *bi;
	struct fc_file *file;	/* referenced while FILLING or SEALED */
	off_t off;
	size_t len;
	off_t limit;		/* the entry never grows past this offset */
	uint64_t seq;
	uint64_t created_ns;
	uint64_t touched_ns;
	unsigned int nseg;
	struct bf_seg *seg;	/* max_segs, in file order */
	struct iovec *iov;	/* max_segs: the flusher's pwritev vector */
	struct bf_entry *next;	/* newer entry of bi, or next FREE entry */
};

struct bf_inode {
	struct bf_buf *b;	/* constant */
	pthread_mutex_t flush_lock;
	struct bf_entry *head;	/* b->lock: entries not FREE, oldest first */
	struct bf_entry *tail;	/* b->lock: the newest of them */
	unsigned int nentries;	/* b->lock: their number (read as a hint) */
	int err;		/* b->lock: deferred errno, 0 = none */
};

struct bf_buf {
	struct bf_buf_params p;		/* constant */
	const struct bf_counters *c;	/* constant */
	size_t seg_size;		/* fc_rbuf_size(); constant */
	size_t own_min;			/* writes this large get a segment */
	unsigned int max_segs;		/* segments per entry */
	struct bf_entry *entries;	/* p.nentries */

	pthread_mutex_t lock;
	pthread_cond_t cond_free;	/* an entry became FREE */
	pthread_cond_t cond_work;	/* an entry was sealed / stopping */
	struct bf_entry *free;		/* lock: FREE entries, by next */
	unsigned int nused;		/* lock: entries not FREE */
	uint64_t seq;			/* lock: seq of the newest entry */
	uint64_t occupancy;		/* lock: bytes held */
	bool stopping;			/* lock */
	pthread_t flusher;
	bool flusher_running;		/* start/stop only */
};

static inline struct bf_inode *bf_inode_of(struct fc_inode *i)
{
	return __atomic_load_n((struct bf_inode **)&i->pdata,
			       __ATOMIC_ACQUIRE);
}

/* Does bi hold buffered data?  (racy hint; callers then flush properly) */
static inline bool bf_has_entries(struct bf_inode *bi)
{
	return bi && __atomic_load_n(&bi->nentries, __ATOMIC_RELAXED);
}

#endif /* BF_INTERNAL_H */
