/*
 * Unit tests of fj_buf: merging, reordering, overlap, read overlay, discard,
 * capacity and age eviction, and a randomized comparison against a flat
 * model of the file (staged bytes + native bytes must always read back as
 * the model says, before and after every eviction).
 */
#define _GNU_SOURCE
#include "fj_buf.h"
#include "test_fj.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define FILE_MAX (256 * 1024)

/* The "native file" the eviction callback writes to. */
static unsigned char native[FILE_MAX];
static size_t native_len;
static uint64_t ev_off[4096];
static size_t ev_len[4096];
static int n_ev;
static int fail_evict;

static int evict_to_native(void *ctx, struct fj_file *f, uint64_t off,
			   const void *data, size_t len)
{
	(void)ctx;
	(void)f;
	if (fail_evict)
		return -EIO;
	memcpy(native + off, data, len);
	if (off + len > native_len)
		native_len = off + len;
	if (n_ev < 4096) {
		ev_off[n_ev] = off;
		ev_len[n_ev] = len;
	}
	n_ev++;
	return 0;
}

static struct fj_file *new_file(void)
{
	struct fj_file *f = fj_file_new(open("/dev/null", O_RDWR), "t", true);

	CHECK(f != NULL);
	return f;
}

static void reset(void)
{
	memset(native, 0, sizeof(native));
	native_len = 0;
	n_ev = 0;
	fail_evict = 0;
}

static void fill(unsigned char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7 + 1);
}

/* Reads [off, off+len) through native + overlay, as fjord's read hook. */
static size_t read_back(struct fj_file *f, uint64_t off, unsigned char *out,
			size_t len)
{
	size_t n = 0;

	if (off < native_len) {
		n = native_len - off < len ? native_len - off : len;
		memcpy(out, native + off, n);
	}
	memset(out + n, 0xEE, len - n);	/* garbage past the native end */
	return fj_buf_read(f, off, out, len, n);
}

static void test_merge_and_reorder(void)
{
	struct fj_buf *b = fj_buf_new(1 << 20, 64 * 1024, evict_to_native, NULL);
	struct fj_file *f = new_file();
	struct fj_buf_stats st;
	unsigned char d[4096];

	reset();
	fill(d, sizeof(d), 1);
	pthread_mutex_lock(&f->lock);
	/* out of order, spatially near: 8K, 0, 4K, then a far one */
	CHECK_EQ(fj_buf_write(b, f, 8192, d, 4096, 1), 0);
	CHECK_EQ(fj_buf_write(b, f, 0, d, 4096, 2), 0);
	CHECK_EQ(f->n_ext, 2);
	CHECK_EQ(fj_buf_write(b, f, 4096, d, 4096, 3), 0);
	CHECK_EQ(f->n_ext, 1);		/* bridged: one 12K extent */
	CHECK_EQ(f->ext[0].len, 12288);
	CHECK_EQ(fj_buf_write(b, f, 100000, d, 100, 4), 0);
	CHECK_EQ(f->n_ext, 2);
	CHECK_EQ(f->buffered, 12288 + 100);
	CHECK_EQ(fj_buf_end(f), 100100);
	fj_buf_get_stats(b, &st);
	CHECK_EQ(st.writes, 4);
	CHECK_EQ(st.merged, 1);
	CHECK_EQ(st.bytes, 12388);
	CHECK_EQ(st.files, 1);
	CHECK_EQ(fj_buf_flush_file(b, f), 0);
	/* evicted in offset order, merged */
	CHECK_EQ(n_ev, 2);
	CHECK_EQ(ev_off[0], 0);
	CHECK_EQ(ev_len[0], 12288);
	CHECK_EQ(ev_off[1], 100000);
	CHECK_EQ(f->n_ext, 0);
	fj_buf_get_stats(b, &st);
	CHECK_EQ(st.bytes, 0);
	CHECK_EQ(st.files, 0);
	CHECK_EQ(st.evicted_bytes, 12388);
	CHECK(!memcmp(native + 4096, d, 4096));
	pthread_mutex_unlock(&f->lock);
	fj_file_put(f);
	fj_buf_free(b);
}

