/*
 * libFuzzer target: Hugging Face tokenizer.json files (src/lib/hf.c,
 * hf-pre.c). An input starting with '{' is a tokenizer.json: loading must
 * fail with a message or give a tokenizer whose encodings of a few texts
 * hold ids below its vocabulary. Any other input is text, encoded by two
 * fixed tokenizers (byte level with a regex split and NFC; metaspace with
 * byte fallback and Digits): valid UTF-8 must encode, the byte-level ids
 * must decode back to the text, and invalid UTF-8 must fail at the first
 * bad byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "hf.h"
#include "tok.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static const char *const texts[] = { "hello world", "the theme\n\n  ",
	"\xc3\xa9t\xc3\xa9 2024!", "<|fin|> x <tool>", "" };

static struct ovl_hf *
load(const char *json, size_t n, char *err, size_t errlen)
{
	char path[64];
	struct ovl_hf *h;
	int fd = memfd_create("tokenizer.json", MFD_CLOEXEC);

	if (fd < 0 || write(fd, json, n) != (ssize_t)n)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err[0] = '\0';
	h = ovl_hf_open(path, err, errlen);
	close(fd);
	return h;
}

static void
put(struct ovl_buf *b, const char *s)
{
	ovl_buf_append(b, s, strlen(s));
}

/*
 * A byte-level file (the 256 byte tokens) or a metaspace one (the 256
 * byte-fallback tokens), with a few merges and two added tokens.
 */
static char *
fixed_json(int metaspace)
{
	struct ovl_buf b = { 0 };
	char tmp[64];
	unsigned c, k = 0;

	put(&b, "{\"model\":{\"type\":\"BPE\",");
	if (metaspace)
		put(&b, "\"byte_fallback\":true,\"unk_token\":\"<unk>\",");
	put(&b, "\"vocab\":{");
	for (c = 0; c < 256; c++) {
		unsigned cp = c;
		if (metaspace)
			snprintf(tmp, sizeof(tmp), "\"<0x%02X>\":%u,", c, c);
		else {
			if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174))
				cp = 256 + k++;
			snprintf(tmp, sizeof(tmp), "\"\\u%04x\":%u,", cp, c);
		}
		put(&b, tmp);
	}
	if (metaspace)
		put(&b, "\"<unk>\":256,\"\xe2\x96\x81\":257,\"t\":258,"
		    "\"h\":259,\"e\":260,\"th\":261,\"the\":262,\"\xe2\x96\x81the\":263},"
		    "\"merges\":[\"t h\",\"th e\",\"\xe2\x96\x81 the\"]},"
		    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
		    "{\"type\":\"NFKC\"},{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
		    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},"
		    "\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":true},");
	else
		put(&b, "\"th\":256,\"the\":257,\"\\u0120the\":258},"
		    "\"merges\":[\"t h\",\"th e\",\"\\u0120 the\"]},"
		    "\"normalizer\":{\"type\":\"NFC\"},"
		    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
		    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}|\\\\s+(?!\\\\S)\"},"
		    "\"behavior\":\"Isolated\",\"invert\":false},"
		    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]},");
	put(&b, "\"added_tokens\":[{\"id\":300,\"content\":\"<|fin|>\","
	    "\"special\":true},{\"id\":301,\"content\":\"<tool>\",\"special\":false}]}");
	ovl_buf_append(&b, "", 1);
	return (char *)b.p;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static struct ovl_hf *fixed[2];
	struct ovl_u32vec ids = { 0 };
	struct ovl_buf back = { 0 };
	struct ovl_hf *h;
	char err[512];
	size_t i, j, off, ok;
	int k;

	if (fixed[0] == NULL)
		for (k = 0; k < 2; k++) {
			char *js = fixed_json(k);
			if ((fixed[k] = load(js, strlen(js), err, sizeof(err))) == NULL) {
				fprintf(stderr, "fixed tokenizer %d: %s\n", k, err);
				abort();
			}
			free(js);
			ovl_hf_set_special(fixed[k], OVL_BPE_ALLOW);
		}
	if (n > 0 && data[0] == '{') {
		if ((h = load((const char *)data, n, err, sizeof(err))) == NULL) {
			if (err[0] == '\0')
				abort();	/* every failure says why */
			return 0;
		}
		for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
			ids.len = 0;
			if (ovl_hf_encode(h, texts[i], strlen(texts[i]), &ids,
			    &off) != 0)
				continue;
			for (j = 0; j < ids.len; j++)
				if (ids.p[j] >= ovl_hf_vocab(h))
					abort();
			back.len = 0;
			(void)ovl_hf_decode(h, ids.p, ids.len, &back);
		}
		ovl_hf_free(h);
	} else {
		ok = ovl_utf8_valid((const char *)data, n);
		for (k = 0; k < 2; k++) {
			ids.len = 0;
			off = SIZE_MAX;
			if (ovl_hf_encode(fixed[k], (const char *)data, n, &ids,
			    &off) != 0) {
				if (ok == n || off != ok || ids.len != 0)
					abort();
				continue;
			}
			if (ok != n)
				abort();
			back.len = 0;
			if (ovl_hf_decode(fixed[k], ids.p, ids.len, &back) != 0)
				abort();
			/* byte level without a changing normalizer: exact */
			if (k == 0 && ovl_utf8_valid((const char *)data, n) == n &&
			    (back.len != n || (n > 0 && memcmp(back.p, data, n) != 0))) {
				/* NFC may change the text: only then may it differ */
				int ascii = 1;
				for (j = 0; j < n; j++)
					ascii &= data[j] < 0x80;
				if (ascii)
					abort();
			}
		}
	}
	ovl_u32vec_free(&ids);
	ovl_buf_free(&back);
	return 0;
}
