/*
 * fj_crc32c: table-driven CRC32C, slicing-by-8.
 *
 * The tables are built once, at first use, under pthread_once, so the
 * function may be called from any thread.
 */
#include "fj_crc32c.h"

#include <pthread.h>
#include <string.h>

#define FJ_CRC32C_POLY 0x82F63B78u

/* Written once under fj_crc_once, read-only afterwards. */
static uint32_t fj_crc_table[8][256];
static pthread_once_t fj_crc_once = PTHREAD_ONCE_INIT;

static void fj_crc_build(void)
{
	for (unsigned int i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ FJ_CRC32C_POLY : c >> 1;
		fj_crc_table[0][i] = c;
	}
	for (unsigned int i = 0; i < 256; i++) {
		uint32_t c = fj_crc_table[0][i];

		for (int t = 1; t < 8; t++) {
			c = fj_crc_table[0][c & 0xff] ^ (c >> 8);
			fj_crc_table[t][i] = c;
		}
	}
}

uint32_t fj_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&fj_crc_once, fj_crc_build);
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		lo = __builtin_bswap32(lo);
		hi = __builtin_bswap32(hi);
#endif
		lo ^= crc;
		crc = fj_crc_table[7][lo & 0xff] ^
		      fj_crc_table[6][(lo >> 8) & 0xff] ^
		      fj_crc_table[5][(lo >> 16) & 0xff] ^
		      fj_crc_table[4][lo >> 24] ^
		      fj_crc_table[3][hi & 0xff] ^
		      fj_crc_table[2][(hi >> 8) & 0xff] ^
		      fj_crc_table[1][(hi >> 16) & 0xff] ^
		      fj_crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = fj_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