static void test_max_extent(void)
{
	struct fj_buf *b = fj_buf_new(1 << 20, 8192, evict_to_native, NULL);
	struct fj_file *f = new_file();
	unsigned char d[4096];

	reset();
	fill(d, sizeof(d), 2);
	pthread_mutex_lock(&f->lock);
	for (int k = 0; k < 4; k++)
		CHECK_EQ(fj_buf_write(b, f, k * 4096, d, 4096, 1), 0);
	/* touching extents stop merging at 8K */
	CHECK_EQ(f->n_ext, 2);
	CHECK_EQ(f->ext[0].len, 8192);
	CHECK_EQ(f->ext[1].off, 8192);
	/* an overlap always merges, whatever the size */
	CHECK_EQ(fj_buf_write(b, f, 6000, d, 4096, 1), 0);
	CHECK_EQ(f->n_ext, 1);
	CHECK_EQ(f->ext[0].len, 16384);
	pthread_mutex_unlock(&f->lock);
	fj_file_put(f);
	fj_buf_free(b);
}

static void test_overlay_and_discard(void)
{
	struct fj_buf *b = fj_buf_new(1 << 20, 65536, evict_to_native, NULL);
	struct fj_file *f = new_file();
	unsigned char d[8192], out[20000];
	size_t n;

	reset();
	memset(native, 'n', 1000);
	native_len = 1000;
	memset(d, 'a', sizeof(d));
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(fj_buf_write(b, f, 500, d, 100, 1), 0);
	CHECK_EQ(fj_buf_write(b, f, 5000, d, 10, 1), 0);
	n = read_back(f, 0, out, sizeof(out));
	CHECK_EQ(n, 5010);		/* past native EOF up to the staged end */
	CHECK_EQ(out[499], 'n');
	CHECK_EQ(out[500], 'a');
	CHECK_EQ(out[599], 'a');
	CHECK_EQ(out[600], 'n');
	CHECK_EQ(out[1000], 0);		/* the gap reads as zeros */
	CHECK_EQ(out[4999], 0);
	CHECK_EQ(out[5009], 'a');
	/* read starting inside an extent */
	n = read_back(f, 5005, out, 100);
	CHECK_EQ(n, 5);
	/* discard (truncate) through the middle of the first extent */
	fj_buf_discard(b, f, 550, UINT64_MAX);
	CHECK_EQ(f->n_ext, 1);
	CHECK_EQ(f->ext[0].len, 50);
	CHECK_EQ(fj_buf_end(f), 550);
	/* a hole punched inside an extent splits it */
	memset(d, 'b', sizeof(d));
	CHECK_EQ(fj_buf_write(b, f, 2000, d, 8192, 1), 0);
	fj_buf_discard(b, f, 3000, 1000);
	CHECK_EQ(f->n_ext, 3);
	CHECK_EQ(f->ext[1].off, 2000);
	CHECK_EQ(f->ext[1].len, 1000);
	CHECK_EQ(f->ext[2].off, 4000);
	CHECK_EQ(f->ext[2].len, 6192);
	CHECK_EQ(f->buffered, 50 + 1000 + 6192);
	pthread_mutex_unlock(&f->lock);
	fj_file_put(f);
	fj_buf_free(b);
}

