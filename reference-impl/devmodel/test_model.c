/*
 * test_model.c - unit tests of devmodel's timing model and value parsers.
 *
 * Time is passed to the model explicitly, so each test states the arrival
 * times and checks the exact deadlines the model returns.
 */
#include "dm_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dm_failures;

#define CHECK_EQ(what, got, want)                                           \
	do {                                                                \
		uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);       \
		if (g_ != w_) {                                             \
			fprintf(stderr, "%s:%d: %s: got %" PRIu64           \
				", want %" PRIu64 "\n", __FILE__, __LINE__, \
				what, g_, w_);                              \
			dm_failures++;                                      \
		}                                                           \
	} while (0)

#define MS 1000000ULL
#define US 1000ULL

static struct dm_profile test_profile(void)
{
	struct dm_profile p = {
		.name = "test",
		.write_bw = 1000000,		/* 1 MB/s: 1 byte per us */
		.read_bw = 2000000,
		.rand_write_lat_ns = 2 * MS,
		.rand_read_lat_ns = 500 * US,
		.seq_lat_ns = 10 * US,
		.flush_lat_ns = 5 * MS,
		.seq_window = 1,
	};
	return p;
}

static void test_sequential_and_random(void)
{
	struct dm_profile p = test_profile();
	struct dm_model m;
	struct dm_ticket t;

	dm_model_init(&m, &p, 0);
	/* first write: random, 2 ms + 1000 us of transfer */
	t = dm_model_admit(&m, DM_OP_WRITE, 0, 1000, 0);
	CHECK_EQ("first write is random", t.seq, 0);
	CHECK_EQ("first write deadline", t.deadline_ns, 3 * MS);
	dm_model_complete(&m, &t, 1000, 3 * MS, 3 * MS, 0);
	/* continues at 1000: sequential, 10 us + 1 ms, queued after 3 ms */
	t = dm_model_admit(&m, DM_OP_WRITE, 1000, 1000, 1 * MS);
	CHECK_EQ("continuation is sequential", t.seq, 1);
	CHECK_EQ("queued behind the first", t.deadline_ns, 4 * MS + 10 * US);
	dm_model_complete(&m, &t, 1000, 4 * MS + 10 * US, 0, 0);
	/* elsewhere, long after: random and starts at its arrival */
	t = dm_model_admit(&m, DM_OP_WRITE, 1 << 20, 0, 100 * MS);
	CHECK_EQ("jump is random", t.seq, 0);
	CHECK_EQ("idle device starts at arrival", t.deadline_ns,
		 102 * MS);
	dm_model_complete(&m, &t, 0, 102 * MS, 0, 0);
	/* reads have their own clock and latency */
	t = dm_model_admit(&m, DM_OP_READ, 0, 2000, 100 * MS);
	CHECK_EQ("read deadline", t.deadline_ns, 100 * MS + 1500 * US);
	dm_model_complete(&m, &t, 2000, 100 * MS + 1500 * US, 0, 0);

	CHECK_EQ("writes counted", m.ops[DM_OP_WRITE].count, 3);
	CHECK_EQ("write bytes", m.ops[DM_OP_WRITE].bytes, 2000);
	CHECK_EQ("seq writes", m.ops[DM_OP_WRITE].seq, 1);
	CHECK_EQ("rand writes", m.ops[DM_OP_WRITE].rand, 2);
	CHECK_EQ("read bytes", m.ops[DM_OP_READ].bytes, 2000);
	CHECK_EQ("nothing in flight", m.inflight, 0);
	dm_model_destroy(&m);
}

static void test_flush_waits_for_writes(void)
{
	struct dm_profile p = test_profile();
	struct dm_model m;
	struct dm_ticket w, f;

	dm_model_init(&m, &p, 0);
	w = dm_model_admit(&m, DM_OP_WRITE, 0, 4000, 0);	/* ends 6 ms */
	f = dm_model_admit(&m, DM_OP_FLUSH, 0, 0, 1 * MS);
	CHECK_EQ("flush after the write", f.deadline_ns, 11 * MS);
	CHECK_EQ("two in flight", m.max_inflight, 2);
	dm_model_complete(&m, &w, 4000, 6 * MS, 6 * MS, 0);
	dm_model_complete(&m, &f, 0, 11 * MS, 10 * MS, 0);
	CHECK_EQ("flush counted", m.ops[DM_OP_FLUSH].count, 1);
	CHECK_EQ("flush service", m.ops[DM_OP_FLUSH].service_ns, 5 * MS);
	CHECK_EQ("flush throttled", m.ops[DM_OP_FLUSH].throttled_ns, 10 * MS);
	/* latency 11 ms = 11000 us lands in bucket 13 (8192..16383) */
	CHECK_EQ("flush latency bucket",
		 m.ops[DM_OP_FLUSH].latency_us_log2[13], 1);
	dm_model_destroy(&m);
}

