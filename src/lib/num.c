#include "num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
digits_u64(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return (errno = EINVAL), -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return (errno = ERANGE), -1;
		v = v * 10 + d;
	}
	*end = p;
	*out = v;
	return 0;
}

int
ovl_num_u64(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;

	if (s == NULL || digits_u64(s, &end, &v) != 0)
		return -1;
	if (*end != '\0')
		return (errno = EINVAL), -1;
	*out = v;
	return 0;
}

int
ovl_num_u64_max(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (ovl_num_u64(s, &v) != 0)
		return -1;
	if (v > max)
		return (errno = ERANGE), -1;
	*out = v;
	return 0;
}

int
ovl_num_i64(const char *s, int64_t *out)
{
	uint64_t v;
	int neg = 0;

	if (s == NULL)
		return (errno = EINVAL), -1;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (ovl_num_u64(s, &v) != 0)
		return -1;
	if ((!neg && v > (uint64_t)INT64_MAX) ||
	    (neg && v > (uint64_t)INT64_MAX + 1))
		return (errno = ERANGE), -1;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int
ovl_num_double(const char *s, double *out)
{
	char *end;
	double v;
	const char *p;

	if (s == NULL || *s == '\0')
		return (errno = EINVAL), -1;
	/* Allow only [-+]digits[.digits][e[-+]digits]: no hex, inf or nan. */
	for (p = s; *p != '\0'; p++)
		if (strchr("0123456789.eE+-", *p) == NULL)
			return (errno = EINVAL), -1;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return (errno = EINVAL), -1;
	if (errno == ERANGE || !isfinite(v))
		return (errno = ERANGE), -1;
	*out = v;
	return 0;
}

int
ovl_num_size(const char *s, uint64_t *out)
{
	char num[64];
	const char *suf;
	size_t n;
	double mult = 1, v;
	uint64_t iv;

	if (s == NULL)
		return (errno = EINVAL), -1;
	for (suf = s; (*suf >= '0' && *suf <= '9') || *suf == '.'; suf++)
		;
	n = (size_t)(suf - s);
	if (n == 0 || n >= sizeof(num))
		return (errno = EINVAL), -1;
	memcpy(num, s, n);
	num[n] = '\0';
	if (*suf != '\0') {
		static const char letters[] = "KMGT";
		const char *l = strchr(letters, *suf & ~0x20);
		int k, bin;

		if (l == NULL || *l == '\0')
			return (errno = EINVAL), -1;
		bin = suf[1] == 'i';
		if (suf[1 + bin] != '\0')
			return (errno = EINVAL), -1;
		for (k = 0; k <= l - letters; k++)
			mult *= bin ? 1024.0 : 1000.0;
	}
	if (strchr(num, '.') == NULL) {
		if (ovl_num_u64(num, &iv) != 0)
			return -1;
		if (mult != 1 && iv > (uint64_t)(18446744073709551615.0 / mult))
			return (errno = ERANGE), -1;
		*out = iv * (uint64_t)mult;
		return 0;
	}
	if (ovl_num_double(num, &v) != 0)
		return -1;
	v *= mult;
	if (v >= 18446744073709551615.0)
		return (errno = ERANGE), -1;
	if (v != floor(v))
		return (errno = EINVAL), -1;
	*out = (uint64_t)v;
	return 0;
}

int
ovl_num_range(const char *s, uint64_t *a, uint64_t *b)
{
	const char *end;
	uint64_t x, y;

	if (s == NULL || digits_u64(s, &end, &x) != 0)
		return -1;
	if (*end != '-')
		return (errno = EINVAL), -1;
	if (ovl_num_u64(end + 1, &y) != 0)
		return -1;
	if (x > y)
		return (errno = EINVAL), -1;
	*a = x;
	*b = y;
	return 0;
}

int
ovl_num_part(const char *s, uint32_t *p, uint32_t *n)
{
	const char *end;
	uint64_t x, y;

	if (s == NULL || digits_u64(s, &end, &x) != 0)
		return -1;
	if (*end != '/')
		return (errno = EINVAL), -1;
	if (ovl_num_u64(end + 1, &y) != 0)
		return -1;
	if (y == 0 || x >= y)
		return (errno = EINVAL), -1;
	if (y > UINT32_MAX)
		return (errno = ERANGE), -1;
	*p = (uint32_t)x;
	*n = (uint32_t)y;
	return 0;
}
