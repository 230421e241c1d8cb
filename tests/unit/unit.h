/*
 * unit.h: a tiny TAP producer for the C unit tests. Each TEST is one TAP
 * line; scripts/run-tests counts them with the bats results.
 */
#ifndef OVL_UNIT_H
#define OVL_UNIT_H

#include <stdio.h>
#include <stdlib.h>

static int unit_n, unit_failed, unit_cur_failed;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		printf("# %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		unit_cur_failed = 1;					\
	}								\
} while (0)

#define RUN(fn) do {							\
	unit_cur_failed = 0;						\
	fn();								\
	unit_n++;							\
	printf("%sok %d - %s\n", unit_cur_failed ? "not " : "", unit_n, #fn); \
	fflush(stdout);							\
	if (unit_cur_failed)						\
		unit_failed++;						\
} while (0)

#define UNIT_DONE() do {						\
	printf("1..%d\n", unit_n);					\
	return unit_failed != 0;					\
} while (0)

#endif
