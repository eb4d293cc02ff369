/*
 * mb.h - shared definitions of mobibench, the Mobibench-compatible storage
 * workload generator: the parsed configuration, the run state that the main
 * thread and the workers synchronise on, and the entry points of the file,
 * SQLite and replay workloads.
 */
#ifndef MB_H
#define MB_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MB_VERSION "1.0.8"
#define MB_VERSION_OLD "1.0.1"
#define MB_DASHES "-----------------------------------------"
#define MB_MAX_THREADS 100

enum mb_access {
	MB_A_WRITE = 0,
	MB_A_RANDWRITE = 1,
	MB_A_READ = 2,
	MB_A_RANDREAD = 3,
	MB_A_APPEND = 4,
};

enum mb_sync {
	MB_Y_NONE = 0,
	MB_Y_OSYNC = 1,
	MB_Y_FSYNC = 2,
	MB_Y_DIRECT = 3,
	MB_Y_SYNC_DIRECT = 4,
	MB_Y_MMAP = 5,
	MB_Y_MMAP_ASYNC = 6,
	MB_Y_MMAP_SYNC = 7,
	MB_Y_FDATASYNC = 8,
};

/* the states Mobibench prints as "setState: N" */
enum mb_state {
	MB_S_INIT = 0,
	MB_S_READY = 1,
	MB_S_EXEC = 2,
	MB_S_END = 3,
	MB_S_ERROR = 4,
};

/* Parsed command line; read-only once the workers start. */
struct mb_config {
	char *path;		/* -p, working directory or block device */
	int is_blockdev;	/* path starts with /dev */
	long long file_kb;	/* -f, all threads together */
	long long rec_kb;	/* -r */
	int access;		/* -a, enum mb_access */
	int sync;		/* -y, enum mb_sync */
	int threads;		/* -t, 1..100 */
	int db_op;		/* -d, -1 = file workload */
	long long db_trs;	/* -n, all threads together */
	int journal;		/* -j, 0..5 */
	int synchronous;	/* -s */
	int interval_ms;	/* -i (seconds in 1.0.1 semantics) */
	int tables;		/* -T */
	int dbs;		/* -D */
	int random_ids;		/* -R */
	int overlap_pct;	/* -v */
	const char *lat_file;	/* -L */
	const char *kps_file;	/* -k */
	const char *replay;	/* -g */
	int replay_closed;	/* --replay-timing=closed */
	const char *replay_dir;	/* --replay-dir=NAME: the root, PATH/NAME */
	const char *json;	/* --json FILE, "-" = stdout */
	int quiet;		/* -q */
	int old;		/* --compat=1.0.1 */
	int drop_caches;	/* cleared by --no-drop-caches */

	/* derived, per thread */
	long long file_kb_thread;	/* f / t */
	long long nrec;			/* records per thread */
	long long reclen;		/* bytes per record */
	long long bytes;		/* nrec * reclen */
	long long trs_thread;		/* n / t */
};

struct mb_run;

/* One worker thread; written by the worker, read by main after END. */
struct mb_worker {
	struct mb_run *run;
	int id;
	pthread_t thread;
	pid_t tid;
	int cs_valid;
	unsigned long long cs_total[2], cs_vol[2];
	uint64_t *lat_ns;	/* one entry per timed IO or transaction */
	long long n_lat;
};

struct mb_run {
	const struct mb_config *cfg;

	/*
	 * lock protects state, n_ready, n_end, failed, err and
	 * db_info_printed; cond is broadcast on every change of them.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;
	int n_ready;
	int n_end;
	int failed;
	char err[256];
	int db_info_printed;

	/* out_lock serialises the workers' lines on stdout */
	pthread_mutex_t out_lock;

	struct mb_worker *workers;
};

/* run state, mb_run.c; mb_set_state's caller holds run->lock */
void mb_set_state(struct mb_run *run, int state);
void mb_fail(struct mb_run *run, const char *short_msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int mb_ready_and_wait(struct mb_run *run);
void mb_signal_end(struct mb_run *run);
void mb_progress(struct mb_worker *w, long long done, long long total,
		 int *last);
void mb_sched_sample(struct mb_worker *w, int which);

/* workloads */
void *mb_file_worker(void *arg);
void mb_file_install_sigbus(void);
void *mb_db_worker(void *arg);
int mb_replay(const struct mb_config *cfg);

/* system services, mb_run.c */
uint64_t mb_now_ns(void);	/* CLOCK_MONOTONIC */
char *mb_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int mb_drop_caches(void);
int mb_marker_open(void);
void mb_marker_write(int fd, const char *what);

#endif
