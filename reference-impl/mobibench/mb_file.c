/*
 * mb_file.c - mobibench's file workload: one worker per thread, each on its
 * own file PATH/test.dat<k> (or the block device PATH itself).
 *
 * Untimed setup: the seeded record order, unlink (append mode, and -a 0 in
 * 1.0.1 semantics) or pre-creation to the full size with 0xFE data and an
 * fsync, open with the sync mode's flags, and for mmap modes a touch of the
 * last record and the mapping.  Timed: N records written or read, each with
 * its per-record sync, then one fsync (msync in mmap modes) for the write
 * modes.  Every written byte is 0xFE, as Mobibench's memset(buf, 0xcafe).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mb.h"
#include "mb_order.h"

#define MB_FILL_CHUNK (512 * 1024)

/*
 * A store into a mapping whose blocks cannot be allocated (full filesystem)
 * raises SIGBUS in the storing thread; the original dies of it.  Each worker
 * points its own thread-local jump buffer here around the mmap loop, so the
 * run ends with an error instead.
 */
static __thread sigjmp_buf *mb_bus_jmp;

static void mb_on_sigbus(int sig)
{
	if (mb_bus_jmp)
		siglongjmp(*mb_bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

void mb_file_install_sigbus(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = mb_on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/* the mmap-mode timed loop; returns 0, or -1 after a SIGBUS */
static int mb_mmap_loop(struct mb_worker *w, char *map, char *buf,
			const int64_t *perm, int is_write, int random)
{
	const struct mb_config *c = w->run->cfg;
	size_t reclen = (size_t)c->reclen;
	volatile long long i = 0;
	long long off;
	int last = -1;
	sigjmp_buf jb;
	uint64_t t0;

	if (sigsetjmp(jb, 1)) {
		mb_bus_jmp = NULL;
		mb_fail(w->run, "File write error", "SIGBUS on record %lld "
			"of the mapping: its blocks could not be allocated "
			"(filesystem full?)", (long long)i);
		return -1;
	}
	mb_bus_jmp = &jb;
	for (; i < c->nrec; i++) {
		off = (random ? perm[i] : i) * (long long)reclen;
		t0 = mb_now_ns();
		if (is_write) {
			memcpy(map + off, buf, reclen);
			if (c->sync == MB_Y_MMAP_ASYNC)
				msync(map + off, reclen, MS_ASYNC);
			else if (c->sync == MB_Y_MMAP_SYNC)
				msync(map + off, reclen, MS_SYNC);
		} else {
			memcpy(buf, map + off, reclen);
		}
		w->lat_ns[i] = mb_now_ns() - t0;
		w->n_lat++;
		mb_progress(w, i, c->nrec, &last);
	}
	mb_bus_jmp = NULL;
	return 0;
}

static int mb_is_write(int access)
{
	return access == MB_A_WRITE || access == MB_A_RANDWRITE ||
	       access == MB_A_APPEND;
}

static int mb_is_mmap(int sync)
{
	return sync == MB_Y_MMAP || sync == MB_Y_MMAP_ASYNC ||
	       sync == MB_Y_MMAP_SYNC;
}

static int mb_needs_precreate(const struct mb_config *c)
{
	if (c->is_blockdev)
		return 0;
	if (c->old)
		return c->access == MB_A_RANDWRITE || c->access == MB_A_READ ||
		       c->access == MB_A_RANDREAD;
	return c->access != MB_A_APPEND;
}

static int mb_needs_unlink(const struct mb_config *c)
{
	if (c->is_blockdev)
		return 0;
	return c->old ? c->access == MB_A_WRITE : c->access == MB_A_APPEND;
}

static void mb_write_error(struct mb_worker *w, int err, long long pos_kb)
{
	printf("\nFile write error!!! [no: %d, pos: %lld]\n", err, pos_kb);
	mb_fail(w->run, "File write error", "write error at %lld KB: %s",
		pos_kb, strerror(err));
}

/* Grow the file to cfg->bytes with 0xFE data; a larger file stays as is. */
static int mb_precreate(struct mb_worker *w, const char *file, char *buf)
{
	const struct mb_config *c = w->run->cfg;
	long long size = 0, left, done = 0, todo;
	struct stat st;
	int fd, last = -1;
	ssize_t ret;
	size_t n;

	if (stat(file, &st) == 0)
		size = st.st_size;
	if (size >= c->bytes)
		return 0;
	fd = open(file, O_RDWR | O_CREAT, 0766);
	if (fd < 0) {
		printf("%s Open failed %d\n", file, errno);
		mb_fail(w->run, "Open failed", "cannot create %s: %s", file,
			strerror(errno));
		return -1;
	}
	if (lseek(fd, 0, SEEK_END) < 0)
		goto werr;
	todo = left = c->bytes - size;
	while (left > 0) {
		mb_progress(w, done, todo, &last);
		n = left > MB_FILL_CHUNK ? MB_FILL_CHUNK : (size_t)left;
		ret = write(fd, buf, n);
		if (ret != (ssize_t)n) {
			if (ret >= 0)
				errno = ENOSPC;
			goto werr;
		}
		left -= (long long)n;
		done += (long long)n;
	}
	mb_progress(w, done, todo, &last);
	if (fsync(fd))
		goto werr;
	close(fd);
	return 0;
werr:
	mb_write_error(w, errno, (size + done) / 1024);
	close(fd);
	return -1;
}

void *mb_file_worker(void *arg)
{
	struct mb_worker *w = arg;
	const struct mb_config *c = w->run->cfg;
	int is_write = mb_is_write(c->access);
	int random = c->access == MB_A_RANDWRITE ||
		     c->access == MB_A_RANDREAD;
	int use_mmap = mb_is_mmap(c->sync);
	long long n = c->nrec, i, off;
	size_t reclen = (size_t)c->reclen;
	int64_t *perm = NULL;
	char *buf = NULL, *map = NULL, *file;
	int fd = -1, flags, last = -1, err;
	uint64_t t0;
	ssize_t ret;
	void *mem;

	w->tid = (pid_t)syscall(SYS_gettid);
	if (c->is_blockdev)
		file = mb_strdupf("%s", c->path);
	else
		file = mb_strdupf("%s/test.dat%d", c->path, w->id);

	w->lat_ns = malloc(sizeof(uint64_t) * (size_t)n);
	perm = malloc(sizeof(*perm) * (size_t)n);
	if (posix_memalign(&mem, 4096, reclen > MB_FILL_CHUNK ?
			   reclen : MB_FILL_CHUNK) == 0)
		buf = mem;
	if (!w->lat_ns || !perm || !buf ||
	    mb_order_fill(perm, n, c->overlap_pct)) {
		mb_fail(w->run, "Memory alloc failed",
			"out of memory for %lld records", n);
		goto setup_failed;
	}
	memset(buf, 0xfe, reclen > MB_FILL_CHUNK ? reclen : MB_FILL_CHUNK);

	if (mb_needs_unlink(c))
		unlink(file);
	if (mb_needs_precreate(c) && mb_precreate(w, file, buf))
		goto setup_failed;

	flags = O_RDWR | O_CREAT;
	if (!c->is_blockdev) {
		if (c->sync == MB_Y_OSYNC)
			flags |= O_SYNC;
		else if (c->sync == MB_Y_DIRECT)
			flags |= O_DIRECT;
		else if (c->sync == MB_Y_SYNC_DIRECT)
			flags |= O_SYNC | O_DIRECT;
	}
	fd = open(file, flags, 0766);
	if (fd < 0) {
		printf("%s Open failed %d\n", file, errno);
		mb_fail(w->run, "Open failed", "cannot open %s: %s", file,
			strerror(errno));
		goto setup_failed;
	}
	if (c->is_blockdev) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end < c->bytes) {
			mb_fail(w->run, "Device too small",
				"%s holds %lld bytes, the workload needs %lld",
				file, (long long)end, c->bytes);
			goto setup_failed;
		}
		lseek(fd, 0, SEEK_SET);
	}
	if (use_mmap) {
		if (lseek(fd, c->bytes - (long long)reclen, SEEK_SET) < 0 ||
		    write(fd, buf, reclen) != (ssize_t)reclen) {
			mb_write_error(w, errno ? errno : ENOSPC,
				       (c->bytes - (long long)reclen) / 1024);
			goto setup_failed;
		}
		lseek(fd, 0, SEEK_SET);
		map = mmap(NULL, (size_t)c->bytes, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			map = NULL;
			mb_fail(w->run, "mmap failed", "mmap of %s: %s", file,
				strerror(errno));
			goto setup_failed;
		}
	}

	if (mb_ready_and_wait(w->run))
		goto out;

	/* ---- timed window ---- */
	mb_sched_sample(w, 0);
	i = 0;
	if (use_mmap)
		i = mb_mmap_loop(w, map, buf, perm, is_write, random) ? -1 : n;
	for (; i >= 0 && i < n; i++) {
		off = (random ? perm[i] : i) * (long long)reclen;
		if (random && lseek(fd, off, SEEK_SET) < 0) {
			mb_fail(w->run, "File seek error", "lseek to %lld: %s",
				off, strerror(errno));
			break;
		}
		t0 = mb_now_ns();
		if (is_write) {
			ret = write(fd, buf, reclen);
			if (ret != (ssize_t)reclen) {
				mb_write_error(w, ret < 0 ? errno : ENOSPC,
					       off / 1024);
				break;
			}
			if ((c->sync == MB_Y_FSYNC && fsync(fd)) ||
			    (c->sync == MB_Y_FDATASYNC && fdatasync(fd))) {
				err = errno;
				mb_fail(w->run, "File sync error",
					"%s at %lld KB: %s",
					c->sync == MB_Y_FSYNC ? "fsync" :
					"fdatasync", off / 1024, strerror(err));
				break;
			}
		} else {
			ret = read(fd, buf, reclen);
			if (ret <= 0) {
				mb_fail(w->run, "File read error",
					"read at %lld KB: %s", off / 1024,
					ret < 0 ? strerror(errno) :
					"end of file");
				break;
			}
		}
		w->lat_ns[i] = mb_now_ns() - t0;
		w->n_lat++;
		mb_progress(w, i, n, &last);
	}
	if (is_write && i == n) {
		if (use_mmap ? msync(map, (size_t)c->bytes, MS_SYNC) :
		    fsync(fd)) {
			err = errno;
			mb_fail(w->run, "File sync error", "final %s: %s",
				use_mmap ? "msync" : "fsync", strerror(err));
		}
	}
	mb_sched_sample(w, 1);
	last = -1;
	mb_progress(w, 100, 100, &last);
	mb_signal_end(w->run);
	/* ---- end of timed window ---- */
	goto out;

setup_failed:
	mb_ready_and_wait(w->run);
out:
	if (map)
		munmap(map, (size_t)c->bytes);
	if (fd >= 0)
		close(fd);
	free(perm);
	free(buf);
	free(file);
	return NULL;
}
