// SPDX-License-Identifier: MIT
/*
 * fusecore's own receive loop (-o own_loop=1, splice off) and its pool of
 * receive buffers.
 *
 * Why: libfuse's loop reads every request into a buffer of its own and
 * reuses that buffer for the next request, so a policy that keeps a write's
 * data (bFUSE's write buffer) must copy it out: kernel -> libfuse buffer ->
 * policy memory -> native file is three copies of every byte.  Here each
 * worker thread reads /dev/fuse into a buffer taken from a pool and hands it
 * to libfuse with fuse_session_process_buf().  A write hook may *adopt* that
 * buffer (fc_rbuf_adopt): the bytes stay where the kernel put them, the
 * policy owns the buffer until it gives it back with fc_rbuf_free(), and the
 * worker takes a fresh buffer from the pool for its next request.
 *
 * The request is read at an offset chosen so that a WRITE's data starts on a
 * page boundary of the buffer (FC_RBUF_DATA_AT): the native pwrite then
 * copies between equally aligned source and page cache.  The kernel's
 * `rep movsb` copy runs at less than half speed when source and
 * destination are misaligned relative to each other (measured here: the
 * flusher's pwrite of adopted data at offset 80 cost 2.5x the CPU of the
 * same pwrite from page-aligned memory).
 *
 * Buffers are recycled through the pool rather than freed: a fresh 516 KiB
 * allocation costs 129 page faults (zero-filled pages) on first touch, more
 * than the copy it saves.
 *
 * Shutdown: a worker leaves when the session has exited (signal handler,
 * DESTROY) or the device reports ENODEV (unmounted).  The first worker to
 * leave wakes fc_loop_run(), which cancels the others; they accept
 * cancellation only while blocked in read(2), never while a request is being
 * served.
 *
 * Locking: fc_pool_lock protects fc_pool[] and fc_npool.  The current receive
 * buffer of a worker is thread-local.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fc_internal.h"

#define FC_POOL_MAX 512		/* free buffers kept for reuse */
#define FC_RBUF_DATA_AT 4096	/* where a WRITE's data lands in a buffer */
#define FC_WRITE_HEADER (sizeof(struct fuse_in_header) + \
			 sizeof(struct fuse_write_in))

static size_t fc_rbuf_bytes;		/* constant once serving */
static void *fc_pool[FC_POOL_MAX];	/* fc_pool_lock */
static unsigned int fc_npool;		/* fc_pool_lock */
static pthread_mutex_t fc_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread void *fc_rbuf_cur;	/* this worker's receive buffer */
static sem_t fc_loop_done;

/*
 * One buffer holds a whole request: the kernel refuses a read(2) shorter
 * than header + fuse_write_in + max_write, and 128 KiB keeps room for
 * SETXATTR values (64 KiB) whatever the IO unit.
 */
static size_t fc_rbuf_size_for(uint32_t io_unit)
{
	size_t unit = io_unit ? io_unit : (1 << 20);

	if (unit < (128 << 10))
		unit = 128 << 10;
	/* headroom before the data, the data, room for headers after it */
	return FC_RBUF_DATA_AT + unit + 4096;
}

size_t fc_rbuf_size(void)
{
	if (!fc_rbuf_bytes)
		fc_rbuf_bytes = fc_rbuf_size_for(fc_cfg.io_unit);
	return fc_rbuf_bytes;
}

void *fc_rbuf_alloc(void)
{
	void *p = NULL;

	pthread_mutex_lock(&fc_pool_lock);
	if (fc_npool)
		p = fc_pool[--fc_npool];
	pthread_mutex_unlock(&fc_pool_lock);
	if (!p && posix_memalign(&p, 4096, fc_rbuf_size()))
		p = NULL;
	return p;
}

void fc_rbuf_free(void *base)
{
	if (!base)
		return;
	pthread_mutex_lock(&fc_pool_lock);
	if (fc_npool < FC_POOL_MAX) {
		fc_pool[fc_npool++] = base;
		base = NULL;
	}
	pthread_mutex_unlock(&fc_pool_lock);
	free(base);
}

void *fc_rbuf_adopt(const void *p)
{
	char *base = fc_rbuf_cur;

	if (!base || (const char *)p < base ||
	    (const char *)p >= base + fc_rbuf_size())
		return NULL;
	fc_rbuf_cur = NULL;
	return base;
}

static void *fc_worker(void *arg)
{
	struct fuse_session *se = arg;
	int fd = fuse_session_fd(se);

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!fuse_session_exited(se)) {
		struct fuse_buf fb = { 0 };
		char *req;
		ssize_t n;

		if (!fc_rbuf_cur)
			fc_rbuf_cur = fc_rbuf_alloc();
		if (!fc_rbuf_cur) {
			fc_log("receive loop: out of memory");
			fuse_session_exit(se);
			break;
		}
		req = (char *)fc_rbuf_cur + FC_RBUF_DATA_AT - FC_WRITE_HEADER;
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		n = read(fd, req, fc_rbuf_size() - (req - (char *)fc_rbuf_cur));
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n < 0) {
			/* ENOENT: the request was interrupted before we read it */
			if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
				continue;
			if (errno != ENODEV)
				fc_log("receive loop: reading the FUSE device: %s",
				       strerror(errno));
			fuse_session_exit(se);
			break;
		}
		if (fc_io_wanted())
			fc_io_received(req, n);
		fb.mem = req;
		fb.size = n;
		/* a write hook may adopt fc_rbuf_cur (it is NULL afterwards) */
		fuse_session_process_buf(se, &fb);
	}
	fc_rbuf_free(fc_rbuf_cur);
	fc_rbuf_cur = NULL;
	sem_post(&fc_loop_done);
	return NULL;
}

int fc_loop_run(struct fuse_session *se, unsigned int nthreads)
{
	pthread_t *tids = calloc(nthreads, sizeof(*tids));
	unsigned int k, started = 0;

	if (!tids)
		return -ENOMEM;
	sem_init(&fc_loop_done, 0, 0);
	fc_rbuf_size();
	for (k = 0; k < nthreads; k++) {
		if (pthread_create(&tids[k], NULL, fc_worker, se))
			break;
		started++;
	}
	if (!started) {
		free(tids);
		return -EAGAIN;
	}
	/* the first worker out means the session is over: stop the others */
	while (sem_wait(&fc_loop_done) < 0 && errno == EINTR &&
	       !fuse_session_exited(se))
		;
	fuse_session_exit(se);
	for (k = 0; k < started; k++)
		pthread_cancel(tids[k]);
	for (k = 0; k < started; k++)
		pthread_join(tids[k], NULL);
	free(tids);
	sem_destroy(&fc_loop_done);
	return 0;
}
