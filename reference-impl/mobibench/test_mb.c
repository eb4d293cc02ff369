/*
 * test_mb.c - C unit tests of mobibench's deterministic parts: the
 * MT19937-64 generator against the reference test vector of Matsumoto and
 * Nishimura, and the seeded record order (permutation and overlap).
 * Prints "N passed, N failed" and exits non-zero on any failure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "mb_mt64.h"
#include "mb_order.h"

static int tb_passed, tb_failed;

#define TB_CHECK(cond, ...)						\
	do {								\
		if (cond) {						\
			tb_passed++;					\
		} else {						\
			tb_failed++;					\
			fprintf(stderr, "FAIL %s:%d: ", __FILE__,	\
				__LINE__);				\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
		}							\
	} while (0)

/* first ten genrand64_int64() outputs of the reference mt19937-64.out */
static const uint64_t tb_vector[10] = {
	7266447313870364031ULL, 4946485549665804864ULL,
	16945909448695747420ULL, 16394063075524226720ULL,
	4873882236456199058ULL, 14877448043947020171ULL,
	6740343660852211943ULL, 13857871200353263164ULL,
	5249110015610582907ULL, 10205081126064480383ULL,
};

static void tb_mt64_reference_vector(void)
{
	static const uint64_t key[4] = { 0x12345, 0x23456, 0x34567, 0x45678 };
	struct mb_mt64 g;
	uint64_t x = 0;
	int i;

	mb_mt64_seed_array(&g, key, 4);
	for (i = 0; i < 10; i++) {
		x = mb_mt64_next(&g);
		TB_CHECK(x == tb_vector[i], "output %d: %" PRIu64 " != %" PRIu64,
			 i, x, tb_vector[i]);
	}
	/* output 1000 of the reference file, beyond the first refill */
	for (; i < 1000; i++)
		x = mb_mt64_next(&g);
	TB_CHECK(x == 994412663058993407ULL, "output 999: %" PRIu64, x);
}

static void tb_order_is_permutation(int64_t n)
{
	int64_t *perm = malloc(sizeof(*perm) * (size_t)n);
	char *seen = calloc((size_t)n, 1);
	int64_t i, bad = 0, identity = 1;

	if (!perm || !seen || mb_order_fill(perm, n, 0) != 0) {
		TB_CHECK(0, "allocation for n=%" PRId64, n);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
			bad++;
		else
			seen[perm[i]] = 1;
		if (perm[i] != i)
			identity = 0;
	}
	TB_CHECK(bad == 0, "n=%" PRId64 ": %" PRId64 " records not once", n,
		 bad);
	TB_CHECK(n < 4 || !identity, "n=%" PRId64 ": order is identity", n);
out:
	free(perm);
	free(seen);
}

static void tb_order_overlap(void)
{
	int64_t n = 256, perm[256], i, distinct = 0;
	char seen[256] = { 0 };

	TB_CHECK(mb_order_fill(perm, n, 50) == 0, "overlap fill");
	for (i = 0; i < n; i++) {
		if (!seen[perm[i]])
			distinct++;
		seen[perm[i]] = 1;
	}
	/* the spec measured 128 distinct offsets for 50 % of 256 */
	TB_CHECK(distinct == 128, "overlap 50%% of 256: %" PRId64 " distinct",
		 distinct);
}

static void tb_order_is_deterministic(void)
{
	static int64_t a[4096], b[4096];
	int64_t i, same = 1;

	mb_order_fill(a, 4096, 0);
	mb_order_fill(b, 4096, 0);
	for (i = 0; i < 4096; i++)
		if (a[i] != b[i])
			same = 0;
	TB_CHECK(same, "two fills of the same size differ");
}

int main(void)
{
	tb_mt64_reference_vector();
	tb_order_is_permutation(1);
	tb_order_is_permutation(7);
	tb_order_is_permutation(4096);
	tb_order_is_permutation(131072);
	tb_order_overlap();
	tb_order_is_deterministic();
	printf("%d passed, %d failed\n", tb_passed, tb_failed);
	return tb_failed ? 1 : 0;
}
