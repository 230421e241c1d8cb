/*
 * libFuzzer target: loading a tiktoken rank file (src/lib/bpe.c), then
 * encoding a few texts with it. Loading must fail cleanly (a message) or
 * give a tokenizer whose every id decodes and whose encodings decode back
 * to the text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bpe.h"
#include "buf.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static const char *const texts[] = { "hello world", "the theme\n\n  ",
	"\xc3\xa9t\xc3\xa9 2024!", "<|endoftext|> x" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct ovl_u32vec ids = { 0 };
	struct ovl_buf back = { 0 };
	struct ovl_bpe *b;
	char path[64], err[512];
	size_t i, j, off, len;
	const unsigned char *t;
	int fd = memfd_create("ranks", MFD_CLOEXEC);

	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err[0] = '\0';
	b = ovl_bpe_open(path, "gpt2", err, sizeof(err));
	close(fd);
	if (b == NULL) {
		if (err[0] == '\0')
			abort();	/* every failure says why */
		return 0;
	}
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		ids.len = 0;
		if (ovl_bpe_encode(b, texts[i], strlen(texts[i]), &ids,
		    &off) != 0)
			continue;
		back.len = 0;
		for (j = 0; j < ids.len; j++) {
			t = ovl_bpe_token(b, ids.p[j], &len);
			if (t == NULL || ids.p[j] >= ovl_bpe_vocab(b))
				abort();
			ovl_buf_append(&back, t, len);
		}
		if (back.len != strlen(texts[i]) ||
		    memcmp(back.p, texts[i], back.len) != 0)
			abort();	/* plain policy: special text is text */
	}
	ovl_u32vec_free(&ids);
	ovl_buf_free(&back);
	ovl_bpe_free(b);
	return 0;
}
