/*
 * fj_file: the per-file state Fjord keeps for a native file it buffers or
 * logs. The RAM buffer (fj_buf) and the log (fj_log) both work on it, so it
 * lives in a header of its own.
 *
 * Lifetime: reference counted (fj_file_get/fj_file_put, atomic). The daemon's
 * file table, the buffer's dirty list and the log's live list each hold one
 * reference while the file is on them. The last put closes the fd.
 */
#ifndef FJ_FILE_H
#define FJ_FILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FJ_HANDLE_MAX 128

/* One buffered run of bytes: data covers [off, off + len). */
struct fj_extent {
	uint64_t off;
	size_t len;
	unsigned char *data;
};

struct fj_file {
	/* Immutable after fj_file_new(). */
	uint64_t id;		/* log file id, unique within a daemon run */
	int fd;			/* own O_RDWR descriptor on the native file */
	bool critical;		/* false: whitelisted, fsync may be relaxed */
	char *path;		/* relative to SOURCE (log FILE record) */
	int handle_type;	/* name_to_handle_at() result, len 0: none */
	unsigned int handle_len;
	unsigned char handle[FJ_HANDLE_MAX];

	int refs;		/* atomic */

	/*
	 * The file lock. Protects ext/n_ext/cap_ext, buffered, dirty_since_ns,
	 * needs_datasync, meta_dirty, log_seq and log_failed. Taken before the buffer's
	 * global lock and before the log's lock, never after them.
	 */
	pthread_mutex_t lock;
	struct fj_extent *ext;	/* sorted by off, disjoint, never adjacent */
	size_t n_ext, cap_ext;
	uint64_t buffered;	/* sum of ext[].len */
	uint64_t dirty_since_ns; /* arrival of the oldest buffered byte */
	bool needs_datasync;	/* pwritten outside the log, not yet synced */
	bool meta_dirty;	/* metadata the log cannot restore changed */
	uint64_t log_seq;	/* newest log record of this file, 0: none */
	int log_failed;		/* errno of a failed log write, sticky */

	/* Protected by the log's lock (struct fj_log.lock). */
	uint64_t log_epoch;	/* epoch of this file's last FILE record */
	bool log_listed;	/* on the log's live list (holds a ref) */
	struct fj_file *log_next;

	/* Protected by the buffer's global lock (struct fj_buf.lock). */
	bool buf_listed;	/* on the buffer's dirty list (holds a ref) */
	struct fj_file *buf_next, *buf_prev;
};

/*
 * Wraps fd (ownership passes to the file; closed at the last put). path is
 * copied. Fills the file handle with name_to_handle_at() when possible.
 * Returns NULL on allocation failure (fd is then closed).
 */
struct fj_file *fj_file_new(int fd, const char *path, bool critical);
struct fj_file *fj_file_get(struct fj_file *f);
void fj_file_put(struct fj_file *f);

#endif
