// SPDX-License-Identifier: MIT
/*
 * Unit tests of bFUSE's write buffer (bf_buf.c), without a FUSE mount: each
 * test makes a buffer and real files in a temporary directory, drives the
 * buffer as bfuse.c's hooks do, and checks what reached the native files
 * (bytes, sizes, the core's count of native writes) and the counters.  The
 * buffer's clock is the test's, so timer rules are exact; the management
 * thread runs only where a test says so.
 *
 * One test per rule of bf_buf.c's purpose block, and a randomised run of
 * every operation against a flat model of the files.  Exit status 0 = all
 * passed; a failed check prints file:line and both values, and exits 1.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bf_buf.h"
#include "fc_internal.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define FLUSH_MS 10ULL
#define MS 1000000ULL

static unsigned int t_checks;

static void t_fail_eq(const char *file, int line, const char *expr,
		      long long got, long long want)
{
	fprintf(stderr, "%s:%d: %s: got %lld, want %lld\n", file, line, expr,
		got, want);
	exit(1);
}

#define EXPECT_EQ(got, want)                                                \
	do {                                                                \
		long long g_ = (long long)(got), w_ = (long long)(want);    \
		t_checks++;                                                 \
		if (g_ != w_)                                               \
			t_fail_eq(__FILE__, __LINE__, #got, g_, w_);        \
	} while (0)
#define EXPECT(cond) EXPECT_EQ(!!(cond), 1)

/* ---- the buffer under test, its clock and counters --------------------- */

static char t_dir[PATH_MAX];

/* What a test opened, released by t_finish. */
static struct fc_inode *t_inodes[8];
static struct fc_file *t_files[8];
static unsigned int t_ninodes, t_nfiles;

static _Atomic uint64_t t_now;	/* read by the management thread too */
static uint64_t t_clock(void)
{
	return atomic_load(&t_now);
}

static struct fc_counter t_store[10 + FC_CAUSE_COUNT];
static struct bf_counters t_ctr;
static uint64_t t_pwrite_base;

static uint64_t t_val(const struct fc_counter *c)
{
	return atomic_load(&c->value);
}

/* Native writes (pwrite/pwritev calls) since the buffer was made. */
static uint64_t t_pwrites(void)
{
	return t_val(fc_c_pwrite_calls) - t_pwrite_base;
}

static struct bf_buf *t_buffer(uint64_t entry, uint64_t phase,
			       unsigned int nentries)
{
	struct bf_buf_params p = {
		.entry_size = entry, .entry_phase = phase,
		.nentries = nentries, .flush_ms = FLUSH_MS, .clock = t_clock,
	};
	struct fc_counter **slots[] = {
		&t_ctr.buffered, &t_ctr.direct, &t_ctr.coalesced,
		&t_ctr.entries_filled, &t_ctr.full_waits, &t_ctr.hwm_bytes,
		&t_ctr.hwm_entries, &t_ctr.deferred_errors,
		&t_ctr.errors_reported, &t_ctr.reads_from_buffer,
	};
	struct bf_buf *b;
	unsigned int k;

	memset(t_store, 0, sizeof(t_store));
	for (k = 0; k < 10; k++)
		*slots[k] = &t_store[k];
	for (k = 0; k < FC_CAUSE_COUNT; k++)
		t_ctr.flushed[k] = &t_store[10 + k];
	EXPECT(!t_nfiles && !t_ninodes);	/* the last test finished */
	t_now = 1000 * MS;
	t_pwrite_base = t_val(fc_c_pwrite_calls);
	b = bf_buf_new(&p, &t_ctr);
	EXPECT(b != NULL);
	return b;
}

/* ---- files ------------------------------------------------------------- */


/* An inode as fusecore's table holds one (never forgotten in a test). */
static struct fc_inode *t_inode_at(const char *path)
{
	struct fc_inode *i = calloc(1, sizeof(*i));
	struct stat st;

	EXPECT(i != NULL);
	i->fd = open(path, O_PATH);
	EXPECT(i->fd >= 0 && fstat(i->fd, &st) == 0);
	i->src_dev = st.st_dev;
	i->src_ino = st.st_ino;
	i->is_reg = S_ISREG(st.st_mode);
	i->nlookup = 1;
	pthread_mutex_init(&i->lock, NULL);
	EXPECT(t_ninodes < 8);
	t_inodes[t_ninodes++] = i;
	return i;
}

static void t_inode_free(struct fc_inode *i)
{
	bf_buf_inode_free(i);
	close(i->fd);
	pthread_mutex_destroy(&i->lock);
	free(i);
}

