// SPDX-License-Identifier: MIT
/*
 * fusecore counters: per-opcode request/byte counts, a registry of named
 * counters (core and policy), and the JSON dump read by mobiperf's analyzers
 * (-o counters=PATH, written at unmount and on SIGUSR1).
 *
 * Locking: counter values are atomics updated without locks.  The registry
 * array is appended to only before the daemon starts serving (single
 * threaded), and read-only afterwards.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fc_internal.h"

#define FC_MAX_COUNTERS 128

static const char *const fc_op_names[FC_OP_COUNT] = {
	[FC_OP_INIT] = "init", [FC_OP_DESTROY] = "destroy",
	[FC_OP_LOOKUP] = "lookup", [FC_OP_FORGET] = "forget",
	[FC_OP_GETATTR] = "getattr", [FC_OP_SETATTR] = "setattr",
	[FC_OP_READLINK] = "readlink", [FC_OP_MKNOD] = "mknod",
	[FC_OP_MKDIR] = "mkdir", [FC_OP_UNLINK] = "unlink",
	[FC_OP_RMDIR] = "rmdir", [FC_OP_SYMLINK] = "symlink",
	[FC_OP_RENAME] = "rename", [FC_OP_LINK] = "link",
	[FC_OP_OPEN] = "open", [FC_OP_READ] = "read", [FC_OP_WRITE] = "write",
	[FC_OP_STATFS] = "statfs", [FC_OP_RELEASE] = "release",
	[FC_OP_FSYNC] = "fsync", [FC_OP_SETXATTR] = "setxattr",
	[FC_OP_GETXATTR] = "getxattr", [FC_OP_LISTXATTR] = "listxattr",
	[FC_OP_REMOVEXATTR] = "removexattr", [FC_OP_FLUSH] = "flush",
	[FC_OP_OPENDIR] = "opendir", [FC_OP_READDIR] = "readdir",
	[FC_OP_RELEASEDIR] = "releasedir", [FC_OP_FSYNCDIR] = "fsyncdir",
	[FC_OP_CREATE] = "create", [FC_OP_FALLOCATE] = "fallocate",
	[FC_OP_BATCH_FORGET] = "batch_forget",
};

const char *const fc_cause_names[FC_CAUSE_COUNT] = {
	[FC_CAUSE_TIMER] = "timer", [FC_CAUSE_FULL] = "full",
	[FC_CAUSE_FSYNC] = "fsync", [FC_CAUSE_CLOSE] = "close",
	[FC_CAUSE_READ] = "read", [FC_CAUSE_TRUNCATE] = "truncate",
	[FC_CAUSE_OVERLAP] = "overlap", [FC_CAUSE_METADATA] = "metadata",
	[FC_CAUSE_UNMOUNT] = "unmount",
};

static _Atomic uint64_t fc_op_requests[FC_OP_COUNT];
static _Atomic uint64_t fc_op_bytes[FC_OP_COUNT];

/* Registry: filled before serving, read-only afterwards. */
static struct fc_counter fc_counters[FC_MAX_COUNTERS];
static unsigned int fc_ncounters;

struct fc_counter *fc_c_pwrite_calls, *fc_c_pwrite_bytes;
struct fc_counter *fc_c_pread_calls, *fc_c_pread_bytes;
struct fc_counter *fc_c_splice_calls, *fc_c_splice_bytes;
struct fc_counter *fc_c_fsync_calls, *fc_c_fdatasync_calls;

/* Serialises concurrent dumps (SIGUSR1 thread vs unmount). */
static pthread_mutex_t fc_dump_lock = PTHREAD_MUTEX_INITIALIZER;

void fc_op_count(enum fc_op op, uint64_t bytes)
{
	atomic_fetch_add_explicit(&fc_op_requests[op], 1, memory_order_relaxed);
	if (bytes)
		atomic_fetch_add_explicit(&fc_op_bytes[op], bytes,
					  memory_order_relaxed);
}

struct fc_counter *fc_counter_new(const char *name, enum fc_counter_kind kind)
{
	struct fc_counter *c;

	if (fc_ncounters == FC_MAX_COUNTERS) {
		fc_log("too many counters, '%s' not registered", name);
		abort();
	}
	c = &fc_counters[fc_ncounters++];
	c->name = name;
	c->kind = kind;
	atomic_init(&c->value, 0);
	return c;
}

