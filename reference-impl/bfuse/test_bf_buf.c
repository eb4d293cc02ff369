// SPDX-License-Identifier: MIT
/*
 * Unit tests of bFUSE's write buffer (bf_buf.c, bf_flush.c), one or more per
 * rule of bf_buf.c's purpose block, without a FUSE mount: each test makes a
 * buffer and real files, drives the buffer as bfuse.c's hooks do, and
 * checks what reached the native files (bytes, sizes, the core's count of
 * native writes), what reads and stat see, and the counters.  The buffer's
 * clock is the test's, so the timer rules are exact; the management thread
 * runs only where a test says so.  Exit status 0 = all passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "test_bf.h"

/* ---- entries ----------------------------------------------------------- */

/* 2 MiB entries cut at 1 MiB modulo 2 MiB: [0,1M) [1M,3M) [3M,5M) ... */
static void test_entries_are_cut_at_the_phase(uint64_t phase)
{
	struct bf_buf *b = t_buffer(2 * MIB, phase, 8);
	struct fc_inode *i = t_inode("phase", 0, 0);
	struct fc_file *f = t_open(b, i, O_WRONLY);
	unsigned int full = 4, entries = phase ? 5 : 4;
	uint64_t off;

	for (off = 0; off < 8 * MIB; off += 512 * KIB)
		WRITE_OK(b, f, off, 512 * KIB, 1);
	EXPECT_EQ(t_val(t_ctr.buffered), 16);
	EXPECT_EQ(t_val(t_ctr.entries_filled), entries);
	EXPECT_EQ(t_val(t_ctr.coalesced), 16 - entries);
	EXPECT_EQ(t_val(t_ctr.hwm_entries), entries);
	EXPECT_EQ(t_val(t_ctr.hwm_bytes), 8 * MIB);
	EXPECT_EQ(t_pwrites(), 0);
	EXPECT_EQ(t_native_size(i), 0);
	EXPECT_EQ(t_stat_size(i), 8 * MIB);
	/* full entries are due at once; with the phase [7M,8M) still fills */
	EXPECT_EQ(bf_buf_flush_due(b), full);
	EXPECT_EQ(FLUSHED(FULL), full);
	EXPECT_EQ(t_pwrites(), full);
	EXPECT_EQ(t_native_size(i), phase ? 7 * MIB : 8 * MIB);
	t_now += FLUSH_MS * MS;
	EXPECT_EQ(bf_buf_flush_due(b), entries - full);
	EXPECT_EQ(FLUSHED(TIMER), entries - full);
	EXPECT_EQ(t_native_size(i), 8 * MIB);
	NATIVE(i, 0, 8 * MIB, 1);
	t_finish(b);
}

static void test_a_write_across_the_cut_is_kept_whole(void)
{
	struct bf_buf *b = t_buffer(2 * MIB, 1 * MIB, 4);
	struct fc_inode *i = t_inode("across", 0, 0);
	struct fc_file *f = t_open(b, i, O_WRONLY);
	uint64_t off;

	/* [768K,1280K) crosses the cut at 1M: its entry ends with it, full */
	WRITE_OK(b, f, 768 * KIB, 512 * KIB, 1);
	EXPECT_EQ(bf_buf_flush_due(b), 1);
	EXPECT_EQ(FLUSHED(FULL), 1);
	EXPECT_EQ(t_native_size(i), 1280 * KIB);
	NATIVE(i, 768 * KIB, 512 * KIB, 1);
	WRITE_OK(b, f, 1280 * KIB, 512 * KIB, 2);
	EXPECT_EQ(t_val(t_ctr.entries_filled), 2);
	/* the second entry runs to the next cut, 3M, and is sealed there */
	for (off = 1792 * KIB; off < 3 * MIB; off += 256 * KIB)
		WRITE_OK(b, f, off, 256 * KIB, 3);
	EXPECT_EQ(t_val(t_ctr.entries_filled), 2);
	EXPECT_EQ(bf_buf_flush_due(b), 1);
	EXPECT_EQ(FLUSHED(FULL), 2);
	EXPECT_EQ(t_native_size(i), 3 * MIB);
	NATIVE(i, 1280 * KIB, 512 * KIB, 2);
	NATIVE(i, 1792 * KIB, 1280 * KIB, 3);
	t_finish(b);
}

