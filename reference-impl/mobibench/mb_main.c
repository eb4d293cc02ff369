/*
 * mb_main.c - mobibench: command line, run orchestration and results.
 *
 * A Mobibench-compatible storage workload generator.  The main thread
 * parses the options, prints the setup block, starts one worker per thread
 * (file or SQLite workload), waits until every worker has finished its
 * untimed setup, drops the page cache, and then opens the timed window:
 * T1, first /proc/stat sample, "setState: 2", EXEC broadcast.  When the
 * last worker has finished its loop and final sync the window closes (T2)
 * and the result block is printed in Mobibench's exact format.
 *
 * Deliberate differences from the original, all documented in --help and
 * README.md: run-time errors exit non-zero; numbers are validated instead of
 * atoi()'d; no fixed-size path or SQL buffers; no uninitialised reads; the
 * random generator is per thread (the original shares one racily).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MB_NO_SQLITE
#include <sqlite3.h>
#endif

#include "mb.h"

struct mb_cpu {
	unsigned long long user, nice, sys, idle, iowait;
	int valid;
};

static const char mb_help_text[] =
	"Usage: mobibench [options]\n"
	"\n"
	"File workload (default):\n"
	"  -p PATH   working directory, created if missing (default ./mobibench);\n"
	"            a path under /dev is used as the target file itself\n"
	"  -f KB     file size in KiB, all threads together (default 1024)\n"
	"  -r KB     record (IO) size in KiB (default 4)\n"
	"  -a MODE   0 sequential write, 1 random write, 2 sequential read,\n"
	"            3 random read, 4 append (unlink, then allocating writes)\n"
	"  -y MODE   0 buffered, 1 O_SYNC, 2 fsync per write, 3 O_DIRECT,\n"
	"            4 O_SYNC|O_DIRECT, 5 mmap, 6 mmap+msync(MS_ASYNC),\n"
	"            7 mmap+msync(MS_SYNC), 8 fdatasync per write\n"
	"  -t N      threads, each with its own file test.dat<k> (1..100)\n"
	"  -v PCT    overlap ratio of random IO: PCT %% of records repeat\n"
	"  -L FILE   append per-IO latencies (usec) to FILE\n"
	"  -k FILE   append per-second IOPS or KB/s to FILE\n"
	"\n"
	"SQLite workload:\n"
	"  -d OP     enable it: 0 insert, 1 update, 2 delete\n"
	"  -n N      transactions, all threads together (default 10)\n"
	"  -j J      journal mode 0 DELETE, 1 TRUNCATE (default), 2 PERSIST,\n"
	"            3 WAL, 4 MEMORY, 5 OFF\n"
	"  -s S      PRAGMA synchronous (0 OFF, 1 NORMAL, 2 FULL default)\n"
	"  -i MS     sleep between transactions, timed (1.0.1: seconds)\n"
	"  -T K      tables per database (1..20, default 3)\n"
	"  -D K      databases per transaction, attached (1..20, default 1)\n"
	"  -R X      random primary keys for insert (X is ignored)\n"
	"\n"
	"Other:\n"
	"  -g SCRIPT replay a MobiGen trace under PATH/mobigen_temp, or a\n"
	"            mobiperf replay script (first line \"mobiperf-replay 1\")\n"
	"            in PATH when it is empty, else in PATH/mobiperf_replay\n"
	"  --replay-timing=open|closed  a mobiperf replay's calls at their\n"
	"            recorded think times (open, the default) or each as soon\n"
	"            as the previous one returned (closed); both keep the\n"
	"            order between threads the trace showed\n"
	"  --replay-dir=NAME  a mobiperf replay's root is PATH/NAME, made\n"
	"            new (default: PATH itself when it is empty, else\n"
	"            PATH/mobiperf_replay)\n"
	"  -q        no progress output\n"
	"  -h        this help\n"
	"  --compat=1.0.1   the semantics of Mobibench 1.0.1 (2013): -a 0\n"
	"            unlinks and writes a fresh file; SQLite does one autocommit\n"
	"            INSERT/UPDATE/DELETE per transaction on one AUTOINCREMENT\n"
	"            table in PATH/test.db<k>; -i in seconds; no -a 4, -y 8,\n"
	"            -v, -L, -k, -T, -D, -R.  --compat=1.0.8 is the default.\n"
	"  --json=FILE      write every figure and per-IO latency percentiles\n"
	"            (p50 p90 p99 p99.9 max, ns) as JSON to FILE ('-' = stdout,\n"
	"            after the text output)\n"
	"  --no-drop-caches do not write 3 to /proc/sys/vm/drop_caches\n"
	"\n"
	"Timed window markers: \"mobibench: timed_start\" and \"mobibench: "
	"timed_end\"\n"
	"are written to $MOBIBENCH_TRACE_MARKER if set, else to tracefs\n"
	"trace_marker, when that file is writable; before them, the workload:\n"
	"\"mobibench: workload file\" or \"mobibench: workload sqlite journal=MODE\".\n"
	"\n"
	"Differences from the original Mobibench (deliberate fixes):\n"
	"  run-time errors exit 1 (the original exits 0); numbers are checked\n"
	"  (zero or negative sizes, a record larger than the file per thread,\n"
	"  unknown -a/-y/-d values are errors); no fixed-size buffers for paths\n"
	"  or SQL; no uninitialised reads; each thread has its own random\n"
	"  generator and rand() state; the block-device mode does not pre-write\n"
	"  the device; -k KB/s is count x record size.\n"
	"\n"
	"Examples:\n"
	"  mobibench -p /data/test -f 524288 -r 512 -a 0 -y 0\n"
	"  mobibench -p /data/test -f 16384 -r 4 -a 1 -y 2 --json=out.json\n"
	"  mobibench -p /data/test -d 0 -n 1000 -j 3\n"
	"  mobibench -p /data/test -g app.replay --replay-timing=closed\n";

static const char *const mb_journal_names[] = {
	"DELETE", "TRUNCATE", "PERSIST", "WAL", "MEMORY", "OFF",
};

/* ------------------------------------------------------------- CPU */

