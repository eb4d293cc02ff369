/*
 * mb_run.c - what mobibench's workers share with the main thread: the run
 * state they synchronise on (the start barrier, the end count, the first
 * failure, setState lines), progress, per-thread context switch samples,
 * and the few system services every workload uses (monotonic clock, page
 * cache drop, trace markers, formatted strings).
 *
 * The workloads (mb_file.c, mb_db.c, mb_replay.c) and the main thread
 * (mb_main.c) call into this file; it calls none of them.  Locking rules are
 * on struct mb_run in mb.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mb.h"

/* -------------------------------------------------- system services */

char *mb_strdupf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		fprintf(stderr, "mobibench: out of memory\n");
		exit(1);
	}
	return s;
}

uint64_t mb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int mb_drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	int ret = -1;

	if (fd >= 0) {
		if (write(fd, "3\n", 2) == 2)
			ret = 0;
		close(fd);
	}
	if (ret)
		fprintf(stderr, "mobibench: cannot drop caches (%s), "
			"continuing\n", strerror(errno));
	return ret;
}

int mb_marker_open(void)
{
	const char *env = getenv("MOBIBENCH_TRACE_MARKER");
	static const char *const dflt[] = {
		"/sys/kernel/tracing/trace_marker",
		"/sys/kernel/debug/tracing/trace_marker",
	};
	size_t i;
	int fd;

	if (env)
		return *env ? open(env, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
	for (i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++) {
		fd = open(dflt[i], O_WRONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	return -1;
}

void mb_marker_write(int fd, const char *what)
{
	char line[64];
	int n;

	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "mobibench: %s\n", what);
	if (write(fd, line, (size_t)n) != n) {
		/* a full or closed trace buffer must not fail the run */
	}
}

/* ---------------------------------------------------------- run state */

void mb_set_state(struct mb_run *run, int state)
{
	run->state = state;
	printf("setState: %d\n", state);
	pthread_cond_broadcast(&run->cond);
}

void mb_fail(struct mb_run *run, const char *short_msg, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&run->out_lock);
	fputs("mobibench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&run->out_lock);

	pthread_mutex_lock(&run->lock);
	if (!run->failed) {
		run->failed = 1;
		snprintf(run->err, sizeof(run->err), "%s", short_msg);
		printf("setState: %d\n", MB_S_ERROR);
	}
	pthread_cond_broadcast(&run->cond);
	pthread_mutex_unlock(&run->lock);
}

/* A worker's setup is done; returns 0 to run the loop, -1 to abandon. */
int mb_ready_and_wait(struct mb_run *run)
{
	int go;

	pthread_mutex_lock(&run->lock);
	run->n_ready++;
	pthread_cond_broadcast(&run->cond);
	while (run->state != MB_S_EXEC && run->state != MB_S_ERROR)
		pthread_cond_wait(&run->cond, &run->lock);
	go = run->state == MB_S_EXEC;
	pthread_mutex_unlock(&run->lock);
	return go ? 0 : -1;
}

void mb_signal_end(struct mb_run *run)
{
	pthread_mutex_lock(&run->lock);
	run->n_end++;
	pthread_cond_broadcast(&run->cond);
	pthread_mutex_unlock(&run->lock);
}

void mb_progress(struct mb_worker *w, long long done, long long total,
		 int *last)
{
	int pct;

	if (w->id != 0 || w->run->cfg->quiet || total <= 0)
		return;
	pct = (int)(done * 100 / total);
	if (pct == *last)
		return;
	*last = pct;
	printf("%02d%%\r", pct);
}

/* ------------------------------------------------------ scheduling */

static int mb_sched_read(pid_t tid, unsigned long long *total,
			 unsigned long long *vol)
{
	char path[64], line[256];
	unsigned long long a = 0, b = 0;
	int got = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/sched", (int)getpid(),
		 (int)tid);
	f = fopen(path, "r");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "nr_switches : %llu", &a) == 1)
				got |= 1;
			else if (sscanf(line, "nr_voluntary_switches : %llu",
					&b) == 1)
				got |= 2;
		}
		fclose(f);
	}
	if (got != 3) {
		/* kernels without CONFIG_SCHED_DEBUG: the status counters */
		unsigned long long nv = 0;

		got = 0;
		snprintf(path, sizeof(path), "/proc/self/task/%d/status",
			 (int)tid);
		f = fopen(path, "r");
		if (!f)
			return -1;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "voluntary_ctxt_switches: %llu",
				   &b) == 1)
				got |= 1;
			else if (sscanf(line,
					"nonvoluntary_ctxt_switches: %llu",
					&nv) == 1)
				got |= 2;
		}
		fclose(f);
		if (got != 3)
			return -1;
		a = b + nv;
	}
	*total = a;
	*vol = b;
	return 0;
}

void mb_sched_sample(struct mb_worker *w, int which)
{
	if (w->run->cfg->threads != 1)
		return;
	if (mb_sched_read(w->tid, &w->cs_total[which], &w->cs_vol[which]))
		w->cs_valid = 0;
	else if (which == 0)
		w->cs_valid = 1;
}
