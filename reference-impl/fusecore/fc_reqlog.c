// SPDX-License-Identifier: MIT
/*
 * fusecore's request log (-o requests=PATH): one record per FUSE request the
 * daemon read from /dev/fuse.  It is the FUSE layer of a trace where the
 * kernel has no FUSE events (Linux 6.1, Android's GKI kernels) or has them
 * with a quirk (Debian 6.12's fuse_request_send fires before the request's
 * unique id is set, so every send says "req 0").
 *
 * A record holds what the kernel wrote into the request's header (unique id,
 * opcode, node id, length, and in.h.pid: the thread that made the request),
 * the size and offset of a READ or WRITE, the daemon thread that read it and
 * when, and the thread, time, error and length of its reply.  Times are
 * CLOCK_MONOTONIC, the trace clock mobiperf's tracefs recorder sets
 * (trace_clock mono); the log's first and last lines pair CLOCK_MONOTONIC
 * with CLOCK_BOOTTIME for a trace on the boot clock (Perfetto's).
 *
 * Where the times are taken (fc_io.c, fc_loop.c): read_ns right after the
 * read(2) or splice(2) of /dev/fuse returned the request, reply_ns right
 * before the reply's writev(2) or splice(2): the kernel ends the request
 * (fuse_request_end) inside that call.
 *
 * Records stay in memory while the daemon serves (chunks of FC_RL_CHUNK,
 * allocated as needed): writing them out as they come would add the log's
 * own IO to the traced device.  They are written as text when the daemon
 * unmounts and on SIGUSR1 (with the counters), to PATH.tmp then renamed.
 * collectors/parse/fuse_daemon_log.py reads the format (tab separated):
 *
 *   # mobiperf fuse requests 1
 *   # daemon NAME pid PID
 *   # clocks start mono_ns N boot_ns N
 *   unique opcode nodeid len size offset pid tid read_ns reply_tid ...
 *   1234   16     ...                                   (one line each)
 *   # clocks end mono_ns N boot_ns N
 *   # end RECORDS records DROPPED dropped
 *
 * The reply columns (reply_tid reply_ns error reply_len) are empty for a
 * request that had none when the log was written: FORGET, BATCH_FORGET and
 * INTERRUPT have none, any other is still being served (or its thread died
 * serving it).  A request is answered by the thread that read it (every
 * fusecore reply is synchronous), so the reply finds its record through the
 * thread's last one; a reply to another request (none today) gets a record
 * of its own with empty read columns.
 *
 * Cost: two clock readings and one record (72 bytes) per request, and with
 * splice two more system calls to see the header (fc_io.c); measured in
 * reference-impl/bfuse/README.md.
 *
 * Locking: fc_rl_grow_lock serialises chunk allocation; fc_rl_next and the
 * chunk pointers are atomic.  A record's read columns are written by the
 * thread that read the request before anyone else can know its index, its
 * reply columns by the same thread; the dump reads them after the workers
 * stopped, or while they serve (SIGUSR1: a record being filled may show no
 * reply yet). 
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fc_internal.h"

#define FC_RL_CHUNK_BITS 14
#define FC_RL_CHUNK (1u << FC_RL_CHUNK_BITS)
#define FC_RL_MAX_CHUNKS 4096	/* 64 Mi requests, then counted as dropped */

struct fc_rl_rec {
	uint64_t unique;
	uint64_t nodeid;
	uint64_t offset;	/* READ/WRITE: file offset */
	uint64_t read_ns;	/* 0: the request was not seen read */
	uint64_t reply_ns;	/* 0: no reply (yet) */
	uint32_t opcode;
	uint32_t len;		/* in.h.len: the whole request */
	uint32_t size;		/* READ/WRITE: bytes asked */
	uint32_t pid;		/* in.h.pid: the requesting thread */
	uint32_t tid;		/* the daemon thread that read it */
	uint32_t reply_tid;
	int32_t error;
	uint32_t reply_len;
};

static struct fc_rl_rec *_Atomic fc_rl_chunks[FC_RL_MAX_CHUNKS];
static atomic_uint_fast64_t fc_rl_next;		/* records handed out */
static atomic_uint_fast64_t fc_rl_dropped;
static pthread_mutex_t fc_rl_grow_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fc_rl_start_mono, fc_rl_start_boot;	/* fc_rl_init */
static __thread struct fc_rl_rec *fc_rl_cur;	/* this thread's request */
static __thread uint32_t fc_rl_tid;

static uint64_t fc_rl_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void fc_rl_init(void)
{
	fc_rl_start_mono = fc_rl_clock(CLOCK_MONOTONIC);
	fc_rl_start_boot = fc_rl_clock(CLOCK_BOOTTIME);
}

static uint32_t fc_rl_gettid(void)
{
	if (!fc_rl_tid)
		fc_rl_tid = (uint32_t)syscall(SYS_gettid);
	return fc_rl_tid;
}

/* A zeroed record of our own, or NULL when the log is full. */
static struct fc_rl_rec *fc_rl_new(void)
{
	uint64_t k = atomic_fetch_add(&fc_rl_next, 1);
	uint64_t c = k >> FC_RL_CHUNK_BITS;
	struct fc_rl_rec *chunk;

