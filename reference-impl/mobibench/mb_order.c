/*
 * mb_order.c - Mobibench's record order for random reads and writes.
 *
 * The generator is MT19937-64 seeded with init_by_array64({0x12345,
 * 0x23456, 0x34567, 0x45678}).  The shuffle is Mobibench's: for every i,
 * swap element i with element (draw mod n) - not an unbiased Fisher-Yates,
 * but it is what users' published offsets came from, so it is kept.
 *
 * Overlap (-v PCT): ov = n*PCT/100 records are repeats.  After the plain
 * shuffle of perm, an identity array tmp is shuffled with the same loop,
 * perm takes tmp[0..n-ov) followed by ov draws tmp[draw mod (n-ov)], and
 * perm is shuffled once more.  With PCT = 0 only the first shuffle runs.
 */
#include <stdlib.h>

#include "mb_mt64.h"
#include "mb_order.h"

static void mb_order_shuffle(struct mb_mt64 *g, int64_t *a, int64_t n)
{
	int64_t i, j, t;

	for (i = 0; i < n; i++) {
		j = (int64_t)(mb_mt64_next(g) % (uint64_t)n);
		t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

int mb_order_fill(int64_t *perm, int64_t n, int overlap_pct)
{
	static const uint64_t key[4] = { 0x12345, 0x23456, 0x34567, 0x45678 };
	struct mb_mt64 *g;
	int64_t i, ov, other, *tmp;

	g = malloc(sizeof(*g));
	if (!g)
		return -1;
	mb_mt64_seed_array(g, key, 4);
	for (i = 0; i < n; i++)
		perm[i] = i;
	mb_order_shuffle(g, perm, n);

	ov = n * overlap_pct / 100;
	other = n - ov;
	if (overlap_pct > 0 && ov > 0 && other > 0) {
		tmp = malloc(sizeof(*tmp) * (size_t)n);
		if (!tmp) {
			free(g);
			return -1;
		}
		for (i = 0; i < n; i++)
			tmp[i] = i;
		mb_order_shuffle(g, tmp, n);
		for (i = 0; i < other; i++)
			perm[i] = tmp[i];
		for (i = 0; i < ov; i++)
			perm[other + i] =
				tmp[mb_mt64_next(g) % (uint64_t)other];
		mb_order_shuffle(g, perm, n);
		free(tmp);
	}
	free(g);
	return 0;
}
