/*
 * app_standin: an Android app's process, as zygote makes it, for the Android-shaped test device.
 *
 * Purpose: `mobiperf record --app PACKAGE` must find an app's processes by the package's uid (they are forked by
 * zygote, not by the shell that asked for them) and name its threads and files. This program is what the device's
 * zygote stand-in (app_standin.py) forks when `monkey -p PACKAGE` asks: it drops to the app's uid, names its
 * process as zygote does (comm: the package's first 15 bytes; the command line: the package), and does known IO
 * from named threads, then exits:
 *   main thread    reads files/asset.bin (256 KiB, written first and dropped from the page cache: real reads)
 *   SQLiteThread   16 times: writes 4 KiB to databases/notes.db-journal, then 4 KiB to databases/notes.db, and
 *                  fdatasyncs both (SQLite's rollback journal on Android: TRUNCATE mode syncs)
 *   RenderThread   reads files/texture.bin (64 KiB, likewise dropped from the cache first)
 * then stays 3 s, or SECONDS_ALIVE_AFTER (an app stays while it is used), and exits.
 * Usage: app_standin PACKAGE UID DATADIR [SECONDS_ALIVE_AFTER]   (as root; DATADIR owned by UID)
 * Exit status: 0, or 1 with a message on stderr when a step fails.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB 1024
#define SYNCS 16

static char as_dir[4096];

static void as_die(const char *what)
{
	perror(what);
	exit(1);
}

static void as_write_file(const char *name, size_t size, int sync_each)
{
	char path[4200], block[4 * KIB];
	size_t done;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", as_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		as_die(path);
	memset(block, 'a', sizeof(block));
	for (done = 0; done < size; done += sizeof(block)) {
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			as_die(path);
		if (sync_each && fdatasync(fd))
			as_die(path);
	}
	if (fdatasync(fd))
		as_die(path);
	/* written and synced: drop it from the page cache, so reading it goes to the device */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

static void as_read_file(const char *name)
{
	char path[4200], buf[64 * KIB];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", as_dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		as_die(path);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void *as_sqlite(void *arg)
{
	char page[4 * KIB], path[4200];
	int db, journal, i;

	(void)arg;
	pthread_setname_np(pthread_self(), "SQLiteThread");
	memset(page, 'd', sizeof(page));
	snprintf(path, sizeof(path), "%s/databases/notes.db", as_dir);
	db = open(path, O_WRONLY | O_CREAT, 0600);
	snprintf(path, sizeof(path), "%s/databases/notes.db-journal", as_dir);
	journal = open(path, O_WRONLY | O_CREAT, 0600);
	if (db < 0 || journal < 0)
		as_die("databases");
	for (i = 0; i < SYNCS; i++) {
		if (pwrite(journal, page, sizeof(page), 0) != (ssize_t)sizeof(page) || fdatasync(journal))
			as_die("notes.db-journal");
		if (pwrite(db, page, sizeof(page), (off_t)i * sizeof(page)) != (ssize_t)sizeof(page) || fdatasync(db))
			as_die("notes.db");
	}
	close(db);
	close(journal);
	return NULL;
}

static void *as_render(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "RenderThread");
	as_read_file("files/texture.bin");
	return NULL;
}

int main(int argc, char **argv)
{
	char comm[16], sub[4200];
	pthread_t sqlite, render;
	size_t room, len;
	uid_t uid;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: app_standin PACKAGE UID DATADIR [SECONDS_ALIVE_AFTER]\n");
		return 1;
	}
	uid = (uid_t)strtoul(argv[2], NULL, 10);
	snprintf(as_dir, sizeof(as_dir), "%s", argv[3]);
	if (setgid(uid) || setuid(uid))
		as_die("setuid");
	/* zygote's naming: the command line is the package (argv[0] overwritten in place: the zygote stand-in execs
	 * this program with a long argv[0] to make room), comm its first 15 bytes */
	snprintf(comm, sizeof(comm), "%s", argv[1]);
	prctl(PR_SET_NAME, comm);
	room = strlen(argv[0]);
	len = strlen(argv[1]) < room ? strlen(argv[1]) : room;
	memset(argv[0], 0, room);
	memcpy(argv[0], argv[1], len);
	snprintf(sub, sizeof(sub), "%s/databases", as_dir);
	mkdir(sub, 0700);
	snprintf(sub, sizeof(sub), "%s/files", as_dir);
	mkdir(sub, 0700);
	as_write_file("files/asset.bin", 256 * KIB, 0);
	as_write_file("files/texture.bin", 64 * KIB, 0);
	if (pthread_create(&sqlite, NULL, as_sqlite, NULL) || pthread_create(&render, NULL, as_render, NULL))
		as_die("pthread_create");
	as_read_file("files/asset.bin");
	pthread_join(sqlite, NULL);
	pthread_join(render, NULL);
	sleep(argc == 5 ? (unsigned)strtoul(argv[4], NULL, 10) : 3);
	return 0;
}
