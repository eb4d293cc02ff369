// SPDX-License-Identifier: MIT
/*
 * fusecore option value parsers: sizes (4096, 4k, 512K, 8M, 1G), durations
 * (10ms, 2s, 500us, bare number = ms) and booleans, with the project's one
 * option vocabulary.  Anything else is -EINVAL: the caller prints the error.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fusecore.h"

int fc_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t mult = 1;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end) {
		switch (tolower((unsigned char)*end)) {
		case 'k': mult = 1ULL << 10; break;
		case 'm': mult = 1ULL << 20; break;
		case 'g': mult = 1ULL << 30; break;
		default: return -EINVAL;
		}
		end++;
		/* accept 4k, 4kb, 4KiB */
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mult)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

int fc_parse_duration_ms(const char *s, uint64_t *out_ms)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || v > UINT32_MAX)
		return -EINVAL;
	if (!*end || !strcmp(end, "ms"))
		*out_ms = v;
	else if (!strcmp(end, "s"))
		*out_ms = v * 1000;
	else if (!strcmp(end, "us"))
		*out_ms = v / 1000;
	else
		return -EINVAL;
	return 0;
}

int fc_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "", "1", "yes", "on", "true" };
	static const char *const no[] = { "0", "no", "off", "false" };
	size_t i;

	if (!s) {
		*out = true;
		return 0;
	}
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	return -EINVAL;
}
