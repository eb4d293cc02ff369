/*
 * mb_rs.h - mobibench -g with a mobiperf replay script: the calls of every
 * thread of a recorded workload, the files and directories that existed
 * before it, and the order between threads that the trace showed.
 *
 * The script (written by mobiperf's analyzers/replay/script.py) is text:
 *
 *   mobiperf-replay 1
 *   threads T
 *   handles H
 *   need BYTES                 the most the replay can occupy on the target
 *   dir PATH                   a directory that existed (parents first)
 *   file PATH SIZE             a file that existed, with its size
 *   c THREAD THINK_NS OP ARGS... [@U:K ...]
 *
 * OP and ARGS: open HANDLE FLAGS PATH | close HANDLE | read HANDLE SIZE |
 * write HANDLE SIZE | readv HANDLE SIZE | writev HANDLE SIZE |
 * pread HANDLE OFF SIZE | pwrite HANDLE OFF SIZE | preadv HANDLE OFF SIZE |
 * pwritev HANDLE OFF SIZE | lseek HANDLE POS | fsync HANDLE |
 * fdatasync HANDLE | ftruncate HANDLE LEN | fallocate HANDLE MODE OFF LEN |
 * rename PATH NEWPATH | unlink PATH | mkdir PATH | rmdir PATH |
 * dup NEWHANDLE HANDLE.
 * FLAGS are open flag names joined by ',' (rdwr,creat,trunc): numbers differ
 * between ABIs (arm's O_DIRECT is x86's O_DIRECTORY), names do not.
 * PATHs are relative to the replay's root (PATH when it is empty, else
 * PATH/mobiperf_replay), with '%XX' for a space, '%', a
 * control character or any byte above 0x7e; an absolute path, a ".."
 * component or a NUL byte is refused: nothing is written outside the root.
 * The one exception is /proc/sys/vm/drop_caches, which `open` may name: a
 * workload's cache drops decide what its reads find in the page cache; a
 * write through that handle writes "3" (then newlines to its size).
 * A handle is one open file description of the trace (dup'ed descriptors
 * share it); a thread's calls come in its order, THINK_NS is the time from
 * the thread's previous call's end (for its first call: from the replay's
 * start) to this call's start, and @U:K makes the call wait until thread U
 * has finished K calls (a call that started after another thread's fsync
 * returned waits for it).
 */
#ifndef MB_RS_H
#define MB_RS_H

#include <stddef.h>
#include <stdint.h>

#include "mb.h"

enum mb_rs_op {
	MB_RS_OPEN, MB_RS_CLOSE, MB_RS_READ, MB_RS_WRITE, MB_RS_READV,
	MB_RS_WRITEV, MB_RS_PREAD, MB_RS_PWRITE, MB_RS_PREADV, MB_RS_PWRITEV,
	MB_RS_LSEEK, MB_RS_FSYNC, MB_RS_FDATASYNC, MB_RS_FTRUNCATE,
	MB_RS_FALLOCATE, MB_RS_DUP, MB_RS_RENAME, MB_RS_UNLINK, MB_RS_MKDIR,
	MB_RS_RMDIR, MB_RS_NOPS,
};

extern const char *const mb_rs_op_names[MB_RS_NOPS];

/* One replayed call; read-only once the workers start. */
struct mb_rs_call {
	int64_t think_ns;
	int64_t off;		/* offset; lseek's position; ftruncate's length;
				   dup's source handle */
	int64_t size;		/* bytes to move; fallocate's length */
	uint32_t path, path2;	/* offsets into the path pool (rename: both) */
	uint32_t dep;		/* first of its dependencies in mb_rs.deps */
	uint32_t line;		/* script line, for messages */
	int32_t handle;
	int32_t flags;		/* open's native flags; fallocate's mode */
	uint16_t ndeps;
	uint8_t op;
};

struct mb_rs_dep {
	uint32_t thread;
	uint32_t count;		/* wait until that thread finished this many */
};

/* One script thread: its calls, then what its worker measured. */
struct mb_rs_thread {
	struct mb_rs_call *calls;
	uint32_t n, cap;
	size_t bufsize;		/* its largest read or write */

	/* written by the worker only, read by main after the join */
	int64_t io_ns, wbytes, rbytes, errors;
	int64_t late_ns, late_max_ns;	/* open loop: start after schedule */
	int64_t waits, wait_ns;		/* cross-thread dependency waits */
	uint64_t end_ns;
};

struct mb_rs_file {
	uint32_t path;
	int64_t size;
};

struct mb_rs {
	const struct mb_config *cfg;
	int nthreads, nhandles;
	struct mb_rs_thread *threads;
	struct mb_rs_dep *deps;
	size_t ndeps, depcap;
	char *pool;		/* NUL-terminated decoded paths */
	size_t poolsize, poolcap;
	uint32_t *dirs;
	size_t ndirs, dircap;
	struct mb_rs_file *files;
	size_t nfiles, filecap;
	int64_t need_bytes;
	long long ncalls;

	int rootfd;		/* PATH, or PATH/mobiperf_replay (mb_rs_files.c) */
	int closed;		/* --replay-timing=closed */
	uint64_t start_ns;
	/* shared between workers, by atomics only */
	uint32_t *progress;	/* calls finished, per thread */
	uint32_t *sleepers;	/* threads in a futex wait on progress[i] */
	int *fds;		/* handle -> descriptor, -1 when closed */
	uint8_t *sysctl;	/* handles opened on MB_RS_DROP_CACHES */
	int first_errors;	/* failures printed so far */
	int marker;		/* the trace marker, -1 without */
};

#define MB_RS_MAGIC "mobiperf-replay 1"
#define MB_RS_ROOT "mobiperf_replay"
#define MB_RS_DROP_CACHES "/proc/sys/vm/drop_caches"

/* mb_rs_parse.c: the script into rs; 0, or -1 with a message on stderr */
int mb_rs_parse(struct mb_rs *rs, const char *script);
void mb_rs_free(struct mb_rs *rs);
int mb_rs_path_ok(const char *path);
int mb_rs_flags(const char *names, int *flags);

/* mb_rs_files.c: the root, the free space check, the files that existed */
int mb_rs_prepare(struct mb_rs *rs);

/* mb_rs_run.c: the timed part */
int mb_rs_replay(const struct mb_config *cfg, const char *script);

#endif
