/*
 * mb_replay.c - mobibench -g: replay a MobiGen system-call trace.
 *
 * Script lines are "<thread> <time_us> <cmd> <args...>" with cmd one of
 *   open "path" flags orig_fd | close fd | write fd size |
 *   pwrite fd off size | read fd size | pread fd off size | fsync fd |
 *   fdatasync fd | fstat fd | access "path" | stat "path" | lstat "path" |
 *   unlink "path"
 * Lines starting with '#' and blank lines are skipped.  Every file of the
 * trace is redirected to PATH/mobigen_temp/temp_<thread>_<n>.dat, n counting
 * the distinct paths that script thread names.  An open whose flags are
 * O_RDONLY (by name, or a number with access mode 0) opens read-only; all
 * others open O_RDWR|O_CREAT|O_TRUNC, mode 0777.  Files that are first
 * opened read-only are pre-created (untimed) with 0xFE data as long as the
 * trace reads from them.
 *
 * One pthread per script thread; all start together, and each call is
 * issued at its time stamp relative to the first one (clock_nanosleep) and
 * timed.  The totals printed at the end follow Mobibench's replay output.
 * Unlike the original, any failing call or unreadable line makes the run
 * exit non-zero.
 *
 * A script whose first line is "mobiperf-replay 1" is mobiperf's richer
 * format instead (mb_rs.h: files that existed, open flags, dependencies
 * between threads, open or closed loop), replayed by mb_rs_run.c.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mb.h"
#include "mb_rs.h"

enum mb_rp_cmd {
	MB_RP_OPEN, MB_RP_CLOSE, MB_RP_WRITE, MB_RP_PWRITE, MB_RP_READ,
	MB_RP_PREAD, MB_RP_FSYNC, MB_RP_FDATASYNC, MB_RP_FSTAT, MB_RP_ACCESS,
	MB_RP_STAT, MB_RP_LSTAT, MB_RP_UNLINK,
};

static const char *const mb_rp_names[] = {
	"open", "close", "write", "pwrite", "read", "pread", "fsync",
	"fdatasync", "fstat", "access", "stat", "lstat", "unlink",
};

struct mb_rp_op {
	int thread;		/* index into the thread table */
	long long time_us;
	int cmd;
	int orig_fd;
	int rdonly;
	long long off, size;
	int file;		/* index into the file table */
};

struct mb_rp_file {
	int thread_id;		/* script thread number */
	char *orig;
	char *temp;
	int first_rdonly;
	long long read_extent;
};

struct mb_rp_fdmap {
	int orig, fd, file;
};

struct mb_rp {
	const struct mb_config *cfg;
	char *dir;
	struct mb_rp_op *ops;
	int nops, cap;
	struct mb_rp_file *files;
	int nfiles;
	int *thread_ids;	/* script thread numbers, as they appear */
	int nthreads;
	uint64_t start_ns;
	long long t_first;

	/* lock protects fdmap, nfd and the totals below */
	pthread_mutex_t lock;
	struct mb_rp_fdmap *fdmap;
	int nfd, fdcap;
	long long io_ns, io_count, wbytes, rbytes;
	int errors;
};

struct mb_rp_thread {
	struct mb_rp *rp;
	int index;
	pthread_t th;
};

static int mb_rp_thread_index(struct mb_rp *rp, int id)
{
	int i;

	for (i = 0; i < rp->nthreads; i++)
		if (rp->thread_ids[i] == id)
			return i;
	rp->thread_ids = realloc(rp->thread_ids,
				 sizeof(int) * (size_t)(rp->nthreads + 1));
	if (!rp->thread_ids)
		return -1;
	rp->thread_ids[rp->nthreads] = id;
	return rp->nthreads++;
}