static void test_only_the_newest_entry_of_a_file_grows(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 8);
	struct fc_inode *a = t_inode("a", 0, 0), *o = t_inode("o", 0, 0);
	struct fc_file *fa = t_open(b, a, O_RDWR), *fo = t_open(b, o, O_RDWR);
	unsigned int k;

	for (k = 0; k < 8; k++)
		WRITE_OK(b, fa, k * 4 * KIB, 4 * KIB, 1);
	WRITE_OK(b, fa, 4 * KIB, 4 * KIB, 2);	/* rewrite inside: joins */
	EXPECT_EQ(t_val(t_ctr.entries_filled), 1);
	EXPECT_EQ(t_val(t_ctr.coalesced), 8);
	EXPECT_EQ(t_val(t_ctr.hwm_bytes), 32 * KIB);
	WRITE_OK(b, fa, 36 * KIB, 4 * KIB, 3);	/* a gap: new entry, seal */
	EXPECT_EQ(t_val(t_ctr.entries_filled), 2);
	EXPECT_EQ(bf_buf_flush_due(b), 1);
	EXPECT_EQ(t_native_size(a), 32 * KIB);
	NATIVE(a, 0, 4 * KIB, 1);
	NATIVE(a, 4 * KIB, 4 * KIB, 2);
	NATIVE(a, 8 * KIB, 24 * KIB, 1);
	/* the gap, before the newest entry: not joined, a third entry */
	WRITE_OK(b, fa, 32 * KIB, 4 * KIB, 4);
	EXPECT_EQ(t_val(t_ctr.entries_filled), 3);
	READ(fa, 32 * KIB, 8 * KIB, 8 * KIB, 4, 3);
	EXPECT_EQ(bf_buf_fsync(fa, 0), 0);
	EXPECT_EQ(FLUSHED(FSYNC), 2);
	EXPECT_EQ(t_pwrites(), 3);
	NATIVE(a, 32 * KIB, 4 * KIB, 4);
	NATIVE(a, 36 * KIB, 4 * KIB, 3);
	/* overlapping entries: the later wins, in reads and natively */
	WRITE_OK(b, fa, 0, 8 * KIB, 5);
	WRITE_OK(b, fa, 64 * KIB, 4 * KIB, 6);
	WRITE_OK(b, fa, 4 * KIB, 8 * KIB, 7);
	READ(fa, 0, 12 * KIB, 12 * KIB, 5, 7, 7);
	EXPECT_EQ(bf_buf_fsync(fa, 0), 0);
	NATIVE(a, 0, 4 * KIB, 5);
	NATIVE(a, 4 * KIB, 8 * KIB, 7);
	NATIVE(a, 64 * KIB, 4 * KIB, 6);
	/* another file's write does not end a file's newest entry */
	k = t_val(t_ctr.coalesced);
	WRITE_OK(b, fa, 100 * KIB, 4 * KIB, 8);
	WRITE_OK(b, fo, 0, 4 * KIB, 9);
	WRITE_OK(b, fa, 104 * KIB, 4 * KIB, 8);
	EXPECT_EQ(t_val(t_ctr.coalesced), k + 1);
	EXPECT_EQ(t_val(t_ctr.entries_filled), 8);
	t_finish(b);
}

/*
 * A large write's pool buffer keeps it where it arrived (4 KiB into the
 * buffer, as an adopted receive buffer): a small write joins behind it only
 * within the buffer, else it gets a pool buffer of its own.  (Run under
 * AddressSanitizer, make test: a copy past a buffer's end fails it.)
 */
