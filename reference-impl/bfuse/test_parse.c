// SPDX-License-Identifier: MIT
/*
 * Unit tests of fusecore's option value parsers (sizes, durations, booleans),
 * the vocabulary every daemon option uses.  Exit status 0 = all passed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fusecore.h"

static int failures;

static void check_size(const char *s, int want_err, uint64_t want)
{
	uint64_t v = 0;
	int err = fc_parse_size(s, &v);

	if (err != want_err || (!err && v != want)) {
		printf("FAIL size '%s': err %d value %llu\n", s ? s : "(null)",
		       err, (unsigned long long)v);
		failures++;
	}
}

static void check_ms(const char *s, int want_err, uint64_t want)
{
	uint64_t v = 0;
	int err = fc_parse_duration_ms(s, &v);

	if (err != want_err || (!err && v != want)) {
		printf("FAIL duration '%s': err %d value %llu\n", s, err,
		       (unsigned long long)v);
		failures++;
	}
}

static void check_bool(const char *s, int want_err, bool want)
{
	bool v = !want;
	int err = fc_parse_bool(s, &v);

	if (err != want_err || (!err && v != want)) {
		printf("FAIL bool '%s': err %d value %d\n", s ? s : "(null)",
		       err, v);
		failures++;
	}
}

int main(void)
{
	check_size("4096", 0, 4096);
	check_size("4k", 0, 4096);
	check_size("512K", 0, 512 << 10);
	check_size("8M", 0, 8 << 20);
	check_size("2MiB", 0, 2 << 20);
	check_size("1G", 0, 1ULL << 30);
	check_size("0", 0, 0);
	check_size("", -EINVAL, 0);
	check_size("k", -EINVAL, 0);
	check_size("4x", -EINVAL, 0);
	check_size("-4k", -EINVAL, 0);
	check_size("4kk", -EINVAL, 0);
	check_size("99999999999999999999", -EINVAL, 0);
	check_size(NULL, -EINVAL, 0);
	check_ms("10ms", 0, 10);
	check_ms("10", 0, 10);
	check_ms("2s", 0, 2000);
	check_ms("1500us", 0, 1);
	check_ms("ten", -EINVAL, 0);
	check_ms("10h", -EINVAL, 0);
	check_bool("1", 0, true);
	check_bool("yes", 0, true);
	check_bool("OFF", 0, false);
	check_bool("0", 0, false);
	check_bool(NULL, 0, true);
	check_bool("maybe", -EINVAL, false);
	if (failures) {
		printf("test_parse: %d failures\n", failures);
		return 1;
	}
	printf("test_parse: all passed\n");
	return 0;
}