	if (c >= FC_RL_MAX_CHUNKS) {
		atomic_fetch_add(&fc_rl_dropped, 1);
		return NULL;
	}
	chunk = atomic_load(&fc_rl_chunks[c]);
	if (!chunk) {
		pthread_mutex_lock(&fc_rl_grow_lock);
		chunk = atomic_load(&fc_rl_chunks[c]);
		if (!chunk) {
			chunk = calloc(FC_RL_CHUNK, sizeof(*chunk));
			atomic_store(&fc_rl_chunks[c], chunk);
		}
		pthread_mutex_unlock(&fc_rl_grow_lock);
		if (!chunk) {
			atomic_fetch_add(&fc_rl_dropped, 1);
			return NULL;
		}
	}
	return &chunk[k & (FC_RL_CHUNK - 1)];
}

void fc_rl_received(const void *req, size_t n, uint64_t now_ns)
{
	const struct fuse_in_header *in = req;
	struct fc_rl_rec *r = fc_rl_new();

	fc_rl_cur = r;
	if (!r)
		return;
	r->read_ns = now_ns;
	r->tid = fc_rl_gettid();
	r->len = (uint32_t)n;
	if (!req || n < sizeof(*in))
		return;		/* a spliced request whose header was not seen */
	r->unique = in->unique;
	r->opcode = in->opcode;
	r->nodeid = in->nodeid;
	r->len = in->len;
	r->pid = in->pid;
	/* fuse_read_in and fuse_write_in both start fh, offset, size */
	if ((in->opcode == FUSE_READ || in->opcode == FUSE_WRITE) &&
	    n >= sizeof(*in) + sizeof(struct fuse_read_in)) {
		const struct fuse_read_in *io = (const void *)(in + 1);

		r->offset = io->offset;
		r->size = io->size;
	}
}

void fc_rl_replying(uint64_t unique, int32_t error, size_t len)
{
	struct fc_rl_rec *r = fc_rl_cur;

	if (!r || (unique && r->unique && r->unique != unique) ||
	    r->reply_ns) {
		r = fc_rl_new();	/* not this thread's request */
		if (!r)
			return;
		r->unique = unique;
	}
	if (!r->unique)
		r->unique = unique;
	r->reply_tid = fc_rl_gettid();
	r->error = error;
	r->reply_len = (uint32_t)len;
	r->reply_ns = fc_now_ns();
	fc_rl_cur = NULL;
}

static void fc_rl_write_rec(FILE *out, const struct fc_rl_rec *r)
{
	fprintf(out, "%llu\t%u\t%llu\t%u\t%u\t%llu\t%u\t%u\t",
		(unsigned long long)r->unique, r->opcode,
		(unsigned long long)r->nodeid, r->len, r->size,
		(unsigned long long)r->offset, r->pid, r->tid);
	if (r->read_ns)
		fprintf(out, "%llu", (unsigned long long)r->read_ns);
	if (r->reply_ns)
		fprintf(out, "\t%u\t%llu\t%d\t%u\n", r->reply_tid,
			(unsigned long long)r->reply_ns, r->error,
			r->reply_len);
	else
		fputs("\t\t\t\t\n", out);
}

static void fc_rl_write(FILE *out)
{
	uint64_t n = atomic_load(&fc_rl_next), k;

	fprintf(out, "# mobiperf fuse requests 1\n# daemon %s pid %d\n"
		"# clocks start mono_ns %llu boot_ns %llu\n"
		"unique\topcode\tnodeid\tlen\tsize\toffset\tpid\ttid\tread_ns\t"
		"reply_tid\treply_ns\terror\treply_len\n",
		fc_pol && fc_pol->name ? fc_pol->name : "fusecore",
		(int)getpid(), (unsigned long long)fc_rl_start_mono,
		(unsigned long long)fc_rl_start_boot);
	if (n > (uint64_t)FC_RL_MAX_CHUNKS << FC_RL_CHUNK_BITS)
		n = (uint64_t)FC_RL_MAX_CHUNKS << FC_RL_CHUNK_BITS;
	for (k = 0; k < n; k++) {
		struct fc_rl_rec *chunk =
			atomic_load(&fc_rl_chunks[k >> FC_RL_CHUNK_BITS]);

		if (chunk && (chunk[k & (FC_RL_CHUNK - 1)].read_ns ||
			      chunk[k & (FC_RL_CHUNK - 1)].reply_ns))
			fc_rl_write_rec(out, &chunk[k & (FC_RL_CHUNK - 1)]);
	}
	fprintf(out, "# clocks end mono_ns %llu boot_ns %llu\n"
		"# end %llu records %llu dropped\n",
		(unsigned long long)fc_rl_clock(CLOCK_MONOTONIC),
		(unsigned long long)fc_rl_clock(CLOCK_BOOTTIME),
		(unsigned long long)n,
		(unsigned long long)atomic_load(&fc_rl_dropped));
}

int fc_rl_dump(const char *path)
{
	return fc_write_atomic(path, fc_rl_write, "the request log");
}
