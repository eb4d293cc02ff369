/*
 * test_fj: the few assertion macros of Fjord's C unit tests. A failed check
 * prints file:line and the expression and exits 1.
 */
#ifndef TEST_FJ_H
#define TEST_FJ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tfj_checks;

#define CHECK(cond)                                                         \
	do {                                                                \
		tfj_checks++;                                               \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",        \
				__FILE__, __LINE__, #cond);                 \
			exit(1);                                            \
		}                                                           \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		unsigned long long _a = (a), _b = (b);                      \
		tfj_checks++;                                               \
		if (_a != _b) {                                             \
			fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", \
				__FILE__, __LINE__, #a, #b, _a, _b);        \
			exit(1);                                            \
		}                                                           \
	} while (0)

#define TEST_DONE(name)                                                     \
	printf("%s: %d checks passed\n", name, tfj_checks)

#endif
