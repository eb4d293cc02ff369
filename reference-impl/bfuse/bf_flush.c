// SPDX-License-Identifier: MIT
/*
 * The write buffer's way out (see bf_buf.c for the rules): writing an
 * inode's entries to the native file, oldest first, one pwritev each; the
 * deferred error a failed pwrite leaves on the inode and the fsync or close
 * that takes it; the management thread (full entries at once, idle and old
 * ones on its timer); unmount; and the policy hooks that write a file out
 * (close, release, fsync, truncate, utimes, fallocate, open(O_TRUNC)) or
 * write it out before a write that is not buffered.
 *
 * Data and lock rules: bf_internal.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "bf_internal.h"

/* ---- writing out -------------------------------------------------------- */

/*
 * Write a FLUSHING entry (owned by the caller, no b->lock): one pwritev,
 * a failure kept in bi->err; then its buffers go back to the pool and its
 * file reference is dropped.
 */
static void bf_entry_write_out(struct bf_buf *b, struct bf_entry *e)
{
	struct fc_file *f = e->file;
	unsigned int k;
	ssize_t res;

	for (k = 0; k < e->nseg; k++) {
		e->iov[k].iov_base = e->seg[k].data;
		e->iov[k].iov_len = e->seg[k].len;
	}
	res = fc_pwritev_all(f->fd, e->iov, (int)e->nseg, e->off);
	if (res < 0) {
		fc_counter_add(b->c->deferred_errors, 1);
		fc_log("deferred write of %zu bytes at %lld to inode %llu "
		       "failed: %s (reported at the next fsync/close)",
		       e->len, (long long)e->off,
		       (unsigned long long)f->inode->src_ino,
		       strerror((int)-res));
		pthread_mutex_lock(&b->lock);
		if (!e->bi->err)
			e->bi->err = (int)-res;
		pthread_mutex_unlock(&b->lock);
	}
	for (k = 0; k < e->nseg; k++)
		fc_rbuf_free(e->seg[k].base);
	e->nseg = 0;
	e->file = NULL;
	fc_file_put(f);
}

/*
 * Write out bi's entries with seq <= max_seq, oldest first.  Caller holds
 * bi->flush_lock and a reference to the inode (through a file), so that
 * the entries' file references are never the inode's last.  Returns the
 * number of entries written.
 */
static unsigned int bf_flush_locked(struct bf_inode *bi, uint64_t max_seq,
				    enum fc_cause cause)
{
	struct bf_buf *b = bi->b;
	struct bf_entry *first, *e;
	unsigned int n = 0, k;

	pthread_mutex_lock(&b->lock);
	first = bi->head;
	for (e = first; e && e->seq <= max_seq; e = e->next) {
		e->state = BF_FLUSHING;
		n++;
	}
	pthread_mutex_unlock(&b->lock);
	if (!n)
		return 0;
	/*
	 * The n entries stay at the head of bi's list (only flush_lock's
	 * holder removes entries; writers append), so their links hold,
	 * but for the last one's next, which a writer may be setting.
	 */
	for (e = first, k = 0; k < n; k++) {
		bf_entry_write_out(b, e);
		if (k + 1 < n)
			e = e->next;
	}

	pthread_mutex_lock(&b->lock);
	for (k = 0; k < n; k++) {
		e = bi->head;
		bi->head = e->next;
		b->occupancy -= e->len;
		e->state = BF_FREE;
		e->bi = NULL;
		e->next = b->free;
		b->free = e;
		b->nused--;
	}
	if (!bi->head)
		bi->tail = NULL;
	__atomic_store_n(&bi->nentries, bi->nentries - n, __ATOMIC_RELAXED);
	fc_counter_add(b->c->flushed[cause], n);	/* before any waiter runs */
	pthread_cond_broadcast(&b->cond_free);
	pthread_mutex_unlock(&b->lock);
	return n;
}

static void bf_flush(struct bf_inode *bi, uint64_t max_seq,
		     enum fc_cause cause)
{
	pthread_mutex_lock(&bi->flush_lock);
	bf_flush_locked(bi, max_seq, cause);
	pthread_mutex_unlock(&bi->flush_lock);
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
	pthread_mutex_lock(&bi->b->lock);
	err = bi->err;
	bi->err = 0;
	pthread_mutex_unlock(&bi->b->lock);
	if (err)
		fc_counter_add(bi->b->c->errors_reported, 1);
	return -err;
}

/* ---- the management thread ---------------------------------------------- */

/* The oldest entry due to be written out at now, or NULL.  b->lock held. */
static struct bf_entry *bf_pick_due(struct bf_buf *b, uint64_t now)
{
	uint64_t idle_ns = b->p.flush_ms * 1000000ULL;
	struct bf_entry *pick = NULL;
	unsigned int k;

	for (k = 0; k < b->p.nentries; k++) {
		struct bf_entry *e = &b->entries[k];
		bool due = e->state == BF_SEALED ||
			   (e->state == BF_FILLING &&
			    (now - e->touched_ns >= idle_ns ||
			     now - e->created_ns >= 100 * idle_ns));

		if (due && (!pick || e->seq < pick->seq))
			pick = e;
	}
	return pick;
}

