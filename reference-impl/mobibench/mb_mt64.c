/*
 * mb_mt64.c - MT19937-64, written from the published algorithm
 * (M. Matsumoto, T. Nishimura, "Mersenne Twister: a 623-dimensionally
 * equidistributed uniform pseudorandom number generator", 1998, and the
 * 64-bit variant of 2004).
 *
 * Parameters: degree 312, middle word 156, twist matrix 0xB5026F5AA96619E9,
 * tempering (29, 0x5555..., 17, 0x71D67FFFEDA60000, 37, 0xFFF7EEE000000000,
 * 43).  The array initialisation is the reference one, so seeding with
 * {0x12345, 0x23456, 0x34567, 0x45678} yields 7266447313870364031 first.
 */
#include "mb_mt64.h"

#define MB_MT64_MM 156
#define MB_MT64_MATRIX_A 0xB5026F5AA96619E9ULL
#define MB_MT64_UPPER 0xFFFFFFFF80000000ULL	/* top 33 bits */
#define MB_MT64_LOWER 0x7FFFFFFFULL		/* least significant 31 bits */

void mb_mt64_seed(struct mb_mt64 *g, uint64_t seed)
{
	int i;

	g->mt[0] = seed;
	for (i = 1; i < MB_MT64_NN; i++)
		g->mt[i] = 6364136223846793005ULL *
			   (g->mt[i - 1] ^ (g->mt[i - 1] >> 62)) + (uint64_t)i;
	g->mti = MB_MT64_NN;
}

void mb_mt64_seed_array(struct mb_mt64 *g, const uint64_t *key, size_t len)
{
	size_t i = 1, j = 0, k;

	mb_mt64_seed(g, 19650218ULL);
	k = len > MB_MT64_NN ? len : MB_MT64_NN;
	for (; k; k--) {
		g->mt[i] = (g->mt[i] ^ ((g->mt[i - 1] ^ (g->mt[i - 1] >> 62)) *
					3935559000370003845ULL)) +
			   key[j] + j;
		i++;
		j++;
		if (i >= MB_MT64_NN) {
			g->mt[0] = g->mt[MB_MT64_NN - 1];
			i = 1;
		}
		if (j >= len)
			j = 0;
	}
	for (k = MB_MT64_NN - 1; k; k--) {
		g->mt[i] = (g->mt[i] ^ ((g->mt[i - 1] ^ (g->mt[i - 1] >> 62)) *
					2862933555777941757ULL)) - i;
		i++;
		if (i >= MB_MT64_NN) {
			g->mt[0] = g->mt[MB_MT64_NN - 1];
			i = 1;
		}
	}
	g->mt[0] = 1ULL << 63;	/* non-zero initial array is assured */
}

static uint64_t mb_mt64_twist(uint64_t hi, uint64_t lo, uint64_t far)
{
	uint64_t x = (hi & MB_MT64_UPPER) | (lo & MB_MT64_LOWER);

	return far ^ (x >> 1) ^ ((x & 1) ? MB_MT64_MATRIX_A : 0);
}

static void mb_mt64_refill(struct mb_mt64 *g)
{
	int i;

	for (i = 0; i < MB_MT64_NN - MB_MT64_MM; i++)
		g->mt[i] = mb_mt64_twist(g->mt[i], g->mt[i + 1],
					 g->mt[i + MB_MT64_MM]);
	for (; i < MB_MT64_NN - 1; i++)
		g->mt[i] = mb_mt64_twist(g->mt[i], g->mt[i + 1],
					 g->mt[i + MB_MT64_MM - MB_MT64_NN]);
	g->mt[MB_MT64_NN - 1] = mb_mt64_twist(g->mt[MB_MT64_NN - 1], g->mt[0],
					      g->mt[MB_MT64_MM - 1]);
	g->mti = 0;
}

uint64_t mb_mt64_next(struct mb_mt64 *g)
{
	uint64_t x;

	if (g->mti >= MB_MT64_NN) {
		if (g->mti == MB_MT64_NN + 1)	/* never seeded */
			mb_mt64_seed(g, 5489ULL);
		mb_mt64_refill(g);
	}
	x = g->mt[g->mti++];
	x ^= (x >> 29) & 0x5555555555555555ULL;
	x ^= (x << 17) & 0x71D67FFFEDA60000ULL;
	x ^= (x << 37) & 0xFFF7EEE000000000ULL;
	x ^= x >> 43;
	return x;
}
