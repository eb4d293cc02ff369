// SPDX-License-Identifier: MIT
/*
 * The write buffer against a flat model of the files: random writes (small
 * ones packed into entries, large ones in pool buffers of their own, some
 * larger than an entry), reads, stats, fsyncs, timer rounds and releases on
 * three files, with the management thread running, under four entry
 * geometries.  Every read and stat must match the model, and so must the
 * native files after each fsync and at the end.  Exit status 0 = passed.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "test_bf.h"

#define R_FILES 3
#define R_SPAN (1536 * KIB)		/* writes start below this offset */
#define R_MAX (R_SPAN + 512 * KIB)

struct r_file {
	struct fc_inode *i;
	struct fc_file *f;
	unsigned char *model;		/* what the file must read as */
	uint64_t len;			/* its size */
	uint64_t end;			/* where the last write ended */
};

static uint64_t r_state;
static char r_buf[R_MAX];		/* what a read or pread returned */

static uint64_t r_next(void)		/* xorshift64: reproducible */
{
	r_state ^= r_state << 13;
	r_state ^= r_state >> 7;
	r_state ^= r_state << 17;
	return r_state;
}

static void r_write(struct bf_buf *b, struct r_file *rf, int seed)
{
	bool large = r_next() % 4 == 0;
	size_t size = large ? 256 * KIB + r_next() % (256 * KIB + 1) :
			      1 + r_next() % (16 * KIB);
	uint64_t off = r_next() % 2 ? rf->end % R_SPAN : r_next() % R_SPAN;

	WRITE_OK(b, rf->f, off, size, seed);
	t_fill(rf->model + off, off, size, seed);
	rf->end = off + size;
	if (rf->end > rf->len)
		rf->len = rf->end;
}

static void r_check_read(struct r_file *rf)
{
	uint64_t off = r_next() % (rf->len + 64 * KIB);
	size_t size = 1 + r_next() % (600 * KIB);
	size_t want = off >= rf->len ? 0 :
		      rf->len - off < size ? rf->len - off : size;

	EXPECT_EQ(bf_buf_read(rf->f, r_buf, size, off), want);
	EXPECT(!memcmp(r_buf, rf->model + off, want));
}

static void r_check_native(struct r_file *rf)
{
	EXPECT_EQ(t_native_size(rf->i), rf->len);
	EXPECT_EQ(pread(rf->f->fd, r_buf, rf->len, 0), rf->len);
	EXPECT(!memcmp(r_buf, rf->model, rf->len));
}

static void r_step(struct bf_buf *b, struct r_file *rf, int seed)
{
	unsigned int r = r_next() % 100;

	if (r < 55) {
		r_write(b, rf, seed);
	} else if (r < 75) {
		r_check_read(rf);
	} else if (r < 82) {
		EXPECT_EQ(t_stat_size(rf->i), rf->len);
	} else if (r < 88) {
		EXPECT_EQ(bf_buf_fsync(rf->f, 0), 0);
		r_check_native(rf);
	} else if (r < 96) {
		t_now += r_next() % (3 * FLUSH_MS * MS);
		bf_buf_flush_due(b);
	} else {
		bf_buf_release(rf->f);
	}
}

/* One geometry: entry size, phase, number of entries. */
static void test_random_operations_match_a_model(uint64_t entry,
						 uint64_t phase,
						 unsigned int nentries)
{
	struct bf_buf *b = t_buffer(entry, phase, nentries);
	struct r_file rf[R_FILES];
	char name[24];
	int k, op;

	r_state = 0x9e3779b97f4a7c15ULL ^ entry ^ nentries;
	for (k = 0; k < R_FILES; k++) {
		snprintf(name, sizeof(name), "random%d", k);
		rf[k].i = t_inode(name, 0, 0);
		rf[k].f = t_open(b, rf[k].i, O_RDWR);
		rf[k].model = calloc(1, R_MAX);
		rf[k].len = rf[k].end = 0;
		EXPECT(rf[k].model != NULL);
	}
	EXPECT_EQ(bf_buf_start(b), 0);
	for (op = 0; op < 3000; op++)
		r_step(b, &rf[r_next() % R_FILES], op + 1);
	bf_buf_stop(b);
	for (k = 0; k < R_FILES; k++) {
		r_check_native(&rf[k]);
		free(rf[k].model);
	}
	/* the run met the rules it means to test */
	EXPECT(t_val(t_ctr.coalesced) > 0);
	if (nentries < R_FILES)		/* three files, fewer entries */
		EXPECT(t_val(t_ctr.full_waits) > 0);
	EXPECT_EQ(t_val(t_ctr.direct) > 0, entry < 512 * KIB);
	t_finish(b);
}

int main(void)
{
	t_setup("test_bf_model");
	test_random_operations_match_a_model(64 * KIB, 0, 4);
	test_random_operations_match_a_model(2 * MIB, 1 * MIB, 4);
	test_random_operations_match_a_model(256 * KIB, 128 * KIB, 3);
	test_random_operations_match_a_model(1 * MIB, 0, 1);
	t_teardown("test_bf_model");
	return 0;
}
