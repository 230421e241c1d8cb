/* Strict number parsing. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "num.h"
#include "unit.h"

static void
test_u64(void)
{
	uint64_t v = 7;

	CHECK(ovl_num_u64("0", &v) == 0 && v == 0);
	CHECK(ovl_num_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
	CHECK(ovl_num_u64("18446744073709551616", &v) == -1 && errno == ERANGE);
	CHECK(ovl_num_u64("", &v) == -1 && errno == EINVAL);
	CHECK(ovl_num_u64(" 1", &v) == -1);
	CHECK(ovl_num_u64("1 ", &v) == -1);
	CHECK(ovl_num_u64("-1", &v) == -1);
	CHECK(ovl_num_u64("+1", &v) == -1);
	CHECK(ovl_num_u64("0x10", &v) == -1);
	CHECK(ovl_num_u64_max("11", 10, &v) == -1 && errno == ERANGE);
}

static void
test_i64(void)
{
	int64_t v;

	CHECK(ovl_num_i64("-9223372036854775808", &v) == 0 && v == INT64_MIN);
	CHECK(ovl_num_i64("9223372036854775807", &v) == 0 && v == INT64_MAX);
	CHECK(ovl_num_i64("9223372036854775808", &v) == -1);
	CHECK(ovl_num_i64("--1", &v) == -1);
}

static void
test_size(void)
{
	uint64_t v;

	CHECK(ovl_num_size("2M", &v) == 0 && v == 2000000);
	CHECK(ovl_num_size("4k", &v) == 0 && v == 4000);
	CHECK(ovl_num_size("1Ki", &v) == 0 && v == 1024);
	CHECK(ovl_num_size("1.5G", &v) == 0 && v == 1500000000);
	CHECK(ovl_num_size("1.5", &v) == -1);
	CHECK(ovl_num_size("3X", &v) == -1);
	CHECK(ovl_num_size("M", &v) == -1);
	CHECK(ovl_num_size("1MB", &v) == -1);
	CHECK(ovl_num_size("20000000T", &v) == -1 && errno == ERANGE);
}

static void
test_double(void)
{
	double d;

	CHECK(ovl_num_double("0.25", &d) == 0 && d == 0.25);
	CHECK(ovl_num_double("-1e3", &d) == 0 && d == -1000);
	CHECK(ovl_num_double("nan", &d) == -1);
	CHECK(ovl_num_double("inf", &d) == -1);
	CHECK(ovl_num_double("1e999", &d) == -1);
	CHECK(ovl_num_double("0x1p3", &d) == -1);
	CHECK(ovl_num_double("1.0.0", &d) == -1);
}

static void
test_range_part(void)
{
	uint64_t a, b;
	uint32_t p, n;

	CHECK(ovl_num_range("3-7", &a, &b) == 0 && a == 3 && b == 7);
	CHECK(ovl_num_range("7-3", &a, &b) == -1);
	CHECK(ovl_num_range("3-", &a, &b) == -1);
	CHECK(ovl_num_part("1/2", &p, &n) == 0 && p == 1 && n == 2);
	CHECK(ovl_num_part("2/2", &p, &n) == -1);
	CHECK(ovl_num_part("0/0", &p, &n) == -1);
}

int
main(void)
{
	RUN(test_u64);
	RUN(test_i64);
	RUN(test_size);
	RUN(test_double);
	RUN(test_range_part);
	UNIT_DONE();
}
