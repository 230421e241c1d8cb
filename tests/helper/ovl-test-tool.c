/*
 * ovl-test-tool: small helpers for the test suite (git's t/helper style),
 * over the same library the tools use. Not installed.
 *
 *   ovl-test-tool frames FILE
 *	one line per frame: index, byte offset, kind name, payload length
 *   ovl-test-tool poke FILE INDEX PAYLOAD-OFFSET U32
 *	set the little-endian u32 at PAYLOAD-OFFSET of frame INDEX (0 is the
 *	first frame after the stream header) and seal the frame again, so its
 *	CRC holds: a frame that passes its CRC but makes no sense; with
 *	"kind" for PAYLOAD-OFFSET, set the frame's kind to U32 instead
 *   ovl-test-tool minor FILE N
 *	set the stream header's minor version to N (header CRC resealed)
 *
 * Exits 0, 1 on a bad file, 2 on bad arguments.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "frame.h"
#include "num.h"

static uint8_t *
slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *b = NULL;
	size_t cap = 0, len = 0, r;

	if (fp == NULL) {
		fprintf(stderr, "ovl-test-tool: cannot open '%s': %s\n", path,
		    strerror(errno));
		exit(1);
	}
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			if ((b = realloc(b, cap)) == NULL)
				exit(1);
		}
		r = fread(b + len, 1, cap - len, fp);
		len += r;
	} while (r > 0);
	fclose(fp);
	*n = len;
	return b;
}

/* Walk the frames: calls fn for each; stops when fn returns non-zero. */
static int
walk(uint8_t *b, size_t n, int (*fn)(uint8_t *, size_t, uint64_t,
    const struct ovl_frame *, void *), void *arg)
{
	struct ovl_frame f;
	size_t off = OVL_STREAM_HDR_LEN;
	uint64_t i = 0;
	int rc;

	while (off < n) {
		rc = ovl_frame_parse(b + off, n - off, OVL_FRAME_LIMIT, &f);
		if (rc != OVL_F_OK) {
			fprintf(stderr, "ovl-test-tool: %s at byte offset %zu\n",
			    ovl_frame_strerror(rc), off);
			return 1;
		}
		if (fn(b + off, off, i++, &f, arg) != 0)
			return 0;
		off += f.size;
	}
	return 0;
}

static int
print_frame(uint8_t *p, size_t off, uint64_t i, const struct ovl_frame *f,
    void *arg)
{
	(void)p;
	(void)arg;
	printf("%" PRIu64 " %zu %s %" PRIu32 "\n", i, off, ovl_kind_name(f->kind),
	    f->len);
	return 0;
}

struct poke {
	uint64_t index, at, val;
	int done, kind;
};

static int
poke_frame(uint8_t *p, size_t off, uint64_t i, const struct ovl_frame *f,
    void *arg)
{
	struct poke *k = arg;

	(void)off;
	if (i != k->index)
		return 0;
	if (k->kind) {
		ovl_frame_seal(p, (uint8_t)k->val, f->flags, f->len);
		k->done = 1;
		return 1;
	}
	if (k->at + 4 > f->len) {
		fprintf(stderr, "ovl-test-tool: frame %" PRIu64 " has %" PRIu32
		    " payload bytes\n", i, f->len);
		exit(1);
	}
	ovl_put32(p + OVL_FRAME_HDR_LEN + k->at, (uint32_t)k->val);
	ovl_frame_seal(p, f->kind, f->flags, f->len);
	k->done = 1;
	return 1;
}

int
main(int argc, char **argv)
{
	uint8_t *b;
	size_t n;
	struct poke k = { 0, 0, 0, 0, 0 };
	FILE *fp;

	if (argc == 4 && strcmp(argv[1], "minor") == 0) {
		uint64_t v;

		b = slurp(argv[2], &n);
		if (n < OVL_STREAM_HDR_LEN || ovl_num_u64(argv[3], &v) != 0 ||
		    v > 65535)
			return 2;
		b[10] = (uint8_t)(v & 0xff);
		b[11] = (uint8_t)(v >> 8);
		ovl_put32(b + 12, ovl_crc32c(0, b, 12));
		if ((fp = fopen(argv[2], "wb")) == NULL ||
		    fwrite(b, 1, n, fp) != n || fclose(fp) != 0)
			return 1;
		free(b);
		return 0;
	}
	if (argc == 6 && strcmp(argv[4], "kind") == 0) {
		k.kind = 1;
		argv[4] = (char *)"0";
	}
	if (argc == 3 && strcmp(argv[1], "frames") == 0) {
		int rc;

		b = slurp(argv[2], &n);
		rc = walk(b, n, print_frame, NULL);
		free(b);
		return rc;
	}
	if (argc != 6 || strcmp(argv[1], "poke") != 0 ||
	    ovl_num_u64(argv[3], &k.index) != 0 ||
	    ovl_num_u64(argv[4], &k.at) != 0 ||
	    ovl_num_u64(argv[5], &k.val) != 0 || k.val > UINT32_MAX ||
	    (k.kind && k.val > 255)) {
		fprintf(stderr, "usage: ovl-test-tool frames FILE\n"
		    "       ovl-test-tool poke FILE INDEX PAYLOAD-OFFSET|kind U32\n"
		    "       ovl-test-tool minor FILE N\n");
		return 2;
	}
	b = slurp(argv[2], &n);
	if (walk(b, n, poke_frame, &k) != 0)
		return 1;
	if (!k.done) {
		fprintf(stderr, "ovl-test-tool: no frame %" PRIu64 "\n", k.index);
		return 1;
	}
	if ((fp = fopen(argv[2], "wb")) == NULL || fwrite(b, 1, n, fp) != n ||
	    fclose(fp) != 0) {
		fprintf(stderr, "ovl-test-tool: cannot write '%s'\n", argv[2]);
		return 1;
	}
	free(b);
	return 0;
}