static void test_reclaim(void)
{
	struct fj_buf *b = fj_buf_new(10000, 65536, evict_to_native, NULL);
	struct fj_file *f1 = new_file(), *f2 = new_file();
	struct fj_buf_stats st;
	unsigned char d[6000];

	reset();
	fill(d, sizeof(d), 3);
	pthread_mutex_lock(&f1->lock);
	CHECK_EQ(fj_buf_write(b, f1, 0, d, 6000, 100), 0);
	pthread_mutex_unlock(&f1->lock);
	pthread_mutex_lock(&f2->lock);
	CHECK_EQ(fj_buf_write(b, f2, 0, d, 6000, 200), 0);
	pthread_mutex_unlock(&f2->lock);
	CHECK(fj_buf_over(b));
	/* over capacity: the oldest file (f1) goes first, then it stops */
	CHECK_EQ(fj_buf_reclaim(b, 300, UINT64_MAX), 1);
	CHECK_EQ(f1->n_ext, 0);
	CHECK_EQ(f2->n_ext, 1);
	CHECK(!fj_buf_over(b));
	/* by age: f2 arrived at 200, so at 250 with age 100 it stays */
	CHECK_EQ(fj_buf_reclaim(b, 250, 100), 0);
	CHECK_EQ(fj_buf_reclaim(b, 300, 100), 1);
	fj_buf_get_stats(b, &st);
	CHECK_EQ(st.bytes, 0);
	CHECK_EQ(st.peak_bytes, 12000);
	/* a failing eviction keeps the data and reports the error */
	pthread_mutex_lock(&f1->lock);
	CHECK_EQ(fj_buf_write(b, f1, 0, d, 100, 400), 0);
	pthread_mutex_unlock(&f1->lock);
	fail_evict = 1;
	CHECK_EQ(fj_buf_reclaim(b, 500, 0), -EIO);
	CHECK_EQ(f1->buffered, 100);
	fail_evict = 0;
	CHECK_EQ(fj_buf_reclaim(b, 500, 0), 1);
	CHECK_EQ(f1->buffered, 0);
	fj_file_put(f1);
	fj_file_put(f2);
	fj_buf_free(b);
}

static unsigned int rnd_state = 12345;

static unsigned int rnd(unsigned int n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

/* Random writes, discards, evictions against a flat model. */
static void test_random_model(void)
{
	static unsigned char model[FILE_MAX], out[FILE_MAX], d[16384];
	struct fj_buf *b = fj_buf_new(64 * 1024, 16384, evict_to_native, NULL);
	struct fj_file *f = new_file();
	size_t model_len = 0;

	reset();
	pthread_mutex_lock(&f->lock);
	for (int op = 0; op < 20000; op++) {
		unsigned int kind = rnd(100);

		if (kind < 70) {
			uint64_t off = rnd(FILE_MAX - 16384);
			size_t len = 1 + rnd(kind < 35 ? 512 : 16384);

			if (kind < 20)
				off &= ~4095ull;
			fill(d, len, op);
			CHECK_EQ(fj_buf_write(b, f, off, d, len, op), 0);
			memcpy(model + off, d, len);
			if (off + len > model_len)
				model_len = off + len;
		} else if (kind < 75) {
			/* truncate: native and staged, as fjord does */
			uint64_t size = rnd(model_len + 1);

			fj_buf_discard(b, f, size, UINT64_MAX);
			native_len = size;	/* ftruncate sets it */
			memset(native + size, 0, FILE_MAX - size);
			if (size < model_len)
				memset(model + size, 0, model_len - size);
			model_len = size;
		} else if (kind < 80) {
			CHECK_EQ(fj_buf_flush_file(b, f), 0);
			CHECK_EQ(f->n_ext, 0);
		} else {
			uint64_t off = rnd(FILE_MAX);
			size_t len = 1 + rnd(FILE_MAX - off);
			size_t n = read_back(f, off, out, len);
			size_t want = model_len > off ?
				      (model_len - off < len ? model_len - off : len) : 0;

			CHECK_EQ(n, want);
			CHECK(!memcmp(out, model + off, n));
		}
		/* invariants: sorted, disjoint, accounted */
		uint64_t sum = 0;

		for (size_t i = 0; i < f->n_ext; i++) {
			sum += f->ext[i].len;
			CHECK(f->ext[i].len > 0);
			if (i)
				CHECK(f->ext[i].off >=
				      f->ext[i - 1].off + f->ext[i - 1].len);
		}
		CHECK_EQ(sum, f->buffered);
	}
	CHECK_EQ(fj_buf_flush_file(b, f), 0);
	CHECK(native_len >= model_len);
	CHECK(!memcmp(native, model, model_len));
	pthread_mutex_unlock(&f->lock);
	fj_file_put(f);
	fj_buf_free(b);
}

int main(void)
{
	test_merge_and_reorder();
	test_max_extent();
	test_overlay_and_discard();
	test_reclaim();
	test_random_model();
	TEST_DONE("test_fj_buf");
	return 0;
}