static void test_small_writes_pack_behind_a_large_one_within_its_buffer(void)
{
	struct bf_buf *b = t_buffer(2 * MIB, 0, 2);
	struct fc_inode *i = t_inode("pack", 0, 0);
	struct fc_file *f = t_open(b, i, O_WRONLY);
	size_t room = fc_rbuf_size() - 4096 - 512 * KIB;
	uint64_t at = 512 * KIB + room + 8 * KIB;	/* after the first three */

	WRITE_OK(b, f, 0, 512 * KIB, 1);
	WRITE_OK(b, f, 512 * KIB, room + 4096, 2);	/* more than the room */
	WRITE_OK(b, f, 512 * KIB + room + 4096, 4 * KIB, 3);
	WRITE_OK(b, f, at, 512 * KIB, 4);
	WRITE_OK(b, f, at + 512 * KIB, room, 5);	/* exactly the room */
	EXPECT_EQ(t_val(t_ctr.entries_filled), 1);
	EXPECT_EQ(bf_buf_fsync(f, 0), 0);
	EXPECT_EQ(t_pwrites(), 1);
	NATIVE(i, 0, 512 * KIB, 1);
	NATIVE(i, 512 * KIB, room + 4096, 2);
	NATIVE(i, 512 * KIB + room + 4096, 4 * KIB, 3);
	NATIVE(i, at, 512 * KIB, 4);
	NATIVE(i, at + 512 * KIB, room, 5);
	t_finish(b);
}

/* ---- reads and stat ------------------------------------------------------ */

static void test_reads_lay_the_buffer_over_the_native_file(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 4);
	struct fc_inode *i = t_inode("r", 16 * KIB, 1);
	struct fc_file *f = t_open(b, i, O_RDWR);

	READ(f, 0, 16 * KIB, 16 * KIB, 1, 1, 1, 1);
	EXPECT_EQ(t_val(t_ctr.reads_from_buffer), 0);
	WRITE_OK(b, f, 4 * KIB, 4 * KIB, 2);
	WRITE_OK(b, f, 20 * KIB, 4 * KIB, 3);	/* past the end, a hole */
	EXPECT_EQ(t_stat_size(i), 24 * KIB);
	READ(f, 0, 32 * KIB, 24 * KIB, 1, 2, 1, 1, -1, 3);
	READ(f, 8 * KIB, 4 * KIB, 4 * KIB, 1);
	READ(f, 32 * KIB, 4 * KIB, 0, -1);
	EXPECT_EQ(t_val(t_ctr.reads_from_buffer), 3);
	EXPECT_EQ(t_pwrites(), 0);		/* reads flush nothing */
	EXPECT_EQ(t_native_size(i), 16 * KIB);
	EXPECT_EQ(bf_buf_fsync(f, 0), 0);
	NATIVE(i, 16 * KIB, 4 * KIB, -1);
	NATIVE(i, 20 * KIB, 4 * KIB, 3);
	WRITE_OK(b, f, 0, 4 * KIB, 4);		/* inside: the size stays */
	EXPECT_EQ(t_stat_size(i), 24 * KIB);
	READ(f, 0, 8 * KIB, 8 * KIB, 4, 2);
	t_finish(b);
}

/* ---- writing out ---------------------------------------------------------- */

