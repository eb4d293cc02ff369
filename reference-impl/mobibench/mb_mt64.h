/*
 * mb_mt64.h - 64-bit Mersenne Twister (MT19937-64) for the mobibench
 * random-order workloads.
 *
 * Mobibench seeds MT19937-64 with init_by_array64() and draws with
 * genrand64_int64(); offsets of the random modes depend on the exact
 * sequence, so this is the reference algorithm of Matsumoto and Nishimura
 * (2004).  The state is a value, not a global: each worker thread owns one.
 */
#ifndef MB_MT64_H
#define MB_MT64_H

#include <stddef.h>
#include <stdint.h>

#define MB_MT64_NN 312

struct mb_mt64 {
	uint64_t mt[MB_MT64_NN];
	int mti;
};

void mb_mt64_seed(struct mb_mt64 *g, uint64_t seed);
void mb_mt64_seed_array(struct mb_mt64 *g, const uint64_t *key, size_t len);
uint64_t mb_mt64_next(struct mb_mt64 *g);

#endif
