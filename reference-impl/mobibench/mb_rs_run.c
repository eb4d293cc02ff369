/*
 * mb_rs_run.c - the timed part of a mobiperf replay: one thread per script
 * thread, each issuing its calls in order.
 *
 * Timing: open loop (the default) starts each call THINK_NS after the end
 * of the thread's previous call, as recorded (a thread's first call at its
 * recorded offset from the start); closed loop (--replay-timing=closed)
 * issues each call as soon as the previous one returned. In both, a call
 * with dependencies first waits until each named thread has finished the
 * named number of calls. Sleeps longer than MB_RS_SPIN_NS go through
 * clock_nanosleep up to MB_RS_SPIN_NS before the deadline, the rest is spun
 * (a timer wake-up is late by tens of microseconds).
 *
 * Sharing: progress[t] (calls thread t finished) is written by thread t
 * only, with release order, and read by waiters with acquire order; a
 * waiter that must sleep counts itself in sleepers[t] and waits on the
 * futex of progress[t], which thread t wakes when sleepers[t] is not zero
 * (both sequentially consistent, so no wake-up is lost). fds[h] is stored
 * by the thread that opens handle h and read by any thread whose call on h
 * depends (in the script) on that open, so it is ordered by progress[].
 * The per-thread results are the worker's own until the join.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "mb_rs.h"

#define MB_RS_SPIN_NS 80000LL
#define MB_RS_MAX_PRINTED 10

struct mb_rs_worker {
	struct mb_rs *rs;
	int index;
	pthread_t th;
	char *buf;
};

static void mb_rs_sleep_until(uint64_t when)
{
	struct timespec at;
	uint64_t now = mb_now_ns();

	if (when <= now)
		return;
	if ((int64_t)(when - now) > MB_RS_SPIN_NS) {
		uint64_t wake = when - (uint64_t)MB_RS_SPIN_NS;

		at.tv_sec = (time_t)(wake / 1000000000ULL);
		at.tv_nsec = (long)(wake % 1000000000ULL);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at,
				       NULL) == EINTR)
			;
	}
	while (mb_now_ns() < when)
		;
}

static void mb_rs_wait(struct mb_rs *rs, struct mb_rs_thread *t,
		       const struct mb_rs_dep *d)
{
	uint32_t *word = &rs->progress[d->thread];
	uint32_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	uint64_t t0;
	int spins;

	if (v >= d->count)
		return;
	t0 = mb_now_ns();
	for (spins = 0; spins < 200 && v < d->count; spins++)
		v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	while (v < d->count) {
		__atomic_add_fetch(&rs->sleepers[d->thread], 1,
				   __ATOMIC_SEQ_CST);
		v = __atomic_load_n(word, __ATOMIC_SEQ_CST);
		if (v < d->count)
			syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, v, NULL,
				NULL, 0);
		__atomic_sub_fetch(&rs->sleepers[d->thread], 1,
				   __ATOMIC_SEQ_CST);
		v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	}
	t->waits++;
	t->wait_ns += (int64_t)(mb_now_ns() - t0);
}

static void mb_rs_done(struct mb_rs *rs, int index, uint32_t count)
{
	__atomic_store_n(&rs->progress[index], count, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&rs->sleepers[index], __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &rs->progress[index], FUTEX_WAKE_PRIVATE,
			INT_MAX, NULL, NULL, 0);
}

/* a workload's write to drop_caches: "3", then newlines to its size */
static long long mb_rs_drop_caches(int fd, int64_t size)
{
	char text[64];

	if (size <= 0 || size > (int64_t)sizeof(text))
		size = 2;
	memset(text, '\n', sizeof(text));
	text[0] = '3';
	return write(fd, text, (size_t)size);
}