static void test_fsync_close_truncate_and_times_write_a_file_out(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 4);
	struct fc_inode *i = t_inode("w", 0, 0);
	struct fc_file *fw = t_open(b, i, O_WRONLY);
	struct fc_file *fr = t_open(b, i, O_RDONLY);
	struct stat attr = { 0 };

	WRITE_OK(b, fw, 0, 4 * KIB, 1);
	EXPECT_EQ(bf_buf_close(fr), 0);	/* read-only: waits for nothing */
	EXPECT_EQ(bf_buf_release(fr), 0);
	EXPECT_EQ(t_pwrites(), 0);
	EXPECT_EQ(bf_buf_close(fw), 0);
	EXPECT_EQ(FLUSHED(CLOSE), 1);
	NATIVE(i, 0, 4 * KIB, 1);
	WRITE_OK(b, fw, 4 * KIB, 4 * KIB, 2);
	EXPECT_EQ(bf_buf_fsync(fw, 1), 0);
	EXPECT_EQ(FLUSHED(FSYNC), 1);
	NATIVE(i, 4 * KIB, 4 * KIB, 2);
	WRITE_OK(b, fw, 8 * KIB, 4 * KIB, 3);
	bf_buf_setattr(i, fw, &attr, FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID);
	EXPECT_EQ(t_pwrites(), 2);		/* chmod, chown: nothing */
	bf_buf_setattr(i, NULL, &attr, FUSE_SET_ATTR_MTIME);
	EXPECT_EQ(FLUSHED(METADATA), 1);
	WRITE_OK(b, fw, 12 * KIB, 4 * KIB, 4);
	bf_buf_setattr(i, fw, &attr, FUSE_SET_ATTR_SIZE);
	EXPECT_EQ(FLUSHED(TRUNCATE), 1);
	WRITE_OK(b, fw, 16 * KIB, 4 * KIB, 5);
	bf_buf_sync_inode(i, FC_CAUSE_TRUNCATE);	/* open(O_TRUNC) */
	EXPECT_EQ(FLUSHED(TRUNCATE), 2);
	WRITE_OK(b, fw, 20 * KIB, 4 * KIB, 6);
	EXPECT_EQ(bf_buf_release(fw), 0);
	EXPECT_EQ(FLUSHED(CLOSE), 2);
	EXPECT_EQ(t_pwrites(), 6);
	EXPECT_EQ(FLUSHED(TIMER) + FLUSHED(FULL), 0);
	NATIVE(i, 8 * KIB, 4 * KIB, 3);
	NATIVE(i, 12 * KIB, 4 * KIB, 4);
	NATIVE(i, 16 * KIB, 4 * KIB, 5);
	NATIVE(i, 20 * KIB, 4 * KIB, 6);
	t_finish(b);
}

static void test_unbuffered_writes_land_after_the_entries(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 4);
	struct fc_inode *i = t_inode("d", 0, 0), *n = t_inode("n", 0, 0);
	struct fc_file *f = t_open(b, i, O_RDWR);
	struct fc_file *fn = t_open(NULL, n, O_RDWR);	/* no buffer then */

	EXPECT(!bf_buf_takes(b, f, 0));
	EXPECT(bf_buf_takes(b, f, 64 * KIB));
	EXPECT(!bf_buf_takes(b, f, 64 * KIB + 1));
	EXPECT(!bf_buf_takes(b, fn, 4 * KIB));
	WRITE_OK(b, f, 0, 8 * KIB, 1);
	WRITE_OK(b, f, 4 * KIB, 128 * KIB, 2);	/* larger than an entry */
	EXPECT_EQ(t_val(t_ctr.direct), 1);
	EXPECT_EQ(FLUSHED(OVERLAP), 1);
	EXPECT_EQ(t_pwrites(), 2);
	NATIVE(i, 0, 4 * KIB, 1);
	NATIVE(i, 4 * KIB, 128 * KIB, 2);
	EXPECT_EQ(bf_buf_fsync(fn, 0), 0);
	EXPECT_EQ(bf_buf_close(fn), 0);
	t_finish(b);

	/* with 2 MiB entries a write must also fit one pool buffer */
	b = t_buffer(2 * MIB, 0, 2);
	i = t_inode("p", 0, 0);
	f = t_open(b, i, O_RDWR);
	EXPECT_EQ(bf_buf_own_min(b), fc_rbuf_size() / 2);
	EXPECT(bf_buf_takes(b, f, 512 * KIB));
	EXPECT(!bf_buf_takes(b, f, fc_rbuf_size() + 1));
	t_finish(b);
}

