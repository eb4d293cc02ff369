/*
 * fj_crc32c: CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of Fjord's log records. Software slicing-by-8, so the same code
 * runs on x86-64 and aarch64 phones.
 */
#ifndef FJ_CRC32C_H
#define FJ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: pass 0 to start; the result of one call feeds the next. */
uint32_t fj_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