static int mb_rp_file_index(struct mb_rp *rp, int thread_id, const char *orig)
{
	int i, n = 0;

	for (i = 0; i < rp->nfiles; i++) {
		if (rp->files[i].thread_id != thread_id)
			continue;
		if (!strcmp(rp->files[i].orig, orig))
			return i;
		n++;
	}
	rp->files = realloc(rp->files, sizeof(*rp->files) *
			    (size_t)(rp->nfiles + 1));
	if (!rp->files)
		return -1;
	memset(&rp->files[rp->nfiles], 0, sizeof(*rp->files));
	rp->files[rp->nfiles].thread_id = thread_id;
	rp->files[rp->nfiles].orig = strdup(orig);
	rp->files[rp->nfiles].first_rdonly = -1;
	rp->files[rp->nfiles].temp = mb_strdupf("%s/temp_%d_%d.dat", rp->dir,
						thread_id, n);
	return rp->nfiles++;
}

/* read a "quoted path" (or a bare word) from *s */
static int mb_rp_path(char **s, char *out, size_t outlen)
{
	char *p = *s, *e;
	size_t n;

	while (isspace((unsigned char)*p))
		p++;
	if (*p == '"') {
		e = strchr(p + 1, '"');
		if (!e)
			return -1;
		p++;
	} else {
		e = p;
		while (*e && !isspace((unsigned char)*e))
			e++;
	}
	n = (size_t)(e - p);
	if (n == 0 || n >= outlen)
		return -1;
	memcpy(out, p, n);
	out[n] = 0;
	*s = *e == '"' ? e + 1 : e;
	return 0;
}

static int mb_rp_flags_rdonly(const char *flags)
{
	char *end;
	long v = strtol(flags, &end, 0);

	if (end != flags && *end == 0)
		return (v & O_ACCMODE) == O_RDONLY;
	return strstr(flags, "O_RDONLY") != NULL;
}

/* Parse the script; returns 0 or -1 with a message on stderr. */
static int mb_rp_parse(struct mb_rp *rp, const char *script, int *lines)
{
	FILE *f = fopen(script, "r");
	char line[4096], path[4096], cmd[32], flags[256];
	int lineno = 0, thread_id, fdlast[4096], i, n;
	struct mb_rp_op op;
	char *p;

	if (!f) {
		fprintf(stderr, "mobibench: -g %s: %s\n", script,
			strerror(errno));
		return -1;
	}
	for (i = 0; i < 4096; i++)
		fdlast[i] = -1;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		memset(&op, 0, sizeof(op));
		op.file = -1;
		if (sscanf(p, "%d %lld %31s%n", &thread_id, &op.time_us, cmd,
			   &n) != 3)
			goto bad;
		p += n;
		for (op.cmd = 0; op.cmd <= MB_RP_UNLINK; op.cmd++)
			if (!strcmp(cmd, mb_rp_names[op.cmd]))
				break;
		if (op.cmd > MB_RP_UNLINK)
			goto bad;
		op.thread = mb_rp_thread_index(rp, thread_id);
		if (op.thread < 0)
			goto oom;
		switch (op.cmd) {
		case MB_RP_OPEN:
			if (mb_rp_path(&p, path, sizeof(path)) ||
			    sscanf(p, "%255s %d", flags, &op.orig_fd) != 2 ||
			    op.orig_fd < 0 || op.orig_fd >= 4096)
				goto bad;
			op.rdonly = mb_rp_flags_rdonly(flags);
			op.file = mb_rp_file_index(rp, thread_id, path);
			if (op.file < 0)
				goto oom;
			if (rp->files[op.file].first_rdonly < 0)
				rp->files[op.file].first_rdonly = op.rdonly;
			fdlast[op.orig_fd] = op.file;
			break;
		case MB_RP_ACCESS:
		case MB_RP_STAT:
		case MB_RP_LSTAT:
		case MB_RP_UNLINK:
			if (mb_rp_path(&p, path, sizeof(path)))
				goto bad;
			op.file = mb_rp_file_index(rp, thread_id, path);
			if (op.file < 0)
				goto oom;
			break;
		case MB_RP_WRITE:
		case MB_RP_READ:
			if (sscanf(p, "%d %lld", &op.orig_fd, &op.size) != 2 ||
			    op.size < 0)
				goto bad;
			break;
		case MB_RP_PWRITE:
		case MB_RP_PREAD:
			if (sscanf(p, "%d %lld %lld", &op.orig_fd, &op.off,
				   &op.size) != 3 || op.size < 0 || op.off < 0)
				goto bad;
			break;
		default:
			if (sscanf(p, "%d", &op.orig_fd) != 1)
				goto bad;
		}
		if (op.orig_fd < 0 || op.orig_fd >= 4096)
			goto bad;
		if ((op.cmd == MB_RP_READ || op.cmd == MB_RP_PREAD) &&
		    fdlast[op.orig_fd] >= 0) {
			struct mb_rp_file *fl = &rp->files[fdlast[op.orig_fd]];
			long long ext = op.off + op.size;

			/* sequential reads: assume they continue the file */
			if (op.cmd == MB_RP_READ)
				ext = fl->read_extent + op.size;
			if (ext > fl->read_extent)
				fl->read_extent = ext;
		}
		if (rp->nops == rp->cap) {
			rp->cap = rp->cap ? rp->cap * 2 : 1024;
			rp->ops = realloc(rp->ops,
					  sizeof(op) * (size_t)rp->cap);
			if (!rp->ops)
				goto oom;
		}
		rp->ops[rp->nops++] = op;
	}
	fclose(f);
	*lines = lineno;
	return 0;