/* Open i as the core does for an open() (the open hook included). */
static struct fc_file *t_open(struct bf_buf *b, struct fc_inode *i, int flags)
{
	struct fc_file *f = calloc(1, sizeof(*f));
	char path[PATH_MAX];

	EXPECT(f != NULL);
	EXPECT_EQ(fc_inode_path(i, path, sizeof(path)), 0);
	f->fd = open(path, flags);
	EXPECT(f->fd >= 0);
	f->flags = flags;
	f->inode = i;
	atomic_init(&f->refs, 1);
	fc_inode_get(i);
	EXPECT_EQ(bf_buf_open(b, f), 0);
	EXPECT(t_nfiles < 8);
	t_files[t_nfiles++] = f;
	return f;
}

/* The application's last close of f: the buffer may still hold it. */
static void t_drop(struct fc_file *f)
{
	unsigned int k;

	for (k = 0; k < t_nfiles; k++)
		if (t_files[k] == f)
			t_files[k] = NULL;
	fc_file_put(f);
}

/* Unmount the buffer, close and forget everything the test opened. */
static void t_finish(struct bf_buf *b)
{
	unsigned int k;

	bf_buf_stop(b);
	for (k = 0; k < t_nfiles; k++)
		if (t_files[k])
			fc_file_put(t_files[k]);
	for (k = 0; k < t_ninodes; k++)
		t_inode_free(t_inodes[k]);
	t_nfiles = t_ninodes = 0;
	bf_buf_free(b);
}

/* The test's pattern: byte at file offset off of a write made with seed. */
static unsigned char t_byte(uint64_t off, int seed)
{
	return (unsigned char)(seed * 131 + off * 7 + off / 4096 + 1);
}

static void t_fill(unsigned char *p, uint64_t off, size_t len, int seed)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = t_byte(off + k, seed);
}

/* A regular file in the test directory holding len bytes of seed. */
static struct fc_inode *t_inode(const char *name, size_t len, int seed)
{
	char path[PATH_MAX + 32];
	unsigned char *data = malloc(len + 1);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", t_dir, name);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	EXPECT(fd >= 0 && data != NULL);
	t_fill(data, 0, len, seed);
	EXPECT_EQ(pwrite(fd, data, len, 0), len);
	close(fd);
	free(data);
	return t_inode_at(path);
}

/* Native size of inode i (through its O_PATH fd: renames do not matter). */
static long long t_native_size(struct fc_inode *i)
{
	struct stat st;

	EXPECT_EQ(fstatat(i->fd, "", &st, AT_EMPTY_PATH), 0);
	return st.st_size;
}

/* Do the native bytes [off, off + len) of i follow seed's pattern? */
static void t_expect_native(struct fc_inode *i, uint64_t off, size_t len,
			    int seed, int line)
{
	char path[PATH_MAX];
	unsigned char *got = malloc(len), *want = malloc(len);
	int fd;

	EXPECT_EQ(fc_inode_path(i, path, sizeof(path)), 0);
	fd = open(path, O_RDONLY);
	EXPECT(fd >= 0 && got && want);
	EXPECT_EQ(pread(fd, got, len, off), len);
	if (seed < 0)
		memset(want, 0, len);
	else
		t_fill(want, off, len, seed);
	if (memcmp(got, want, len))
		t_fail_eq(__FILE__, line, "native bytes differ", 1, 0);
	t_checks++;
	close(fd);
	free(got);
	free(want);
}

/* ---- writes, as bfuse.c's write hook makes them ------------------------ */

/*
 * Write len bytes of seed's pattern at off.  A write of at least
 * bf_buf_own_min comes in a pool buffer of its own (as an adopted receive
 * buffer would); what the buffer does not keep goes back to the pool.
 */
static ssize_t t_write(struct bf_buf *b, struct fc_file *f, uint64_t off,
		       size_t len, int seed)
{
	struct bf_seg own = { 0 };
	unsigned char *tmp = NULL, *src;
	struct bf_inode *bi;
	ssize_t res;

	if (len >= bf_buf_own_min(b)) {
		own.base = fc_rbuf_alloc();
		EXPECT(own.base != NULL);
		src = (unsigned char *)own.base + 4096;	/* data on a page */
	} else {
		src = tmp = malloc(len);
		EXPECT(tmp != NULL);
	}
	t_fill(src, off, len, seed);
	if (bf_buf_takes(b, f, len)) {
		res = bf_buf_write(b, f, (const char *)src, len, off, &own);
	} else {
		fc_counter_add(t_ctr.direct, 1);
		bi = bf_buf_direct_begin(f);
		res = fc_pwrite_all(f->fd, src, len, off);
		bf_buf_direct_end(bi);
	}
	fc_rbuf_free(own.base);
	free(tmp);
	return res;
}