void fc_counter_max(struct fc_counter *c, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(&c->value, memory_order_relaxed);

	while (v > cur &&
	       !atomic_compare_exchange_weak_explicit(&c->value, &cur, v,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

void fc_counters_init(void)
{
	fc_c_pwrite_calls = fc_counter_new("daemon_pwrite_calls", FC_COUNTER_SUM);
	fc_c_pwrite_bytes = fc_counter_new("daemon_pwrite_bytes", FC_COUNTER_SUM);
	fc_c_splice_calls = fc_counter_new("daemon_splice_write_calls",
					   FC_COUNTER_SUM);
	fc_c_splice_bytes = fc_counter_new("daemon_splice_write_bytes",
					   FC_COUNTER_SUM);
	fc_c_pread_calls = fc_counter_new("daemon_pread_calls", FC_COUNTER_SUM);
	fc_c_pread_bytes = fc_counter_new("daemon_pread_bytes", FC_COUNTER_SUM);
	fc_c_fsync_calls = fc_counter_new("daemon_fsync_calls", FC_COUNTER_SUM);
	fc_c_fdatasync_calls = fc_counter_new("daemon_fdatasync_calls",
					      FC_COUNTER_SUM);
}

static void fc_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static void fc_counters_write(FILE *out)
{
	unsigned int i;
	bool first = true;

	fprintf(out, "{\n  \"daemon\": ");
	fc_json_string(out, fc_pol->name);
	fprintf(out, ",\n  \"preset\": ");
	if (fc_cfg.preset)
		fc_json_string(out, fc_cfg.preset);
	else
		fprintf(out, "null");
	fprintf(out, ",\n  \"pid\": %d,\n  \"source\": ", (int)getpid());
	fc_json_string(out, fc_cfg.source);
	fprintf(out, ",\n  \"mountpoint\": ");
	fc_json_string(out, fc_cfg.mountpoint);
	fprintf(out, ",\n  \"config\": {\"io_unit\": %u, \"threads\": %u, "
		"\"splice\": %s, \"writeback_cache\": %s, "
		"\"own_loop\": %s, \"passthrough\": %s},\n",
		fc_cfg.io_unit, fc_cfg.threads,
		fc_cfg.splice ? "true" : "false",
		fc_cfg.writeback_cache ? "true" : "false",
		fc_cfg.own_loop && !fc_cfg.splice ? "true" : "false",
		fc_cfg.passthrough ? "true" : "false");
	fprintf(out, "  \"ops\": {");
	for (i = 0; i < FC_OP_COUNT; i++) {
		uint64_t n = atomic_load(&fc_op_requests[i]);

		if (!n)
			continue;
		fprintf(out, "%s\n    \"%s\": {\"requests\": %llu, "
			"\"bytes\": %llu}", first ? "" : ",", fc_op_names[i],
			(unsigned long long)n,
			(unsigned long long)atomic_load(&fc_op_bytes[i]));
		first = false;
	}
	fprintf(out, "\n  },\n  \"counters\": {");
	for (i = 0; i < fc_ncounters; i++)
		fprintf(out, "%s\n    \"%s\": %llu", i ? "," : "",
			fc_counters[i].name,
			(unsigned long long)atomic_load(&fc_counters[i].value));
	fprintf(out, "\n  },\n  \"policy\": {\n");
	if (fc_pol->counters_json)
		fc_pol->counters_json(out);
	fprintf(out, "\n  }\n}\n");
}

/*
 * Write a file whole or not at all: fill() writes PATH.tmp.PID, which is
 * synced and renamed over PATH.  A failure is logged (what names the file)
 * and returned as -errno.  fc_dump_lock keeps two dumps (SIGUSR1 and the
 * unmount) from writing one temporary file.
 */
int fc_write_atomic(const char *path, void (*fill)(FILE *out),
		    const char *what)
{
	char tmp[4096];
	FILE *out;
	int err = 0;

	if (!path)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&fc_dump_lock);
	out = fopen(tmp, "w");
	if (!out) {
		err = -errno;
		goto out;
	}
	fill(out);
	if (fflush(out) || fsync(fileno(out)))
		err = -errno;
	if (fclose(out) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
out:
	pthread_mutex_unlock(&fc_dump_lock);
	if (err)
		fc_log("cannot write %s to %s: %s", what, path, strerror(-err));
	return err;
}

int fc_counters_dump(const char *path)
{
	return fc_write_atomic(path, fc_counters_write, "counters");
}

uint64_t fc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void fc_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "%s: ",
		     fc_pol && fc_pol->name ? fc_pol->name : "fusecore");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	/* one write() so that lines of concurrent threads do not mix */
	if (write(STDERR_FILENO, line, strlen(line)) < 0)
		return;
}