bad:
	fprintf(stderr, "mobibench: %s:%d: not a MobiGen line: %s", script,
		lineno, line);
	fclose(f);
	return -1;
oom:
	fprintf(stderr, "mobibench: out of memory\n");
	fclose(f);
	return -1;
}

static int mb_rp_fd_lookup(struct mb_rp *rp, int orig)
{
	int i, fd = -1;

	pthread_mutex_lock(&rp->lock);
	for (i = rp->nfd - 1; i >= 0; i--)
		if (rp->fdmap[i].orig == orig) {
			fd = rp->fdmap[i].fd;
			break;
		}
	pthread_mutex_unlock(&rp->lock);
	return fd;
}

static void mb_rp_fd_set(struct mb_rp *rp, int orig, int fd)
{
	int i;

	pthread_mutex_lock(&rp->lock);
	for (i = 0; i < rp->nfd; i++)
		if (rp->fdmap[i].orig == orig)
			break;
	if (i == rp->nfd) {
		if (rp->nfd == rp->fdcap) {
			rp->fdcap = rp->fdcap ? rp->fdcap * 2 : 64;
			rp->fdmap = realloc(rp->fdmap, sizeof(*rp->fdmap) *
					    (size_t)rp->fdcap);
		}
		if (!rp->fdmap) {
			rp->errors++;
			pthread_mutex_unlock(&rp->lock);
			return;
		}
		rp->nfd++;
	}
	rp->fdmap[i].orig = orig;
	rp->fdmap[i].fd = fd;
	pthread_mutex_unlock(&rp->lock);
}

static void *mb_rp_worker(void *arg)
{
	struct mb_rp_thread *t = arg;
	struct mb_rp *rp = t->rp;
	struct timespec at;
	struct stat st;
	uint64_t when, t0, t1;
	long long ret;
	int i, fd;

	for (i = 0; i < rp->nops; i++) {
		struct mb_rp_op *op = &rp->ops[i];
		const char *temp = op->file >= 0 ? rp->files[op->file].temp :
				   NULL;
		char *b = NULL;

		t0 = t1 = 0;

		if (op->thread != t->index)
			continue;
		when = rp->start_ns +
		       (uint64_t)(op->time_us - rp->t_first) * 1000ULL;
		at.tv_sec = (time_t)(when / 1000000000ULL);
		at.tv_nsec = (long)(when % 1000000000ULL);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at,
				       NULL) == EINTR)
			;
		fd = op->cmd == MB_RP_OPEN ? -1 : mb_rp_fd_lookup(rp, op->orig_fd);
		if (op->cmd == MB_RP_READ || op->cmd == MB_RP_PREAD ||
		    op->cmd == MB_RP_WRITE || op->cmd == MB_RP_PWRITE) {
			b = malloc((size_t)(op->size ? op->size : 1));
			if (!b) {
				ret = -1;
				goto done;
			}
			memset(b, 0xfe, (size_t)op->size);
		}
		t0 = mb_now_ns();
		switch (op->cmd) {
		case MB_RP_OPEN:
			ret = open(temp, op->rdonly ? O_RDONLY :
				   O_RDWR | O_CREAT | O_TRUNC, 0777);
			if (ret >= 0)
				mb_rp_fd_set(rp, op->orig_fd, (int)ret);
			break;
		case MB_RP_CLOSE:
			ret = close(fd);
			break;
		case MB_RP_WRITE:
			ret = write(fd, b, (size_t)op->size);
			break;
		case MB_RP_PWRITE:
			ret = pwrite(fd, b, (size_t)op->size, op->off);
			break;
		case MB_RP_READ:
			ret = read(fd, b, (size_t)op->size);
			break;
		case MB_RP_PREAD:
			ret = pread(fd, b, (size_t)op->size, op->off);
			break;
		case MB_RP_FSYNC:
			ret = fsync(fd);
			break;
		case MB_RP_FDATASYNC:
			ret = fdatasync(fd);
			break;
		case MB_RP_FSTAT:
			ret = fstat(fd, &st);
			break;
		case MB_RP_ACCESS:
			ret = access(temp, F_OK);
			break;
		case MB_RP_STAT:
			ret = stat(temp, &st);
			break;
		case MB_RP_LSTAT:
			ret = lstat(temp, &st);
			break;
		default:
			ret = unlink(temp);
			break;
		}
		t1 = mb_now_ns();