#define WRITE_OK(b, f, off, len, seed)                                      \
	EXPECT_EQ(t_write(b, f, off, len, seed), len)
#define NATIVE(i, off, len, seed) t_expect_native(i, off, len, seed, __LINE__)

/* Read [off, off + size) through the buffer; expect seeds[k] per 4 KiB. */
static void t_expect_read(struct fc_file *f, uint64_t off, size_t size,
			  size_t want_len, const int *seeds, int line)
{
	unsigned char *buf = malloc(size), *want = malloc(size);
	ssize_t got = bf_buf_read(f, (char *)buf, size, off);
	size_t k;

	EXPECT(buf && want);
	if (got != (ssize_t)want_len)
		t_fail_eq(__FILE__, line, "read length", got, want_len);
	for (k = 0; k < want_len; k += 4096) {
		size_t n = want_len - k < 4096 ? want_len - k : 4096;

		if (seeds[k / 4096] < 0)
			memset(want + k, 0, n);
		else
			t_fill(want + k, off + k, n, seeds[k / 4096]);
	}
	if (memcmp(buf, want, want_len))
		t_fail_eq(__FILE__, line, "read bytes differ", 1, 0);
	t_checks++;
	free(buf);
	free(want);
}

#define READ(f, off, size, want_len, ...)                                  \
	t_expect_read(f, off, size, want_len, (const int[]){ __VA_ARGS__ }, \
		      __LINE__)

static long long t_stat_size(struct fc_inode *i)
{
	struct stat st = { 0 };

	bf_buf_getattr(i, &st);
	return st.st_size;
}

#define FLUSHED(cause) t_val(t_ctr.flushed[FC_CAUSE_##cause])

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

/* ---- every operation at random, against a flat model of the files ------- */

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
	char *buf = malloc(size);

	EXPECT(buf != NULL);
	EXPECT_EQ(bf_buf_read(rf->f, buf, size, off), want);
	EXPECT(!memcmp(buf, rf->model + off, want));
	free(buf);
}

static void r_check_native(struct r_file *rf)
{
	char *buf = malloc(R_MAX);

	EXPECT(buf != NULL);
	EXPECT_EQ(t_native_size(rf->i), rf->len);
	EXPECT_EQ(pread(rf->f->fd, buf, rf->len, 0), rf->len);
	EXPECT(!memcmp(buf, rf->model, rf->len));
	free(buf);
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

/*
 * Random writes (small ones packed, large ones in pool buffers of their
 * own, some larger than an entry), reads, stats, fsyncs, timer rounds and
 * releases on three files, with the management thread running: every read
 * and stat must match the model, and so must the native files after each
 * fsync and at the end.
 */
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

static void t_run_rules(void)
{
	test_entries_are_cut_at_the_phase(1 * MIB);
	test_entries_are_cut_at_the_phase(0);
	test_a_write_across_the_cut_is_kept_whole();
	test_only_the_newest_entry_of_a_file_grows();
	test_reads_lay_the_buffer_over_the_native_file();
	test_fsync_close_truncate_and_times_write_a_file_out();
	test_unbuffered_writes_land_after_the_entries();
	test_a_failed_write_out_reaches_the_next_fsync_or_close();
	test_the_timer_writes_idle_and_old_entries();
	test_a_full_buffer_seals_the_oldest_and_waits();
	test_entries_keep_their_file_across_rename_and_unlink();
	test_random_operations_match_a_model(64 * KIB, 0, 4);
	test_random_operations_match_a_model(2 * MIB, 1 * MIB, 4);
	test_random_operations_match_a_model(256 * KIB, 128 * KIB, 3);
	test_random_operations_match_a_model(1 * MIB, 0, 1);
}

/* Remove the test directory and what the tests left in it. */
static void t_remove_dir(void)
{
	DIR *d = opendir(t_dir);
	struct dirent *de;

	EXPECT(d != NULL);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			EXPECT_EQ(unlinkat(dirfd(d), de->d_name, 0), 0);
	closedir(d);
	EXPECT_EQ(rmdir(t_dir), 0);
}

int main(void)
{
	static const struct fc_policy t_policy = { .name = "test_bf_buf" };
	const char *tmp = getenv("TMPDIR");

	fc_pol = &t_policy;
	fc_cfg.io_unit = 512 << 10;	/* the bfuse preset: 520 KiB buffers */
	fc_counters_init();
	snprintf(t_dir, sizeof(t_dir), "%s/test_bf_buf.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	EXPECT(mkdtemp(t_dir) != NULL);
	t_run_rules();
	t_remove_dir();
	printf("test_bf_buf: %u checks passed\n", t_checks);
	return 0;
}
