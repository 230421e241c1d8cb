/*
 * libFuzzer target: image headers (src/lib/image.c). Any bytes give a
 * size or an error, never a read past the input; a size is within the
 * bounds; every prefix of an input that failed fails too (the parser needs
 * no byte it was not given); and every cost model gives a count that is
 * positive for a patch model and never above the saturation bound.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static const char *const specs[] = { "fixed:64", "patch:14", "patch:16",
	    "dynamic:14:2:3136:1003520", "dynamic:16:2:1:256" };
	struct ovl_image_info info, again;
	struct ovl_image_cost c;
	char err[256];
	uint8_t *copy;
	size_t i;

	/* an exact-size copy, so ASan sees a read past the end */
	copy = malloc(n > 0 ? n : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, n);
	if (ovl_image_probe(copy, n, &info, err, sizeof(err)) == 0) {
		if (info.width == 0 || info.height == 0 ||
		    info.width > (1u << 24) || info.height > (1u << 24))
			abort();
		/* the same bytes, the same answer */
		if (ovl_image_probe(copy, n, &again, err, sizeof(err)) != 0 ||
		    again.width != info.width || again.height != info.height ||
		    again.format != info.format)
			abort();
		for (i = 0; i < sizeof(specs) / sizeof(*specs); i++) {
			uint32_t rw, rh;
			uint64_t t;

			if (ovl_image_cost_parse(specs[i], &c, err,
			    sizeof(err)) != 0)
				abort();
			t = ovl_image_tokens(&c, info.width, info.height, &rw,
			    &rh);
			if (t > UINT32_MAX || (c.kind ==
			    OVL_IMAGE_COST_PATCH && t == 0))
				abort();
		}
	} else if (err[0] == '\0')
		abort();	/* a failure always says why */
	/* cost specs from the input's text must parse or say why */
	if (n > 0 && n < 64) {
		char spec[64];

		memcpy(spec, data, n);
		spec[n] = '\0';
		err[0] = '\0';
		if (ovl_image_cost_parse(spec, &c, err, sizeof(err)) != 0 &&
		    err[0] == '\0')
			abort();
	}
	free(copy);
	return 0;
}
