// SPDX-License-Identifier: MIT
/*
 * test_bf: the harness of the write buffer's unit tests (see test_bf.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>

#include "test_bf.h"

unsigned int t_checks;

void t_fail_eq(const char *file, int line, const char *expr, long long got,
	       long long want)
{
	fprintf(stderr, "%s:%d: %s: got %lld, want %lld\n", file, line, expr,
		got, want);
	exit(1);
}

/* ---- the buffer under test, its clock and counters --------------------- */

char t_dir[PATH_MAX];

/* What a test opened, released by t_finish. */
static struct fc_inode *t_inodes[8];
static struct fc_file *t_files[8];
static unsigned int t_ninodes, t_nfiles;

_Atomic uint64_t t_now;	/* read by the management thread too */
static uint64_t t_clock(void)
{
	return atomic_load(&t_now);
}

static struct fc_counter t_store[10 + FC_CAUSE_COUNT];
struct bf_counters t_ctr;
static uint64_t t_pwrite_base;

uint64_t t_val(const struct fc_counter *c)
{
	return atomic_load(&c->value);
}

/* Native writes (pwrite/pwritev calls) since the buffer was made. */
uint64_t t_pwrites(void)
{
	return t_val(fc_c_pwrite_calls) - t_pwrite_base;
}

struct bf_buf *t_buffer(uint64_t entry, uint64_t phase, unsigned int nentries)
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
struct fc_inode *t_inode_at(const char *path)
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
struct fc_file *t_open(struct bf_buf *b, struct fc_inode *i, int flags)
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
void t_drop(struct fc_file *f)
{
	unsigned int k;

	for (k = 0; k < t_nfiles; k++)
		if (t_files[k] == f)
			t_files[k] = NULL;
	fc_file_put(f);
}

/* Unmount the buffer, close and forget everything the test opened. */
void t_finish(struct bf_buf *b)
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
unsigned char t_byte(uint64_t off, int seed)
{
	return (unsigned char)(seed * 131 + off * 7 + off / 4096 + 1);
}

void t_fill(unsigned char *p, uint64_t off, size_t len, int seed)
{
	size_t k;

	for (k = 0; k < len; k++)
		p[k] = t_byte(off + k, seed);
}

/* A regular file in the test directory holding len bytes of seed. */
struct fc_inode *t_inode(const char *name, size_t len, int seed)
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
long long t_native_size(struct fc_inode *i)
{
	struct stat st;

	EXPECT_EQ(fstatat(i->fd, "", &st, AT_EMPTY_PATH), 0);
	return st.st_size;
}

/* Do the native bytes [off, off + len) of i follow seed's pattern? */
void t_expect_native(struct fc_inode *i, uint64_t off, size_t len, int seed,
		     int line)
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
ssize_t t_write(struct bf_buf *b, struct fc_file *f, uint64_t off, size_t len,
		int seed)
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

/* Read [off, off + size) through the buffer; expect seeds[k] per 4 KiB. */
void t_expect_read(struct fc_file *f, uint64_t off, size_t size,
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

/* st_size as the getattr hook reports it. */
long long t_stat_size(struct fc_inode *i)
{
	struct stat st = { 0 };

	bf_buf_getattr(i, &st);
	return st.st_size;
}

/* At exit, passed or failed: remove the test directory and its files. */
static void t_remove_dir(void)
{
	DIR *d = opendir(t_dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	if (rmdir(t_dir))
		fprintf(stderr, "cannot remove %s: %s\n", t_dir, strerror(errno));
}

void t_setup(const char *name)
{
	static struct fc_policy policy;
	const char *tmp = getenv("TMPDIR");

	policy.name = name;		/* fc_log's prefix */
	fc_pol = &policy;
	fc_cfg.io_unit = 512 << 10;	/* the bfuse preset: 520 KiB buffers */
	fc_counters_init();
	snprintf(t_dir, PATH_MAX, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp",
		 name);
	EXPECT(mkdtemp(t_dir) != NULL);
	atexit(t_remove_dir);
}

void t_teardown(const char *name)
{
	printf("%s: %u checks passed\n", name, t_checks);
}
