/*
 * split: held-out splits by document identity (split.h).
 */
#include "split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash64.h"
#include "buf.h"

const char *const ovl_split_names[OVL_SPLIT_MAX + 1] = { "train",
	"validation", "test", NULL };

int
ovl_split_parse(const char *spec, struct ovl_split *sp, const char **why)
{
	const char *p = spec;
	char *end;
	unsigned long long x;

	memset(sp, 0, sizeof(*sp));
	for (;;) {
		if (sp->n == OVL_SPLIT_MAX) {
			*why = "at most three weights (train, validation, test)";
			return -1;
		}
		if (*p < '0' || *p > '9') {
			*why = "expected integer weights separated by commas";
			return -1;
		}
		x = strtoull(p, &end, 10);
		if (x > (1ull << 32)) {
			*why = "a weight over 2^32";
			return -1;
		}
		sp->w[sp->n++] = x;
		sp->total += x;
		if (*end == '\0')
			break;
		if (*end != ',') {
			*why = "expected integer weights separated by commas";
			return -1;
		}
		p = end + 1;
	}
	if (sp->n < 2) {
		*why = "at least two weights (train, validation)";
		return -1;
	}
	if (sp->total == 0 || sp->total > (1ull << 32)) {
		*why = "the weights must sum to between 1 and 2^32";
		return -1;
	}
	return 0;
}

void
ovl_split_format(const struct ovl_split *sp, char *buf, size_t size)
{
	size_t n = 0;
	unsigned i;

	buf[0] = '\0';
	for (i = 0; i < sp->n && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%llu", i ? "," : "",
		    (unsigned long long)sp->w[i]);
}

static void
put_le64(uint8_t *p, uint64_t v)
{
	unsigned i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

unsigned
ovl_split_of(const struct ovl_split *sp, uint64_t seed, const char *name,
    uint32_t part, uint64_t pos)
{
	struct ovl_hash64 h;
	uint8_t b[16];
	uint64_t u, at, cum = 0;
	unsigned i;

	ovl_hash64_init(&h, seed);
	ovl_hash64_update(&h, name, strlen(name) + 1);
	put_le64(b, part);
	put_le64(b + 8, pos);
	ovl_hash64_update(&h, b, sizeof(b));
	u = ovl_hash64_digest(&h);
	/* u / 2^64 of the total: the high half times the total, whole */
	at = (uint64_t)(((unsigned __int128)u * sp->total) >> 64);
	for (i = 0; i + 1 < sp->n; i++) {
		cum += sp->w[i];
		if (at < cum)
			return i;
	}
	return sp->n - 1;
}

const char *
ovl_split_relname(const char *path, const char *root)
{
	size_t n;

	if (root != NULL && (n = strlen(root)) > 0) {
		while (n > 1 && root[n - 1] == '/')
			n--;
		if (strncmp(path, root, n) == 0 && path[n] == '/')
			path += n + 1;
	}
	while (path[0] == '.' && path[1] == '/')
		path += 2;
	return path;
}

char *
ovl_split_path(const char *path, unsigned split)
{
	char *s;

	if (path == NULL)
		return NULL;
	if (split == 0)
		return ovl_xstrdup(path);
	s = ovl_xmalloc(strlen(path) + strlen(ovl_split_names[split]) + 2);
	sprintf(s, "%s.%s", path, ovl_split_names[split]);
	return s;
}