/*
 * Write out pick and the older entries of its inode; b->lock is held on
 * entry and return, dropped meanwhile.
 */
static void bf_flush_pick(struct bf_buf *b, struct bf_entry *pick)
{
	struct fc_file *f = pick->file;
	struct bf_inode *bi = pick->bi;
	uint64_t seq = pick->seq;
	enum fc_cause cause = pick->state == BF_FILLING ? FC_CAUSE_TIMER :
							   FC_CAUSE_FULL;

	fc_file_get(f);		/* keeps the inode and bi alive */
	pthread_mutex_unlock(&b->lock);
	bf_flush(bi, seq, cause);
	fc_file_put(f);
	pthread_mutex_lock(&b->lock);
}

unsigned int bf_buf_flush_due(struct bf_buf *b)
{
	struct bf_entry *pick;
	unsigned int n = 0;

	pthread_mutex_lock(&b->lock);
	while ((pick = bf_pick_due(b, b->p.clock()))) {
		bf_flush_pick(b, pick);
		n++;
	}
	pthread_mutex_unlock(&b->lock);
	return n;
}

static void *bf_flusher_main(void *arg)
{
	struct bf_buf *b = arg;
	struct bf_entry *pick;
	struct timespec ts;

	pthread_mutex_lock(&b->lock);
	while (!b->stopping) {
		pick = bf_pick_due(b, b->p.clock());
		if (pick) {
			bf_flush_pick(b, pick);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)(b->p.flush_ms % 1000) * 1000000L;
		ts.tv_sec += b->p.flush_ms / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&b->cond_work, &b->lock, &ts);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

int bf_buf_start(struct bf_buf *b)
{
	if (pthread_create(&b->flusher, NULL, bf_flusher_main, b))
		return -EAGAIN;
	b->flusher_running = true;
	return 0;
}

void bf_buf_stop(struct bf_buf *b)
{
	unsigned int k, left = 0;

	pthread_mutex_lock(&b->lock);
	b->stopping = true;
	pthread_cond_broadcast(&b->cond_work);
	pthread_mutex_unlock(&b->lock);
	if (b->flusher_running)
		pthread_join(b->flusher, NULL);
	b->flusher_running = false;

	/* no request is being served any more: write out what is left */
	for (;;) {
		struct bf_inode *bi = NULL;
		struct fc_file *f = NULL;

		pthread_mutex_lock(&b->lock);
		for (k = 0; k < b->p.nentries && !bi; k++) {
			struct bf_entry *e = &b->entries[k];

			if (e->state == BF_FILLING || e->state == BF_SEALED) {
				bi = e->bi;
				f = e->file;
				fc_file_get(f);
			}
		}
		pthread_mutex_unlock(&b->lock);
		if (!bi)
			break;
		bf_flush(bi, BF_ALL, FC_CAUSE_UNMOUNT);
		pthread_mutex_lock(&b->lock);
		if (bi->err) {
			fc_log("unmount: a deferred write error (%s) could not "
			       "be reported to any application",
			       strerror(bi->err));
			left++;
			bi->err = 0;
		}
		pthread_mutex_unlock(&b->lock);
		fc_file_put(f);
	}
	if (left)
		fc_log("unmount: %u files lost data to write errors", left);
}

/* ---- hooks that write a file out ---------------------------------------- */

struct bf_inode *bf_buf_direct_begin(struct fc_file *f)
{
	struct bf_inode *bi = bf_inode_of(f->inode);

	if (bi) {
		pthread_mutex_lock(&bi->flush_lock);
		bf_flush_locked(bi, BF_ALL, FC_CAUSE_OVERLAP);
	}
	return bi;
}

void bf_buf_direct_end(struct bf_inode *bi)
{
	if (bi)
		pthread_mutex_unlock(&bi->flush_lock);
}

int bf_buf_setattr(struct fc_inode *i, struct fc_file *f,
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

/*
 * A read-only descriptor wrote nothing: its close neither waits for other
 * descriptors' data nor takes their error (that goes to their close/fsync).
 */
static bool bf_is_writable(const struct fc_file *f)
{
	return (f->flags & O_ACCMODE) != O_RDONLY;
}

int bf_buf_close(struct fc_file *f)
{
	if (!bf_is_writable(f))
		return 0;
	return bf_sync_and_take_error(f->inode, FC_CAUSE_CLOSE);
}

int bf_buf_release(struct fc_file *f)
{
	struct bf_inode *bi = bf_inode_of(f->inode);

	/* data goes out on last close; an error stays for the next opener */
	if (bf_is_writable(f) && bf_has_entries(bi))
		bf_flush(bi, BF_ALL, FC_CAUSE_CLOSE);
	return 0;
}

int bf_buf_fsync(struct fc_file *f, int datasync)
{
	(void)datasync;
	/* 0: the core then fsyncs / fdatasyncs the native fd */
	return bf_sync_and_take_error(f->inode, FC_CAUSE_FSYNC);
}

int bf_buf_sync_inode(struct fc_inode *i, enum fc_cause cause)
{
	struct bf_inode *bi = bf_inode_of(i);

	if (bf_has_entries(bi))
		bf_flush(bi, BF_ALL, cause);
	return 0;
}
