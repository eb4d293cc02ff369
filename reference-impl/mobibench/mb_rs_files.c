/*
 * mb_rs_files.c - the replay's root and the state the recorded workload
 * started from, made before the timed part.
 *
 * The root is PATH itself when it holds nothing (but lost+found: a fresh
 * file system's root, where the recording ran: the replay's files then get
 * the same block groups and metadata reads as the recording's), else
 * PATH/mobiperf_replay (PATH/NAME with --replay-dir=NAME, whatever PATH
 * holds), made here and refused if it exists (a replay starts
 * from the state the script describes, nothing else, and touches nothing
 * it did not make). Every
 * later path is opened relative to it (openat and friends) and was checked
 * when the script was read (mb_rs_path_ok). Before anything is made the free
 * space of PATH is checked against the script's `need`; then the directories
 * and files that existed before the recording are made, the files written
 * in full (not sparse: a read must reach the device as it did), synced, and
 * the file system synced, so that none of it is in the timed part.
 * Markers: "replay_begin" before the root is made (from there on the IO is
 * the replay's: a fresh file system's first file costs metadata reads, as
 * the recording's first file did), "precreate_start" and "precreate_end"
 * around the files that existed (not the recording's IO).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mb_rs.h"

#define MB_RS_CHUNK (1 << 20)

static int mb_rs_mkdirs(int rootfd, const char *path)
{
	char *copy = strdup(path), *p;

	if (!copy)
		return -1;
	for (p = strchr(copy, '/'); p; p = strchr(p + 1, '/')) {
		*p = 0;
		if (mkdirat(rootfd, copy, 0777) && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdirat(rootfd, copy, 0777) && errno != EEXIST)
		goto fail;
	free(copy);
	return 0;
fail:
	free(copy);
	return -1;
}

static int mb_rs_parent(int rootfd, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int rc;

	if (!slash)
		return 0;
	parent = strndup(path, (size_t)(slash - path));
	if (!parent)
		return -1;
	rc = mb_rs_mkdirs(rootfd, parent);
	free(parent);
	return rc;
}

static int mb_rs_write_file(int rootfd, const char *path, int64_t size,
			    const char *chunk)
{
	int64_t left;
	ssize_t n;
	int fd;

	if (mb_rs_parent(rootfd, path))
		return -1;
	fd = openat(rootfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0666);
	if (fd < 0)
		return -1;
	for (left = size; left > 0; left -= n) {
		n = write(fd, chunk, left > MB_RS_CHUNK ? MB_RS_CHUNK :
			  (size_t)left);
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			close(fd);
			return -1;
		}
	}
	if (fsync(fd)) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int mb_rs_space(struct mb_rs *rs)
{
	struct statvfs sv;
	unsigned long long avail;

	if (statvfs(rs->cfg->path, &sv))
		return 0;	/* cannot tell: the writes will say */
	avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	if ((unsigned long long)rs->need_bytes <= avail)
		return 0;
	fprintf(stderr, "mobibench: this replay writes up to %lld bytes "
		"(%.1f MiB) but %s has %llu bytes (%.1f MiB) free; nothing "
		"was replayed\n", (long long)rs->need_bytes,
		rs->need_bytes / 1048576.0, rs->cfg->path, avail,
		avail / 1048576.0);
	return -1;
}

/* whether dir holds nothing but lost+found */
static int mb_rs_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int empty = 1;

	if (!d)
		return 0;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			!strcmp(e->d_name, "lost+found");
	closedir(d);
	return empty;
}

static int mb_rs_open_root(struct mb_rs *rs)
{
	char *root;

	if (!rs->cfg->replay_dir && mb_rs_empty(rs->cfg->path)) {
		rs->rootfd = open(rs->cfg->path, O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC);
		if (rs->rootfd < 0)
			fprintf(stderr, "mobibench: %s: %s\n", rs->cfg->path,
				strerror(errno));
		printf("Write target : %s\n", rs->cfg->path);
		return rs->rootfd < 0 ? -1 : 0;
	}
	root = mb_strdupf("%s/%s", rs->cfg->path, rs->cfg->replay_dir ?
			  rs->cfg->replay_dir : MB_RS_ROOT);
	if (!root)
		return -1;
	if (mkdir(root, 0777)) {
		fprintf(stderr, "mobibench: cannot create %s: %s%s\n", root,
			strerror(errno), errno == EEXIST ? " (a replay "
			"starts from an empty directory: remove it)" : "");
		free(root);
		return -1;
	}
	rs->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rs->rootfd < 0)
		fprintf(stderr, "mobibench: %s: %s\n", root, strerror(errno));
	printf("Write target : %s\n", root);
	free(root);
	return rs->rootfd < 0 ? -1 : 0;
}

int mb_rs_prepare(struct mb_rs *rs)
{
	char *chunk;
	const char *path = NULL;
	size_t i;

	if (mb_rs_space(rs))	/* before anything is made */
		return -1;
	mb_marker_write(rs->marker, "replay_begin");
	if (mb_rs_open_root(rs))
		return -1;
	mb_marker_write(rs->marker, "precreate_start");
	for (i = 0; i < rs->ndirs; i++) {
		path = rs->pool + rs->dirs[i];
		if (mb_rs_mkdirs(rs->rootfd, path))
			goto fail;
	}
	chunk = malloc(MB_RS_CHUNK);
	if (!chunk)
		return -1;
	memset(chunk, 0xfe, MB_RS_CHUNK);
	for (i = 0; i < rs->nfiles; i++) {
		path = rs->pool + rs->files[i].path;
		if (mb_rs_write_file(rs->rootfd, path, rs->files[i].size,
				     chunk)) {
			free(chunk);
			goto fail;
		}
	}
	free(chunk);
	/* the directories' entries and every file's metadata */
	syscall(SYS_syncfs, rs->rootfd);
	mb_marker_write(rs->marker, "precreate_end");
	printf("pre-created : %zu directories, %zu files\n", rs->ndirs,
	       rs->nfiles);
	return 0;
fail:
	fprintf(stderr, "mobibench: cannot pre-create %s (under the replay's "
		"root in %s): %s\n", path, rs->cfg->path, strerror(errno));
	return -1;
}