done:
		free(b);
		pthread_mutex_lock(&rp->lock);
		rp->io_ns += (long long)(t1 - t0);
		rp->io_count++;
		if (ret < 0 && op->cmd != MB_RP_ACCESS &&
		    op->cmd != MB_RP_STAT && op->cmd != MB_RP_LSTAT &&
		    op->cmd != MB_RP_UNLINK) {
			rp->errors++;
			fprintf(stderr, "mobibench: replay %s (thread %d, "
				"%lld us) failed: %s\n", mb_rp_names[op->cmd],
				rp->thread_ids[t->index], op->time_us,
				strerror(errno));
		} else if (ret > 0 && (op->cmd == MB_RP_WRITE ||
				       op->cmd == MB_RP_PWRITE)) {
			rp->wbytes += ret;
		} else if (ret > 0 && (op->cmd == MB_RP_READ ||
				       op->cmd == MB_RP_PREAD)) {
			rp->rbytes += ret;
		}
		pthread_mutex_unlock(&rp->lock);
	}
	return NULL;
}

static int mb_rp_precreate(struct mb_rp *rp)
{
	static char chunk[65536];
	long long left;
	int i, fd;
	ssize_t n;

	memset(chunk, 0xfe, sizeof(chunk));
	for (i = 0; i < rp->nfiles; i++) {
		struct mb_rp_file *fl = &rp->files[i];

		if (fl->first_rdonly != 1)
			continue;
		fd = open(fl->temp, O_WRONLY | O_CREAT | O_TRUNC, 0777);
		if (fd < 0)
			goto err;
		for (left = fl->read_extent; left > 0; left -= n) {
			n = write(fd, chunk, left > (long long)sizeof(chunk) ?
				  sizeof(chunk) : (size_t)left);
			if (n <= 0) {
				close(fd);
				goto err;
			}
		}
		if (fsync(fd) || close(fd))
			goto err;
		continue;
err:
		fprintf(stderr, "mobibench: cannot pre-create %s: %s\n",
			fl->temp, strerror(errno));
		return -1;
	}
	return 0;
}

/* whether the script starts with mobiperf's header line */
static int mb_rp_is_mobiperf(const char *script)
{
	char line[sizeof(MB_RS_MAGIC) + 1];
	FILE *f = fopen(script, "r");
	int yes;

	if (!f)
		return 0;	/* mb_rp_parse says why */
	yes = fgets(line, sizeof(line), f) &&
	      !strncmp(line, MB_RS_MAGIC, sizeof(MB_RS_MAGIC) - 1) &&
	      (line[sizeof(MB_RS_MAGIC) - 1] == '\n' ||
	       line[sizeof(MB_RS_MAGIC) - 1] == 0);
	fclose(f);
	return yes;
}

