/*
 * replay_loop.c - the baseline of bench/replay_bench.py: the calls a replay
 * script of N pwrites of SIZE bytes makes, issued by a plain C loop (one
 * thread, one file, no timing, no bookkeeping), and the CPU time the loop
 * took (getrusage around it), printed as "loop CPU : user U sec, sys S sec".
 *
 *   replay_loop FILE N SIZE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double rl_tv(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_usec - a->tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	struct rusage r0, r1;
	struct timespec t0, t1;
	long long n, size, i;
	char *buf;
	int fd;

	if (argc != 4)
		return 2;
	n = atoll(argv[2]);
	size = atoll(argv[3]);
	buf = malloc((size_t)size);
	if (!buf)
		return 1;
	memset(buf, 0xfe, (size_t)size);
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0666);
	if (fd < 0)
		return 1;
	getrusage(RUSAGE_SELF, &r0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++)
		if (pwrite(fd, buf, (size_t)size, 0) != size)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &r1);
	printf("loop elapsed : %.6f sec\n", (double)(t1.tv_sec - t0.tv_sec) +
	       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	printf("loop CPU : user %.6f sec, sys %.6f sec\n", rl_tv(&r0.ru_utime, &r1.ru_utime),
	       rl_tv(&r0.ru_stime, &r1.ru_stime));
	close(fd);
	return 0;
}