static void test_seq_window_tracks_two_streams(void)
{
	struct dm_profile p = test_profile();
	struct dm_model m;
	struct dm_ticket t;
	uint64_t now = 0;
	int i;

	p.seq_window = 2;
	dm_model_init(&m, &p, 0);
	/* two interleaved streams at 0 and 1 MiB: only the first IOs random */
	for (i = 0; i < 4; i++) {
		t = dm_model_admit(&m, DM_OP_WRITE, (uint64_t)i * 100, 100,
				   now);
		dm_model_complete(&m, &t, 100, t.deadline_ns, 0, 0);
		t = dm_model_admit(&m, DM_OP_WRITE,
				   (1 << 20) + (uint64_t)i * 100, 100, now);
		dm_model_complete(&m, &t, 100, t.deadline_ns, 0, 0);
		now = t.deadline_ns;
	}
	CHECK_EQ("two streams, window 2: random", m.ops[DM_OP_WRITE].rand, 2);
	CHECK_EQ("two streams, window 2: seq", m.ops[DM_OP_WRITE].seq, 6);
	dm_model_destroy(&m);
}

static void test_burst_banks_idle_time(void)
{
	struct dm_profile p = test_profile();
	struct dm_model m;
	struct dm_ticket t;

	p.rand_write_lat_ns = 0;
	p.seq_lat_ns = 0;
	p.burst_bytes = 5000;		/* 5 ms of credit at 1 MB/s */
	dm_model_init(&m, &p, 0);
	t = dm_model_admit(&m, DM_OP_WRITE, 0, 3000, 100 * MS);
	CHECK_EQ("burst absorbs 3000 bytes", t.deadline_ns, 100 * MS);
	t = dm_model_admit(&m, DM_OP_WRITE, 3000, 3000, 100 * MS);
	CHECK_EQ("then 1 ms over", t.deadline_ns, 101 * MS);
	/* a flush neither uses nor empties the bucket */
	t = dm_model_admit(&m, DM_OP_FLUSH, 0, 0, 200 * MS);
	CHECK_EQ("flush pays its latency", t.deadline_ns, 205 * MS);
	t = dm_model_admit(&m, DM_OP_WRITE, 6000, 4000, 300 * MS);
	CHECK_EQ("bank refilled while idle", t.deadline_ns, 300 * MS);
	dm_model_destroy(&m);

	/* latency is never paid from the bucket */
	p.rand_write_lat_ns = 2 * MS;
	dm_model_init(&m, &p, 0);
	t = dm_model_admit(&m, DM_OP_WRITE, 0, 1000, 100 * MS);
	CHECK_EQ("latency paid, transfer banked", t.deadline_ns, 102 * MS);
	CHECK_EQ("occupancy counted", m.ops[DM_OP_WRITE].service_ns, 2 * MS);
	dm_model_destroy(&m);
}

static void test_host_profile_is_free(void)
{
	const struct dm_profile *p = dm_profile_find("host");
	struct dm_model m;
	struct dm_ticket t;

	if (!p) {
		fprintf(stderr, "no host profile\n");
		dm_failures++;
		return;
	}
	dm_model_init(&m, p, 0);
	t = dm_model_admit(&m, DM_OP_WRITE, 12345, 1 << 20, 7 * MS);
	CHECK_EQ("host write is immediate", t.deadline_ns, 7 * MS);
	t = dm_model_admit(&m, DM_OP_FLUSH, 0, 0, 7 * MS);
	CHECK_EQ("host flush is immediate", t.deadline_ns, 7 * MS);
	dm_model_destroy(&m);
}

static void test_parsers(void)
{
	uint64_t v = 0;

	CHECK_EQ("40M parses", dm_parse_size("40M", &v), 0);
	CHECK_EQ("40M", v, 40ULL << 20);
	CHECK_EQ("4096", dm_parse_size("4096", &v) == 0 && v == 4096, 1);
	CHECK_EQ("512k", dm_parse_size("512k", &v) == 0 && v == 512 << 10, 1);
	CHECK_EQ("abc rejected", dm_parse_size("abc", &v), (uint64_t)-1);
	CHECK_EQ("-1 rejected", dm_parse_size("-1", &v), (uint64_t)-1);
	CHECK_EQ("4X rejected", dm_parse_size("4X", &v), (uint64_t)-1);
	CHECK_EQ("2ms", dm_parse_duration("2ms", &v) == 0 && v == 2 * MS, 1);
	CHECK_EQ("500us", dm_parse_duration("500us", &v) == 0 &&
		 v == 500 * US, 1);
	CHECK_EQ("1.5s", dm_parse_duration("1.5s", &v) == 0 &&
		 v == 1500 * MS, 1);
	CHECK_EQ("0", dm_parse_duration("0", &v) == 0 && v == 0, 1);
	CHECK_EQ("bare 5 rejected", dm_parse_duration("5", &v), (uint64_t)-1);
	CHECK_EQ("5h rejected", dm_parse_duration("5h", &v), (uint64_t)-1);
	CHECK_EQ("bucket 0", dm_log2_bucket(0), 0);
	CHECK_EQ("bucket 1", dm_log2_bucket(1), 0);
	CHECK_EQ("bucket 2", dm_log2_bucket(2), 1);
	CHECK_EQ("bucket 4096", dm_log2_bucket(4096), 12);
	CHECK_EQ("bucket huge", dm_log2_bucket(~0ULL), DM_HIST_BUCKETS - 1);
}

int main(void)
{
	test_sequential_and_random();
	test_flush_waits_for_writes();
	test_seq_window_tracks_two_streams();
	test_burst_banks_idle_time();
	test_host_profile_is_free();
	test_parsers();
	if (dm_failures) {
		fprintf(stderr, "test_model: %d failure(s)\n", dm_failures);
		return 1;
	}
	printf("test_model: all tests passed\n");
	return 0;
}
