/*
 * libFuzzer target: the line and paragraph record reader (src/lib/lines.c)
 * over bytes handed out in small, uneven reads, with a small record limit.
 * Every record it returns must lie inside the bytes read, records must not
 * overlap or go back, and the offsets after them must cover the input:
 * in line mode, every byte belongs to a line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "lines.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

struct src {
	const uint8_t	*p;
	size_t		 n, off;
	unsigned	 step;
};

static ssize_t
feed(void *arg, unsigned char *buf, size_t n)
{
	struct src *s = arg;
	size_t k = 1 + (s->step++ * 7919u) % 300u;

	if (k > n)
		k = n;
	if (k > s->n - s->off)
		k = s->n - s->off;
	memcpy(buf, s->p + s->off, k);
	s->off += k;
	return (ssize_t)k;
}

static void
run(const uint8_t *data, size_t n, int para)
{
	static struct ovl_lines r;
	struct src s = { data, n, 0, 0 };
	uint64_t last = 0, nx64;
	size_t ls, le, nx;
	int k, guard = 0;

	r.max = 200;
	r.read = feed;
	r.arg = &s;
	ovl_lines_reset(&r, 1);
	for (;;) {
		k = para ? ovl_lines_para(&r, &ls, &le, &nx) :
		    ovl_lines_line(&r, &ls, &le, &nx);
		if (k == 0)
			break;
		if (k == -1)
			abort();	/* the feed never fails */
		if (k == -2) {
			if (ovl_lines_discard(&r, para, &nx64) != 0)
				abort();
			if (nx64 < last || nx64 > n)
				abort();
			last = nx64;
			continue;
		}
		if (ls > le || le > r.end || nx > r.end ||
		    r.base + ls < last || r.base + nx > n)
			abort();
		if (!para && memchr(r.buf + ls, '\n', le - ls) != NULL)
			abort();
		last = r.base + nx;
		if (++guard > 1000000)
			abort();
	}
	if (!para && last != n)
		abort();	/* every byte belongs to a line */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	run(data, n, 0);
	run(data, n, 1);
	return 0;
}