int mb_replay(const struct mb_config *cfg)
{
	struct mb_rp rp;
	struct mb_rp_thread *th = NULL;
	long long wmax = 0, rmax = 0, t_last = 0;
	int i, lines = 0, opens = 0, marker, rc = 1, started = 0;
	DIR *d;

	memset(&rp, 0, sizeof(rp));
	pthread_mutex_init(&rp.lock, NULL);
	rp.cfg = cfg;
	d = opendir(cfg->path);
	if (d && mb_rp_is_mobiperf(cfg->replay)) {
		closedir(d);
		return mb_rs_replay(cfg, cfg->replay) ? 1 : 0;
	}
	if (!d) {
		fprintf(stderr, "mobibench: -g needs an existing -p directory: "
			"%s: %s\n", cfg->path, strerror(errno));
		return 1;
	}
	closedir(d);
	rp.dir = mb_strdupf("%s/mobigen_temp", cfg->path);
	if (mkdir(rp.dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "mobibench: cannot create %s: %s\n", rp.dir,
			strerror(errno));
		goto out;
	}
	printf("replay_script start\n");
	printf("Write target : %s\n", rp.dir);
	if (mb_rp_parse(&rp, cfg->replay, &lines))
		goto out;
	if (rp.nops == 0) {
		fprintf(stderr, "mobibench: -g %s: no calls to replay\n",
			cfg->replay);
		goto out;
	}
	rp.t_first = rp.ops[0].time_us;
	for (i = 0; i < rp.nops; i++) {
		struct mb_rp_op *op = &rp.ops[i];

		if (op->time_us < rp.t_first)
			rp.t_first = op->time_us;
		if (op->time_us > t_last)
			t_last = op->time_us;
		if (op->cmd == MB_RP_OPEN)
			opens++;
		if ((op->cmd == MB_RP_WRITE || op->cmd == MB_RP_PWRITE) &&
		    op->off + op->size > wmax)
			wmax = op->off + op->size;
		if ((op->cmd == MB_RP_READ || op->cmd == MB_RP_PREAD) &&
		    op->off + op->size > rmax)
			rmax = op->off + op->size;
	}
	printf("line count : %d\n", lines);
	printf("script_thread_num: %d\n", rp.nthreads);
	printf("open count : %d\n", opens);
	printf("max size : W %lld, R %lld\n", wmax, rmax);
	printf("original execution time : %.3f sec\n",
	       (double)(t_last - rp.t_first) / 1e6);
	if (mb_rp_precreate(&rp))
		goto out;
	fflush(stdout);
	if (cfg->drop_caches)
		mb_drop_caches();

	th = calloc((size_t)rp.nthreads, sizeof(*th));
	if (!th)
		goto out;
	marker = mb_marker_open();
	mb_marker_write(marker, "timed_start");
	rp.start_ns = mb_now_ns() + 1000000;	/* all threads start together */
	for (i = 0; i < rp.nthreads; i++) {
		th[i].rp = &rp;
		th[i].index = i;
		if (pthread_create(&th[i].th, NULL, mb_rp_worker, &th[i])) {
			rp.errors++;
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	mb_marker_write(marker, "timed_end");
	if (marker >= 0)
		close(marker);
	printf("replay_script end\n");
	printf("Total IO time : %.3f sec (%lld usec)\n",
	       (double)rp.io_ns / 1e9, rp.io_ns / 1000);
	printf("Total IO count : %lld \n", rp.io_count);
	printf("Total Write: %lld bytes, Read: %lld bytes\n", rp.wbytes,
	       rp.rbytes);
	rc = rp.errors ? 1 : 0;
	if (rp.errors)
		printf("Err string : Replay failed (%d calls)\n", rp.errors);
out:
	for (i = 0; i < rp.nfd; i++)
		close(rp.fdmap[i].fd);
	for (i = 0; i < rp.nfiles; i++) {
		free(rp.files[i].orig);
		free(rp.files[i].temp);
	}
	free(rp.files);
	free(rp.fdmap);
	free(rp.ops);
	free(rp.thread_ids);
	free(rp.dir);
	free(th);
	fflush(stdout);
	return rc;
}
