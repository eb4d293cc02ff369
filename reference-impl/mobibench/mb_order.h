/*
 * mb_order.h - the record order of the random-access modes.
 */
#ifndef MB_ORDER_H
#define MB_ORDER_H

#include <stdint.h>

/*
 * Fill perm[0..n) with Mobibench's seeded record order.  overlap_pct > 0
 * makes that share of records repeats (and as many records never visited).
 * Returns 0, or -1 if memory ran out.
 */
int mb_order_fill(int64_t *perm, int64_t n, int overlap_pct);

#endif