static void test_a_failed_write_out_reaches_the_next_fsync_or_close(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 4);
	struct fc_inode *full = t_inode_at("/dev/full"), *ok = t_inode("ok", 0, 0);
	struct fc_file *fw = t_open(b, full, O_WRONLY);
	struct fc_file *fr = t_open(b, full, O_RDONLY);
	struct fc_file *fo = t_open(b, ok, O_WRONLY);

	WRITE_OK(b, fw, 0, 4 * KIB, 1);		/* accepted */
	WRITE_OK(b, fo, 0, 4 * KIB, 2);
	t_now += FLUSH_MS * MS;
	fprintf(stderr, "test_bf_buf: two deferred ENOSPC errors follow\n");
	EXPECT_EQ(bf_buf_flush_due(b), 2);
	EXPECT_EQ(t_val(t_ctr.deferred_errors), 1);
	/* later writes of the file go straight to it, and fail there */
	EXPECT_EQ(t_write(b, fw, 4 * KIB, 4 * KIB, 3), -ENOSPC);
	EXPECT_EQ(t_val(t_ctr.direct), 1);
	EXPECT_EQ(bf_buf_close(fr), 0);		/* not to a read-only close */
	EXPECT_EQ(bf_buf_release(fw), 0);	/* kept for the next one */
	EXPECT_EQ(bf_buf_fsync(fo, 0), 0);	/* nor to another file */
	EXPECT_EQ(bf_buf_fsync(fw, 0), -ENOSPC);
	EXPECT_EQ(t_val(t_ctr.errors_reported), 1);
	EXPECT_EQ(bf_buf_fsync(fw, 0), 0);	/* once */
	WRITE_OK(b, fw, 8 * KIB, 4 * KIB, 4);	/* buffered again */
	EXPECT_EQ(t_val(t_ctr.buffered), 3);
	EXPECT_EQ(bf_buf_close(fw), -ENOSPC);	/* its own write-out failed */
	EXPECT_EQ(t_val(t_ctr.deferred_errors), 2);
	EXPECT_EQ(t_val(t_ctr.errors_reported), 2);
	NATIVE(ok, 0, 4 * KIB, 2);
	t_finish(b);
}

static void test_the_timer_writes_idle_and_old_entries(void)
{
	struct bf_buf *b = t_buffer(2 * MIB, 1 * MIB, 4);
	struct fc_inode *i = t_inode("t", 0, 0);
	struct fc_file *f = t_open(b, i, O_WRONLY);
	unsigned int k;

	WRITE_OK(b, f, 0, 4 * KIB, 1);
	t_now += FLUSH_MS * MS - 1;
	EXPECT_EQ(bf_buf_flush_due(b), 0);
	t_now += 1;				/* idle for flush_ms */
	EXPECT_EQ(bf_buf_flush_due(b), 1);
	EXPECT_EQ(t_native_size(i), 4 * KIB);
	/* written to every half period, an entry leaves at 100 periods */
	for (k = 0; k < 200; k++) {
		WRITE_OK(b, f, (k + 1) * 4 * KIB, 4 * KIB, 2);
		EXPECT_EQ(bf_buf_flush_due(b), 0);
		t_now += FLUSH_MS * MS / 2;
	}
	EXPECT_EQ(bf_buf_flush_due(b), 1);
	EXPECT_EQ(FLUSHED(TIMER), 2);
	EXPECT_EQ(t_val(t_ctr.entries_filled), 2);
	EXPECT_EQ(t_native_size(i), 804 * KIB);
	NATIVE(i, 4 * KIB, 800 * KIB, 2);
	t_finish(b);
}