/* the call itself: what the system call returned */
static long long mb_rs_issue(struct mb_rs *rs, const struct mb_rs_call *c,
			     char *buf)
{
	int fd = c->op < MB_RS_DUP ?
		 __atomic_load_n(&rs->fds[c->handle], __ATOMIC_ACQUIRE) : -1;
	struct iovec iov = { buf, (size_t)c->size };
	const char *path = rs->pool + c->path;
	long long ret;

	switch (c->op) {
	case MB_RS_OPEN:
		ret = openat(rs->rootfd, path, c->flags, 0666);
		if (ret >= 0)
			__atomic_store_n(&rs->fds[c->handle], (int)ret,
					 __ATOMIC_RELEASE);
		return ret;
	case MB_RS_CLOSE:
		__atomic_store_n(&rs->fds[c->handle], -1, __ATOMIC_RELEASE);
		return close(fd);
	case MB_RS_READ: return read(fd, buf, (size_t)c->size);
	case MB_RS_WRITE:
		if (rs->sysctl[c->handle])
			return mb_rs_drop_caches(fd, c->size);
		return write(fd, buf, (size_t)c->size);
	case MB_RS_READV: return readv(fd, &iov, 1);
	case MB_RS_WRITEV: return writev(fd, &iov, 1);
	case MB_RS_PREAD: return pread(fd, buf, (size_t)c->size, c->off);
	case MB_RS_PWRITE: return pwrite(fd, buf, (size_t)c->size, c->off);
	case MB_RS_PREADV: return preadv(fd, &iov, 1, c->off);
	case MB_RS_PWRITEV: return pwritev(fd, &iov, 1, c->off);
	case MB_RS_LSEEK: return lseek(fd, c->off, SEEK_SET);
	case MB_RS_FSYNC: return fsync(fd);
	case MB_RS_FDATASYNC: return fdatasync(fd);
	case MB_RS_FTRUNCATE: return ftruncate(fd, c->off);
	case MB_RS_FALLOCATE: return fallocate(fd, c->flags, c->off, c->size);
	case MB_RS_DUP:
		ret = dup(__atomic_load_n(&rs->fds[c->off], __ATOMIC_ACQUIRE));
		if (ret >= 0)
			__atomic_store_n(&rs->fds[c->handle], (int)ret,
					 __ATOMIC_RELEASE);
		return ret;
	case MB_RS_RENAME:
		return renameat(rs->rootfd, path, rs->rootfd,
				rs->pool + c->path2);
	case MB_RS_UNLINK: return unlinkat(rs->rootfd, path, 0);
	case MB_RS_MKDIR: return mkdirat(rs->rootfd, path, 0777);
	default: return unlinkat(rs->rootfd, path, AT_REMOVEDIR);
	}
}

static void mb_rs_failed(struct mb_rs *rs, struct mb_rs_thread *t,
			 const struct mb_rs_call *c, int err)
{
	t->errors++;
	if (__atomic_add_fetch(&rs->first_errors, 1, __ATOMIC_RELAXED) <=
	    MB_RS_MAX_PRINTED)
		fprintf(stderr, "mobibench: replay line %u: %s failed: %s\n",
			c->line, mb_rs_op_names[c->op], strerror(err));
}

static void *mb_rs_worker(void *arg)
{
	struct mb_rs_worker *w = arg;
	struct mb_rs *rs = w->rs;
	struct mb_rs_thread *t = &rs->threads[w->index];
	uint64_t prev_end = rs->start_ns, t0, t1, when = 0;
	long long ret;
	uint32_t i, k;

	for (i = 0; i < t->n; i++) {
		const struct mb_rs_call *c = &t->calls[i];

		for (k = 0; k < c->ndeps; k++)
			mb_rs_wait(rs, t, &rs->deps[c->dep + k]);
		if (!rs->closed) {
			when = prev_end + (uint64_t)c->think_ns;
			mb_rs_sleep_until(when);
			/* a call held by another thread is not late */
			if (c->ndeps && (t0 = mb_now_ns()) > when)
				when = t0;
		}
		t0 = mb_now_ns();
		ret = mb_rs_issue(rs, c, w->buf);
		t1 = mb_now_ns();
		if (ret < 0)
			mb_rs_failed(rs, t, c, errno);
		else if (c->op == MB_RS_WRITE || c->op == MB_RS_PWRITE ||
			 c->op == MB_RS_WRITEV || c->op == MB_RS_PWRITEV)
			t->wbytes += ret;
		else if (c->op >= MB_RS_READ && c->op <= MB_RS_PREADV)
			t->rbytes += ret;
		if (!rs->closed && t0 > when) {
			t->late_ns += (int64_t)(t0 - when);
			if ((int64_t)(t0 - when) > t->late_max_ns)
				t->late_max_ns = (int64_t)(t0 - when);
		}
		t->io_ns += (int64_t)(t1 - t0);
		prev_end = t1;
		mb_rs_done(rs, w->index, i + 1);
	}
	t->end_ns = prev_end;
	return NULL;
}

static int mb_rs_start(struct mb_rs *rs, struct mb_rs_worker *ws)
{
	struct rlimit rl;
	int i;

	rs->progress = calloc((size_t)rs->nthreads + 1, sizeof(uint32_t));
	rs->sleepers = calloc((size_t)rs->nthreads + 1, sizeof(uint32_t));
	rs->fds = malloc(((size_t)rs->nhandles + 1) * sizeof(int));
	if (!rs->progress || !rs->sleepers || !rs->fds)
		return -1;
	for (i = 0; i < rs->nhandles; i++)
		rs->fds[i] = -1;
	/* a trace may hold many files open at once */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (i = 0; i < rs->nthreads; i++) {
		size_t size = rs->threads[i].bufsize ? rs->threads[i].bufsize : 1;

		ws[i].rs = rs;
		ws[i].index = i;
		/* aligned for O_DIRECT; filled as the pre-created files are */
		if (posix_memalign((void **)&ws[i].buf, 4096,
				   (size + 4095) & ~(size_t)4095))
			return -1;
		memset(ws[i].buf, 0xfe, size);
	}
	return 0;
}

