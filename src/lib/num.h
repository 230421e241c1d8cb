/*
 * num: strict number parsing. Every function accepts the whole string or
 * nothing: no leading space, no sign where none is allowed, no trailing
 * characters. Each returns 0 on success and -1 with errno set to EINVAL
 * (malformed) or ERANGE (out of range), leaving *out untouched.
 */
#ifndef OVL_NUM_H
#define OVL_NUM_H

#include <stdint.h>

/* Decimal unsigned integer: [0-9]+. */
int	ovl_num_u64(const char *s, uint64_t *out);
/* Decimal signed integer: -?[0-9]+. */
int	ovl_num_i64(const char *s, int64_t *out);
/* Unsigned integer at most max. */
int	ovl_num_u64_max(const char *s, uint64_t max, uint64_t *out);
/*
 * A size: a number (integer or decimal fraction such as 1.5) with an
 * optional suffix K, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of
 * 1024), case-insensitive for the letter. The result must be a whole number.
 */
int	ovl_num_size(const char *s, uint64_t *out);
/* A finite decimal floating number (strtod syntax, no hex, no inf/nan). */
int	ovl_num_double(const char *s, double *out);
/* "A-B" with A <= B, both unsigned decimal. */
int	ovl_num_range(const char *s, uint64_t *a, uint64_t *b);
/* "P/N" with N >= 1 and P < N. */
int	ovl_num_part(const char *s, uint32_t *p, uint32_t *n);

#endif