static void test_a_full_buffer_seals_the_oldest_and_waits(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 2);
	struct fc_inode *a = t_inode("fa", 0, 0), *o = t_inode("fb", 0, 0);
	struct fc_inode *c = t_inode("fc", 0, 0);
	struct fc_file *fa = t_open(b, a, O_WRONLY), *fo = t_open(b, o, O_WRONLY);
	struct fc_file *fc = t_open(b, c, O_WRONLY);

	EXPECT_EQ(bf_buf_start(b), 0);
	WRITE_OK(b, fa, 0, 4 * KIB, 1);
	WRITE_OK(b, fo, 0, 4 * KIB, 2);
	WRITE_OK(b, fc, 0, 4 * KIB, 3);	/* waits for a's entry to go */
	EXPECT(t_val(t_ctr.full_waits) >= 1);
	EXPECT_EQ(FLUSHED(FULL), 1);
	EXPECT_EQ(t_val(t_ctr.hwm_entries), 2);
	NATIVE(a, 0, 4 * KIB, 1);
	EXPECT_EQ(t_native_size(o) + t_native_size(c), 0);
	bf_buf_stop(b);				/* unmount: the rest */
	EXPECT_EQ(FLUSHED(UNMOUNT), 2);
	NATIVE(o, 0, 4 * KIB, 2);
	NATIVE(c, 0, 4 * KIB, 3);
	WRITE_OK(b, fa, 4 * KIB, 4 * KIB, 4);	/* stopped: straight through */
	EXPECT_EQ(t_val(t_ctr.direct), 1);
	NATIVE(a, 4 * KIB, 4 * KIB, 4);
	t_finish(b);
}

static void test_entries_keep_their_file_across_rename_and_unlink(void)
{
	struct bf_buf *b = t_buffer(64 * KIB, 0, 4);
	struct fc_inode *r = t_inode("before", 0, 0), *u = t_inode("gone", 0, 0);
	struct fc_file *fr = t_open(b, r, O_WRONLY), *fu = t_open(b, u, O_WRONLY);
	char from[PATH_MAX + 8], to[PATH_MAX + 8];

	WRITE_OK(b, fr, 0, 4 * KIB, 1);
	WRITE_OK(b, fu, 0, 4 * KIB, 2);
	EXPECT_EQ(atomic_load(&fr->refs), 2);	/* the test's, the entry's */
	t_drop(fu);				/* closed, then unlinked */
	snprintf(from, sizeof(from), "%s/gone", t_dir);
	EXPECT_EQ(unlink(from), 0);
	snprintf(from, sizeof(from), "%s/before", t_dir);
	snprintf(to, sizeof(to), "%s/after", t_dir);
	EXPECT_EQ(rename(from, to), 0);
	t_now += FLUSH_MS * MS;
	EXPECT_EQ(bf_buf_flush_due(b), 2);
	EXPECT_EQ(atomic_load(&fr->refs), 1);
	NATIVE(r, 0, 4 * KIB, 1);		/* found by its fd: "after" */
	EXPECT_EQ(t_native_size(u), 4 * KIB);
	t_finish(b);
}

int main(void)
{
	t_setup("test_bf_buf");
	test_entries_are_cut_at_the_phase(1 * MIB);
	test_entries_are_cut_at_the_phase(0);
	test_a_write_across_the_cut_is_kept_whole();
	test_only_the_newest_entry_of_a_file_grows();
	test_small_writes_pack_behind_a_large_one_within_its_buffer();
	test_reads_lay_the_buffer_over_the_native_file();
	test_fsync_close_truncate_and_times_write_a_file_out();
	test_unbuffered_writes_land_after_the_entries();
	test_a_failed_write_out_reaches_the_next_fsync_or_close();
	test_the_timer_writes_idle_and_old_entries();
	test_a_full_buffer_seals_the_oldest_and_waits();
	test_entries_keep_their_file_across_rename_and_unlink();
	t_teardown("test_bf_buf");
	return 0;
}