static void mb_cpu_sample(struct mb_cpu *c)
{
	FILE *f = fopen("/proc/stat", "r");

	memset(c, 0, sizeof(*c));
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu", &c->user, &c->nice,
		   &c->sys, &c->idle, &c->iowait) == 5)
		c->valid = 1;
	fclose(f);
}

/* ------------------------------------------------------------ options */

static void mb_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void mb_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("mobibench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nmobibench: type 'mobibench -h' for help\n", stderr);
	exit(1);
}

static long long mb_parse_num(int opt, const char *s, long long lo,
			      long long hi)
{
	long long v;
	char *end;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end || errno)
		mb_usage_error("-%c: '%s' is not a whole number", opt, s);
	if (v < lo || v > hi)
		mb_usage_error("-%c %lld: must be between %lld and %lld", opt,
			       v, lo, hi);
	return v;
}

static long long mb_clamp(long long v, long long lo, long long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void mb_parse_args(int argc, char **argv, struct mb_config *c)
{
	static const struct option longopts[] = {
		{ "compat", required_argument, NULL, 'C' },
		{ "json", required_argument, NULL, 'J' },
		{ "no-drop-caches", no_argument, NULL, 'N' },
		{ "replay-timing", required_argument, NULL, 'G' },
		{ "replay-dir", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *newer_only = NULL;
	int opt;

	memset(c, 0, sizeof(*c));
	c->path = "./mobibench";
	c->file_kb = 1024;
	c->rec_kb = 4;
	c->threads = 1;
	c->db_op = -1;
	c->db_trs = 10;
	c->journal = 1;
	c->synchronous = 2;
	c->tables = 3;
	c->dbs = 1;
	c->drop_caches = 1;

	opterr = 1;
	while ((opt = getopt_long(argc, argv,
				  "p:f:r:a:y:t:d:n:j:s:g:i:hqL:k:v:T:D:R:",
				  longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (!*optarg)
				mb_usage_error("-p: empty path");
			c->path = optarg;
			break;
		case 'f':
			c->file_kb = mb_parse_num(opt, optarg, 1,
						  LLONG_MAX / 2048);
			break;
		case 'r':
			c->rec_kb = mb_parse_num(opt, optarg, 1,
						 INT_MAX / 1024);
			break;
		case 'a':
			c->access = (int)mb_parse_num(opt, optarg, 0, 4);
			break;
		case 'y':
			c->sync = (int)mb_parse_num(opt, optarg, 0, 8);
			break;
		case 't':
			c->threads = (int)mb_clamp(
				mb_parse_num(opt, optarg, LLONG_MIN, LLONG_MAX),
				1, MB_MAX_THREADS);
			break;
		case 'd':
			c->db_op = (int)mb_parse_num(opt, optarg, LLONG_MIN,
						     LLONG_MAX);
			if (c->db_op < 0 || c->db_op > 2)
				mb_usage_error("-d %d: invaild db operation "
					       "mode (0 insert, 1 update, "
					       "2 delete)", c->db_op);
			break;
		case 'n':
			c->db_trs = mb_parse_num(opt, optarg, 1, INT_MAX);
			break;
		case 'j':
			c->journal = (int)mb_parse_num(opt, optarg, INT_MIN,
						       INT_MAX);
			if (c->journal < 0 || c->journal > 5)
				c->journal = 1;	/* as the original */
			break;
		case 's':
			c->synchronous = (int)mb_parse_num(opt, optarg, 0, 3);
			break;
		case 'g':
			c->replay = optarg;
			break;
		case 'i':
			c->interval_ms = (int)mb_clamp(
				mb_parse_num(opt, optarg, 0, LLONG_MAX), 0,
				10000);
			break;
		case 'q':
			c->quiet = 1;
			break;
		case 'L':
			c->lat_file = optarg;
			newer_only = newer_only ? newer_only : "-L";
			break;
		case 'k':
			c->kps_file = optarg;
			newer_only = newer_only ? newer_only : "-k";
			break;
		case 'v':
			c->overlap_pct = (int)mb_parse_num(opt, optarg, 0, 99);
			newer_only = newer_only ? newer_only : "-v";
			break;
		case 'T':
			c->tables = (int)mb_clamp(
				mb_parse_num(opt, optarg, LLONG_MIN, LLONG_MAX),
				1, 20);
			newer_only = newer_only ? newer_only : "-T";
			break;
		case 'D':
			c->dbs = (int)mb_clamp(
				mb_parse_num(opt, optarg, LLONG_MIN, LLONG_MAX),
				1, 20);
			newer_only = newer_only ? newer_only : "-D";
			break;
		case 'R':
			c->random_ids = 1;
			newer_only = newer_only ? newer_only : "-R";
			break;
		case 'C':
			if (!strcmp(optarg, MB_VERSION_OLD))
				c->old = 1;
			else if (!strcmp(optarg, MB_VERSION))
				c->old = 0;
			else
				mb_usage_error("--compat=%s: known semantics "
					       "are 1.0.1 and 1.0.8", optarg);
			break;
		case 'J':
			if (!*optarg)
				mb_usage_error("--json: empty file name");
			c->json = optarg;
			break;
		case 'N':
			c->drop_caches = 0;
			break;
		case 'G':
			if (strcmp(optarg, "open") && strcmp(optarg, "closed"))
				mb_usage_error("--replay-timing=%s: open or "
					       "closed", optarg);
			c->replay_closed = !strcmp(optarg, "closed");
			break;
		case 'W':
			if (!*optarg || strchr(optarg, '/') ||
			    !strcmp(optarg, ".") || !strcmp(optarg, ".."))
				mb_usage_error("--replay-dir=%s: a new directory's "
					       "name in PATH", optarg);
			c->replay_dir = optarg;
			break;
		case 'h':
			printf(" Mobibench %s\n\n%s", c->old ? MB_VERSION_OLD :
			       MB_VERSION, mb_help_text);
			exit(0);
		default:
			/* getopt has printed its message */
			fputs("mobibench: type 'mobibench -h' for help\n",
			      stderr);
			exit(1);
		}
	}
	if (optind < argc)
		mb_usage_error("unexpected argument '%s'", argv[optind]);
	if (c->old && newer_only)
		mb_usage_error("%s is not an option of Mobibench %s",
			       newer_only,
			       MB_VERSION_OLD);
	if (c->old && c->access == MB_A_APPEND)
		mb_usage_error("-a 4 (append) is not in Mobibench %s; its -a 0 "
			       "already unlinks and writes a fresh file",
			       MB_VERSION_OLD);
	if (c->old && c->sync == MB_Y_FDATASYNC)
		mb_usage_error("-y 8 (fdatasync) is not in Mobibench %s",
			       MB_VERSION_OLD);
#ifdef MB_NO_SQLITE
	if (c->db_op >= 0)
		mb_usage_error("this build has no SQLite: -d is unavailable");
#else
	if (c->db_op >= 0 && c->dbs > 1) {
		/* SQLite's compile-time cap on ATTACH, 10 unless raised */
		sqlite3 *mem = NULL;
		int max_attached = 10;

		if (sqlite3_open(":memory:", &mem) == SQLITE_OK)
			max_attached = sqlite3_limit(mem, SQLITE_LIMIT_ATTACHED,
						     -1);
		sqlite3_close(mem);
		if (c->dbs - 1 > max_attached)
			mb_usage_error("-D %d: SQLite %s attaches at most %d "
				       "databases, so -D can be at most %d",
				       c->dbs, sqlite3_libversion(),
				       max_attached, max_attached + 1);
	}
#endif

	c->is_blockdev = !strncmp(c->path, "/dev", 4);
	c->file_kb_thread = c->file_kb / c->threads;
	c->reclen = c->rec_kb * 1024;
	c->trs_thread = c->db_trs / c->threads;
	if (c->db_op < 0 && !c->replay) {
		if (c->file_kb_thread < c->rec_kb)
			mb_usage_error("record size %lld KB is larger than the "
				       "file size per thread %lld KB (-f %lld "
				       "/ -t %d)", c->rec_kb,
				       c->file_kb_thread, c->file_kb,
				       c->threads);
		c->nrec = c->file_kb_thread / c->rec_kb;
		c->bytes = c->nrec * c->reclen;
	}
	if (c->db_op >= 0 && c->trs_thread < 1)
		mb_usage_error("-n %lld gives no transaction per thread with "
			       "-t %d", c->db_trs, c->threads);
}

/* -------------------------------------------------------------- output */

static void mb_print_setup(const struct mb_config *c)
{
	printf("%s\n[mobibench measurement setup]\n%s\n", MB_DASHES,
	       MB_DASHES);
	if (c->db_op >= 0) {
		printf("DB teset mode enabled.\n");
		if (c->interval_ms)
			printf("DB time interval : %d %s\n", c->interval_ms,
			       c->old ? "sec" : "ms");
		printf("Operation : %d\n", c->db_op);
		printf("Transactions per thread: %lld\n", c->trs_thread);
		if (!c->old) {
			printf("# of Tables : %d\n", c->tables);
			printf("# of Databases : %d\n", c->dbs);
		}
	} else {
		printf("File size per thread : %lld KB\n", c->file_kb_thread);
		printf("IO size : %lld KB\n", c->rec_kb);
		printf("IO count : %lld \n", c->nrec);
		printf("Access Mode %d, Sync Mode %d\n", c->access, c->sync);
	}
	printf("# of Threads : %d\n", c->threads);
}

static int mb_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted v[0..n) */
static uint64_t mb_pct(const uint64_t *v, long long n, double p)
{
	long long k = (long long)ceil(p / 100.0 * (double)n);

	if (n == 0)
		return 0;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

struct mb_result {
	double elapsed;
	long sec, usec;
	double rate, iops, tps;
	double cpu[3];		/* active, idle, iowait; NAN if unknown */
	int cs_valid;
	unsigned long long cs_total, cs_vol;
	uint64_t *lat;		/* sorted, all workers */
	long long n_lat;
	double lat_mean;
};

static void mb_json_num(FILE *f, const char *key, double v, int last)
{
	if (isnan(v) || isinf(v))
		fprintf(f, "    \"%s\": null%s\n", key, last ? "" : ",");
	else
		fprintf(f, "    \"%s\": %.6f%s\n", key, v, last ? "" : ",");
}

static void mb_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static int mb_write_json(const struct mb_config *c, const struct mb_result *r,
			 const char *err)
{
	FILE *f = strcmp(c->json, "-") ? fopen(c->json, "w") : stdout;
	int is_db = c->db_op >= 0;
	int random = c->access == MB_A_RANDWRITE ||
		     c->access == MB_A_RANDREAD;

	if (!f) {
		fprintf(stderr, "mobibench: --json %s: %s\n", c->json,
			strerror(errno));
		return -1;
	}
	fprintf(f, "{\n  \"mobibench_version\": \"%s\",\n", MB_VERSION);
	fprintf(f, "  \"semantics\": \"%s\",\n",
		c->old ? MB_VERSION_OLD : MB_VERSION);
	fprintf(f, "  \"workload\": \"%s\",\n", is_db ? "db" : "file");
	fprintf(f, "  \"config\": {\n    \"path\": ");
	mb_json_str(f, c->path);
	fprintf(f, ",\n    \"threads\": %d,\n", c->threads);
	if (is_db)
		fprintf(f, "    \"db_op\": %d,\n    \"transactions\": %lld,\n"
			"    \"transactions_per_thread\": %lld,\n"
			"    \"journal_mode\": \"%s\",\n"
			"    \"synchronous\": %d,\n    \"tables\": %d,\n"
			"    \"databases\": %d,\n    \"interval\": %d\n",
			c->db_op, c->db_trs, c->trs_thread,
			mb_journal_names[c->journal], c->synchronous,
			c->old ? 1 : c->tables, c->old ? 1 : c->dbs,
			c->interval_ms);
	else
		fprintf(f, "    \"file_kb\": %lld,\n"
			"    \"file_kb_per_thread\": %lld,\n"
			"    \"record_kb\": %lld,\n    \"io_count\": %lld,\n"
			"    \"access_mode\": %d,\n    \"sync_mode\": %d,\n"
			"    \"overlap_pct\": %d\n",
			c->file_kb, c->file_kb_thread, c->rec_kb, c->nrec,
			c->access, c->sync, c->overlap_pct);
	fprintf(f, "  },\n  \"results\": {\n");
	if (r) {
		fprintf(f, "    \"elapsed_s\": %.6f,\n", r->elapsed);
		if (is_db) {
			mb_json_num(f, "tps", r->tps, 0);
		} else {
			mb_json_num(f, "throughput_bytes_per_s", r->rate, 0);
			mb_json_num(f, "throughput_kb_per_s", r->rate / 1024,
				    0);
			mb_json_num(f, "throughput_mb_per_s",
				    r->rate / 1024 / 1024, 0);
			if (random)
				mb_json_num(f, "iops", r->iops, 0);
		}
		mb_json_num(f, "cpu_active_pct", r->cpu[0], 0);
		mb_json_num(f, "cpu_idle_pct", r->cpu[1], 0);
		mb_json_num(f, "cpu_iowait_pct", r->cpu[2], 0);
		if (r->cs_valid)
			fprintf(f, "    \"ctx_switches\": %llu,\n"
				"    \"ctx_switches_voluntary\": %llu,\n",
				r->cs_total, r->cs_vol);
		else
			fprintf(f, "    \"ctx_switches\": null,\n"
				"    \"ctx_switches_voluntary\": null,\n");
		fprintf(f, "    \"latency_ns\": {\n"
			"      \"what\": \"%s\",\n      \"count\": %lld,\n"
			"      \"mean\": %.1f,\n      \"p50\": %llu,\n"
			"      \"p90\": %llu,\n      \"p99\": %llu,\n"
			"      \"p99.9\": %llu,\n      \"max\": %llu\n    }\n",
			is_db ? "transaction" :
			"io (write/read + per-record sync)",
			r->n_lat, r->lat_mean,
			(unsigned long long)mb_pct(r->lat, r->n_lat, 50),
			(unsigned long long)mb_pct(r->lat, r->n_lat, 90),
			(unsigned long long)mb_pct(r->lat, r->n_lat, 99),
			(unsigned long long)mb_pct(r->lat, r->n_lat, 99.9),
			(unsigned long long)(r->n_lat ?
					     r->lat[r->n_lat - 1] : 0));
	}
	fprintf(f, "  },\n  \"error\": ");
	if (err)
		mb_json_str(f, err);
	else
		fputs("null", f);
	fputs("\n}\n", f);
	if (f != stdout && fclose(f)) {
		fprintf(stderr, "mobibench: --json %s: %s\n", c->json,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* -L and -k files, written after the timed window so they cost it nothing */
static int mb_write_logs(const struct mb_config *c, struct mb_run *run,
			 const char *time_text)
{
	int random = c->access == MB_A_RANDWRITE ||
		     c->access == MB_A_RANDREAD;
	int mmap_mode = c->sync >= MB_Y_MMAP && c->sync <= MB_Y_MMAP_SYNC;
	FILE *lf = NULL, *kf = NULL;
	int t, ret = 0;
	long long i;

	if (c->db_op >= 0)
		return 0;
	if (c->lat_file && !(lf = fopen(c->lat_file, "a"))) {
		fprintf(stderr, "mobibench: -L %s: %s\n", c->lat_file,
			strerror(errno));
		ret = -1;
	}
	if (c->kps_file && !(kf = fopen(c->kps_file, "a"))) {
		fprintf(stderr, "mobibench: -k %s: %s\n", c->kps_file,
			strerror(errno));
		ret = -1;
	}
	for (t = 0; t < c->threads; t++) {
		struct mb_worker *w = &run->workers[t];
		uint64_t sum = 0;
		long long cnt = 0;

		if (lf)
			fprintf(lf, "\n#In %d IO mode and %d sync mode\n",
				c->access, c->sync);
		if (kf)
			fprintf(kf, "\n#In %d IO mode and %d sync mode\n",
				c->access, c->sync);
		if (mmap_mode)
			continue;
		for (i = 0; i < w->n_lat; i++) {
			if (lf)
				fprintf(lf, "%.0f\tusec\n",
					(double)w->lat_ns[i] / 1000.0);
			sum += w->lat_ns[i];
			cnt++;
			if (kf && sum > 1000000000ULL) {
				if (random)
					fprintf(kf, "%lld IOPS\n", cnt);
				else
					fprintf(kf, "%lld KB/s\n",
						cnt * c->rec_kb);
				sum = 0;
				cnt = 0;
			}
		}
	}
	if (lf) {
		/* the [TIME] text without its newline, as the original */
		fprintf(lf, "%.*s", (int)strcspn(time_text, "\n"), time_text);
		if (fclose(lf))
			ret = -1;
	}
	if (kf && fclose(kf))
		ret = -1;
	return ret;
}

/* ---------------------------------------------------------------- main */

static int mb_run_workload(const struct mb_config *c)
{
	struct mb_run run;
	struct mb_cpu cpu0, cpu1;
	struct mb_result res;
	uint64_t t1, t2, tot;
	char time_text[256], workload[64];
	int t, marker, started = 0, rc = 0;
	int is_db = c->db_op >= 0;
	int random = c->access == MB_A_RANDWRITE ||
		     c->access == MB_A_RANDREAD;
	long long total = 0, k;

	memset(&run, 0, sizeof(run));
	memset(&res, 0, sizeof(res));
	/* names the workload in the trace: an analysis can tell SQLite from file IO without paths */
	if (is_db)
		snprintf(workload, sizeof(workload), "workload sqlite journal=%s",
			 mb_journal_names[c->journal]);
	else
		snprintf(workload, sizeof(workload), "workload file");
	run.cfg = c;
	pthread_mutex_init(&run.lock, NULL);
	pthread_cond_init(&run.cond, NULL);
	pthread_mutex_init(&run.out_lock, NULL);
	run.workers = calloc((size_t)c->threads, sizeof(*run.workers));
	if (!run.workers) {
		fprintf(stderr, "mobibench: out of memory\n");
		return 1;
	}
	if (!c->is_blockdev)
		mkdir(c->path, 0777);	/* one level; errors show at open */

	mb_print_setup(c);
	marker = mb_marker_open();

	pthread_mutex_lock(&run.lock);
	mb_set_state(&run, MB_S_READY);
	pthread_mutex_unlock(&run.lock);
	for (t = 0; t < c->threads; t++) {
		run.workers[t].run = &run;
		run.workers[t].id = t;
		if (pthread_create(&run.workers[t].thread, NULL,
				   is_db ? mb_db_worker : mb_file_worker,
				   &run.workers[t])) {
			mb_fail(&run, "Thread create failed",
				"cannot create worker thread %d", t);
			break;
		}
		started++;
	}

	pthread_mutex_lock(&run.lock);
	while (run.n_ready < started)
		pthread_cond_wait(&run.cond, &run.lock);
	if (run.failed) {
		run.state = MB_S_ERROR;
		pthread_cond_broadcast(&run.cond);
		pthread_mutex_unlock(&run.lock);
		goto join;
	}
	pthread_mutex_unlock(&run.lock);

	fflush(stdout);
	if (c->drop_caches)
		mb_drop_caches();

	mb_marker_write(marker, workload);
	mb_marker_write(marker, "timed_start");
	t1 = mb_now_ns();
	mb_cpu_sample(&cpu0);
	pthread_mutex_lock(&run.lock);
	mb_set_state(&run, MB_S_EXEC);
	while (run.n_end < started)
		pthread_cond_wait(&run.cond, &run.lock);
	pthread_mutex_unlock(&run.lock);
	t2 = mb_now_ns();
	mb_marker_write(marker, "timed_end");
	mb_cpu_sample(&cpu1);

	res.elapsed = (double)(t2 - t1) / 1e9;
	res.sec = (long)((t2 - t1) / 1000000000ULL);
	res.usec = (long)((t2 - t1) % 1000000000ULL / 1000);
	res.cpu[0] = res.cpu[1] = res.cpu[2] = NAN;
	if (cpu0.valid && cpu1.valid) {
		unsigned long long act, idle, iow;

		act = (cpu1.user + cpu1.nice + cpu1.sys) -
		      (cpu0.user + cpu0.nice + cpu0.sys);
		idle = cpu1.idle - cpu0.idle;
		iow = cpu1.iowait - cpu0.iowait;
		tot = act + idle + iow;
		if (tot) {
			res.cpu[0] = (double)act * 100.0 / (double)tot;
			res.cpu[1] = (double)idle * 100.0 / (double)tot;
			res.cpu[2] = (double)iow * 100.0 / (double)tot;
		}
	}
	printf("%s\n[Messurement Result]\n%s\n", MB_DASHES, MB_DASHES);
	printf("[CPU] : Active,Idle,IoWait : %1.2f %1.2f %1.2f\n", res.cpu[0],
	       res.cpu[1], res.cpu[2]);
	if (is_db) {
		res.tps = (double)(c->trs_thread * c->threads) / res.elapsed;
		snprintf(time_text, sizeof(time_text),
			 "[TIME] :%8ld sec %06ldus. \t%.2f Transactions/sec\n",
			 res.sec, res.usec, res.tps);
	} else {
		int n;

		res.rate = (double)(c->file_kb_thread * 1024 * c->threads) /
			   res.elapsed;
		res.iops = res.rate / 1024 / (double)c->rec_kb;
		n = snprintf(time_text, sizeof(time_text),
			     "[TIME] :%8ld sec %06ldus. \t%.0f B/sec, \t%.2f "
			     "KB/sec, \t%.2f MB/sec.", res.sec, res.usec,
			     res.rate, res.rate / 1024, res.rate / 1024 / 1024);
		if (random)
			n += snprintf(time_text + n, sizeof(time_text) - n,
				      " %.2f IOPS(%lldKB) ", res.iops,
				      c->rec_kb);
		snprintf(time_text + n, sizeof(time_text) - n, "\n");
	}
	fputs(time_text, stdout);
	if (c->threads == 1 && run.workers[0].cs_valid) {
		res.cs_valid = 1;
		res.cs_total = run.workers[0].cs_total[1] -
			       run.workers[0].cs_total[0];
		res.cs_vol = run.workers[0].cs_vol[1] -
			     run.workers[0].cs_vol[0];
		printf("[CON SWITCHES] : %llu %llu\n", res.cs_total,
		       res.cs_vol);
	}

join:
	for (t = 0; t < started; t++)
		pthread_join(run.workers[t].thread, NULL);
	if (run.state == MB_S_EXEC) {
		printf("setState: %d\n", MB_S_END);
		for (t = 0; t < started; t++)
			total += run.workers[t].n_lat;
		res.lat = malloc(sizeof(uint64_t) *
				 (size_t)(total ? total : 1));
		if (res.lat) {
			double sum = 0;

			for (t = 0; t < started; t++)
				for (k = 0; k < run.workers[t].n_lat; k++) {
					res.lat[res.n_lat++] =
						run.workers[t].lat_ns[k];
					sum += (double)run.workers[t].lat_ns[k];
				}
			qsort(res.lat, (size_t)res.n_lat, sizeof(uint64_t),
			      mb_cmp_u64);
			res.lat_mean = res.n_lat ? sum / (double)res.n_lat : 0;
		}
		if (mb_write_logs(c, &run, time_text) && !run.failed) {
			run.failed = 1;
			snprintf(run.err, sizeof(run.err), "Log write failed");
		}
	}
	printf("Err string : %s\n", run.failed ? run.err : "No error");
	fflush(stdout);
	if (c->json && mb_write_json(c, run.state == MB_S_EXEC ? &res : NULL,
				     run.failed ? run.err : NULL))
		rc = 1;
	if (run.failed)
		rc = 1;
	if (marker >= 0)
		close(marker);
	for (t = 0; t < c->threads; t++)
		free(run.workers[t].lat_ns);
	free(run.workers);
	free(res.lat);
	return rc;
}

int main(int argc, char **argv)
{
	struct mb_config cfg;

	if (argc == 1) {
		printf("\tMobibench %s\n\n\tUsage: For usage information type "
		       "mobibench -h \n\n", MB_VERSION);
		return 0;
	}
	mb_parse_args(argc, argv, &cfg);
	if (cfg.replay)
		return mb_replay(&cfg) ? 1 : 0;
	mb_file_install_sigbus();
	return mb_run_workload(&cfg);
}
