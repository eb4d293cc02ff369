/* SPDX-License-Identifier: MIT */
/*
 * test_bf: the harness of the write buffer's unit tests (test_bf_buf.c,
 * test_bf_model.c).  A test makes a buffer whose clock is t_now and whose
 * counters are t_ctr, real files in a temporary directory opened as
 * fusecore opens them, writes patterns into them as bfuse.c's write hook
 * does, and checks the native files, reads through the buffer, stat sizes
 * and counters.  t_finish unmounts the buffer and closes everything.
 *
 * Pattern: byte at file offset off of a write made with seed k is
 * t_byte(off, k); seed -1 stands for zeros.  A failed check prints
 * file:line and both values, and exits 1.
 */
#ifndef TEST_BF_H
#define TEST_BF_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bf_buf.h"
#include "fc_internal.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define FLUSH_MS 10ULL		/* every test buffer's flush_ms */
#define MS 1000000ULL

extern unsigned int t_checks;
extern _Atomic uint64_t t_now;	/* the buffer's clock, ns */
extern struct bf_counters t_ctr;
extern char t_dir[];

void t_fail_eq(const char *file, int line, const char *expr, long long got,
	       long long want) __attribute__((noreturn));

#define T_CHECK_EQ(got, want, text)                                         \
	do {                                                                \
		long long g_ = (long long)(got), w_ = (long long)(want);    \
		t_checks++;                                                 \
		if (g_ != w_)                                               \
			t_fail_eq(__FILE__, __LINE__, text, g_, w_);        \
	} while (0)
#define EXPECT_EQ(got, want) T_CHECK_EQ(got, want, #got)
#define EXPECT(cond) T_CHECK_EQ(!!(cond), 1, #cond)

/* The harness's start (temporary directory, fusecore) and end. */
void t_setup(const char *name);
void t_teardown(const char *name);

uint64_t t_val(const struct fc_counter *c);
uint64_t t_pwrites(void);	/* native write calls since t_buffer */
#define FLUSHED(cause) t_val(t_ctr.flushed[FC_CAUSE_##cause])

struct bf_buf *t_buffer(uint64_t entry, uint64_t phase, unsigned int nentries);
void t_finish(struct bf_buf *b);

struct fc_inode *t_inode(const char *name, size_t len, int seed);
struct fc_inode *t_inode_at(const char *path);
struct fc_file *t_open(struct bf_buf *b, struct fc_inode *i, int flags);
void t_drop(struct fc_file *f);

unsigned char t_byte(uint64_t off, int seed);
void t_fill(unsigned char *p, uint64_t off, size_t len, int seed);
ssize_t t_write(struct bf_buf *b, struct fc_file *f, uint64_t off, size_t len,
		int seed);
long long t_native_size(struct fc_inode *i);
long long t_stat_size(struct fc_inode *i);
void t_expect_native(struct fc_inode *i, uint64_t off, size_t len, int seed,
		     int line);
void t_expect_read(struct fc_file *f, uint64_t off, size_t size,
		   size_t want_len, const int *seeds, int line);

#define WRITE_OK(b, f, off, len, seed)                                      \
	EXPECT_EQ(t_write(b, f, off, len, seed), len)
#define NATIVE(i, off, len, seed) t_expect_native(i, off, len, seed, __LINE__)
/* Read [off, off + size) through the buffer: want_len bytes, seeds per 4K */
#define READ(f, off, size, want_len, ...)                                  \
	t_expect_read(f, off, size, want_len, (const int[]){ __VA_ARGS__ }, \
		      __LINE__)

#endif /* TEST_BF_H */
