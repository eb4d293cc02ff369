/*
 * dm_model.h - the timing model and counters of devmodel, mobiperf's
 * emulated storage device.
 *
 * A device profile says how fast the emulated device is: a bandwidth per
 * direction, a per-request latency that depends on whether the request
 * continues a recent one (sequential) or not (random), and the cost of a
 * cache flush.  The model turns each request into a completion deadline;
 * the FUSE glue (devmodel.c) sleeps until that deadline before it replies.
 *
 * The model is a single-queue server per direction: a request starts when
 * the direction is idle and occupies it for latency + size / bandwidth, and
 * a flush occupies the write direction for flush_lat after every write
 * admitted before it.  The transfer part draws on a token bucket of `burst`
 * bytes filled by idle time (a device cache absorbing short host gaps); the
 * latency part is always paid.  Time is passed in, so the model is a pure function of its
 * inputs and is unit-tested without sleeping (test_model.c).
 */
#ifndef DM_MODEL_H
#define DM_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DM_HIST_BUCKETS 32	/* log2 buckets: [2^i, 2^(i+1)) */
#define DM_SEQ_WINDOW_MAX 16	/* recent end offsets remembered per dir */

enum dm_op {
	DM_OP_READ,
	DM_OP_WRITE,
	DM_OP_FLUSH,
	DM_OP_DISCARD,
	DM_NR_OPS,
};

/* A device profile.  Bandwidth 0 means unlimited; all times in ns. */
struct dm_profile {
	char name[32];
	uint64_t write_bw;		/* bytes per second */
	uint64_t read_bw;		/* bytes per second */
	uint64_t rand_write_lat_ns;
	uint64_t rand_read_lat_ns;
	uint64_t seq_lat_ns;		/* per request, either direction */
	uint64_t flush_lat_ns;
	uint64_t burst_bytes;		/* token bucket depth */
	unsigned int seq_window;	/* 1..DM_SEQ_WINDOW_MAX */
	int sync_backing;		/* flush also fsyncs the backing file */
	const char *description;
};

struct dm_op_counters {
	uint64_t count;
	uint64_t bytes;
	uint64_t seq;			/* read/write: continued a recent IO */
	uint64_t rand;
	uint64_t errors;
	uint64_t service_ns;		/* model time the device was busy */
	uint64_t throttled_ns;		/* time spent sleeping to a deadline */
	uint64_t latency_us_log2[DM_HIST_BUCKETS];
	uint64_t size_log2[DM_HIST_BUCKETS];
};

struct dm_model {
	/*
	 * lock protects every field below.  It is held only for the
	 * arithmetic of dm_model_admit()/dm_model_complete(), never across
	 * IO or sleeping, so requests of different threads overlap.
	 */
	pthread_mutex_t lock;
	struct dm_profile prof;
	uint64_t busy_until_ns[2];	/* per direction: DM_OP_READ/WRITE */
	uint64_t banked_ns[2];		/* token bucket: idle transfer time */
	uint64_t recent_end[2][DM_SEQ_WINDOW_MAX];
	unsigned int recent_len[2];
	unsigned int recent_next[2];
	unsigned int inflight;
	unsigned int max_inflight;
	uint64_t start_ns;
	uint64_t dumps;
	struct dm_op_counters ops[DM_NR_OPS];
};

/* The deadline of one admitted request and how the model saw it. */
struct dm_ticket {
	enum dm_op op;
	uint64_t arrival_ns;
	uint64_t deadline_ns;
	bool seq;
};

extern const struct dm_profile dm_profiles[];
extern const unsigned int dm_nr_profiles;

const struct dm_profile *dm_profile_find(const char *name);

/* Parsers for option values; return 0, or -1 on a malformed value. */
int dm_parse_size(const char *s, uint64_t *out);
int dm_parse_duration(const char *s, uint64_t *out_ns);

void dm_model_init(struct dm_model *m, const struct dm_profile *p,
		   uint64_t now_ns);
void dm_model_destroy(struct dm_model *m);

/*
 * Admit a request arriving at now_ns; returns its ticket with the deadline
 * at which the device model completes it.  len is ignored for flushes.
 */
struct dm_ticket dm_model_admit(struct dm_model *m, enum dm_op op,
				uint64_t off, uint64_t len, uint64_t now_ns);

/*
 * Account a request that completed at done_ns after sleeping slept_ns;
 * err != 0 counts it as failed.
 */
void dm_model_complete(struct dm_model *m, const struct dm_ticket *t,
		       uint64_t len, uint64_t done_ns, uint64_t slept_ns,
		       int err);

/* Write the counters as one JSON object. */
void dm_model_write_json(struct dm_model *m, FILE *f, uint64_t now_ns);

/* The profile table as JSON (devmodel --list-profiles). */
void dm_profiles_write_json(FILE *f);

unsigned int dm_log2_bucket(uint64_t v);

#endif /* DM_MODEL_H */