static double mb_rs_tv(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_usec - a->tv_usec) / 1e6;
}

static int mb_rs_report(struct mb_rs *rs, uint64_t end_ns,
			const struct rusage *r0, const struct rusage *r1)
{
	int64_t io = 0, wb = 0, rb = 0, err = 0, late = 0, late_max = 0;
	int64_t waits = 0, wait_ns = 0;
	int i;

	for (i = 0; i < rs->nthreads; i++) {
		struct mb_rs_thread *t = &rs->threads[i];

		io += t->io_ns;
		wb += t->wbytes;
		rb += t->rbytes;
		err += t->errors;
		late += t->late_ns;
		waits += t->waits;
		wait_ns += t->wait_ns;
		if (t->late_max_ns > late_max)
			late_max = t->late_max_ns;
	}
	printf("replay_script end\n");
	printf("Total IO time : %.3f sec (%lld usec)\n", io / 1e9,
	       (long long)(io / 1000));
	printf("Total IO count : %lld \n", rs->ncalls);
	printf("Total Write: %lld bytes, Read: %lld bytes\n", (long long)wb,
	       (long long)rb);
	printf("Replay timing : %s\n", rs->closed ? "closed" : "open");
	printf("Replay elapsed : %.6f sec\n", (end_ns - rs->start_ns) / 1e9);
	printf("Replay failed calls : %lld\n", (long long)err);
	printf("Replay waits : %lld (%.6f sec)\n", (long long)waits,
	       wait_ns / 1e9);
	if (!rs->closed)
		printf("Replay lateness : mean %.1f usec, max %.1f usec\n",
		       late / 1e3 / (double)rs->ncalls, late_max / 1e3);
	printf("Replay CPU : user %.6f sec, sys %.6f sec\n",
	       mb_rs_tv(&r0->ru_utime, &r1->ru_utime),
	       mb_rs_tv(&r0->ru_stime, &r1->ru_stime));
	if (err)
		printf("Err string : Replay failed (%lld calls)\n",
		       (long long)err);
	return err ? -1 : 0;
}

static int mb_rs_timed(struct mb_rs *rs)
{
	struct mb_rs_worker *ws = calloc((size_t)rs->nthreads, sizeof(*ws));
	struct rusage r0, r1;
	uint64_t end_ns = 0;
	int i, started = 0, rc = -1;

	if (!ws || mb_rs_start(rs, ws))
		goto out;
	fflush(stdout);
	/* files that existed are cold, as a recording's files on a phone are;
	 * without any, the file system is as fresh as the recording's was */
	if (rs->cfg->drop_caches && rs->nfiles)
		mb_drop_caches();
	mb_marker_write(rs->marker, "timed_start");
	getrusage(RUSAGE_SELF, &r0);
	rs->start_ns = mb_now_ns() + 1000000;	/* all threads start together */
	for (i = 0; i < rs->nthreads; i++) {
		if (pthread_create(&ws[i].th, NULL, mb_rs_worker, &ws[i]))
			break;
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(ws[i].th, NULL);
	getrusage(RUSAGE_SELF, &r1);
	mb_marker_write(rs->marker, "timed_end");
	for (i = 0; i < rs->nthreads; i++)
		if (rs->threads[i].end_ns > end_ns)
			end_ns = rs->threads[i].end_ns;
	if (started < rs->nthreads) {
		fprintf(stderr, "mobibench: cannot start replay thread %d of "
			"%d\n", started, rs->nthreads);
		goto out;
	}
	rc = mb_rs_report(rs, end_ns > rs->start_ns ? end_ns : rs->start_ns,
			  &r0, &r1);
out:
	for (i = 0; ws && i < rs->nthreads; i++)
		free(ws[i].buf);
	free(ws);
	return rc;
}

int mb_rs_replay(const struct mb_config *cfg, const char *script)
{
	struct mb_rs rs;
	int rc = -1, i;

	memset(&rs, 0, sizeof(rs));
	rs.cfg = cfg;
	rs.rootfd = -1;
	rs.closed = cfg->replay_closed;
	rs.marker = mb_marker_open();
	printf("replay_script start\n");
	if (mb_rs_parse(&rs, script))
		goto out;
	printf("script_thread_num: %d\n", rs.nthreads);
	printf("call count : %lld\n", rs.ncalls);
	printf("dependencies : %zu\n", rs.ndeps);
	if (mb_rs_prepare(&rs))
		goto out;
	rc = mb_rs_timed(&rs);
out:
	for (i = 0; rs.fds && i < rs.nhandles; i++)
		if (rs.fds[i] >= 0)
			close(rs.fds[i]);
	if (rs.rootfd >= 0)
		close(rs.rootfd);
	if (rs.marker >= 0)
		close(rs.marker);
	mb_rs_free(&rs);
	fflush(stdout);
	return rc;
}
