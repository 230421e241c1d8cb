#include "json.h"

#include <string.h>

#include "buf.h"
#include "tok.h"

void
ovl_json_string_buf(struct ovl_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	char esc[8];
	size_t ok;

	ovl_buf_append(b, "\"", 1);
	while (p < end) {
		const unsigned char *run = p;

		while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' &&
		    *p != '\\')
			p++;
		if (p > run)
			ovl_buf_append(b, run, (size_t)(p - run));
		if (p == end)
			break;
		if (*p >= 0x80) {
			/* Copy one valid UTF-8 sequence, or replace one bad byte. */
			size_t len = (*p >= 0xf0) ? 4 : (*p >= 0xe0) ? 3 : 2;
			if (len > (size_t)(end - p))
				len = (size_t)(end - p);
			ok = ovl_utf8_valid((const char *)p, len);
			if (ok == len && len >= 2) {
				ovl_buf_append(b, p, len);
				p += len;
			} else {
				ovl_buf_append(b, "\\ufffd", 6);
				p++;
			}
			continue;
		}
		switch (*p) {
		case '"':
			ovl_buf_append(b, "\\\"", 2);
			break;
		case '\\':
			ovl_buf_append(b, "\\\\", 2);
			break;
		case '\n':
			ovl_buf_append(b, "\\n", 2);
			break;
		case '\t':
			ovl_buf_append(b, "\\t", 2);
			break;
		case '\r':
			ovl_buf_append(b, "\\r", 2);
			break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			ovl_buf_append(b, esc, 6);
			break;
		}
		p++;
	}
	ovl_buf_append(b, "\"", 1);
}

void
ovl_json_string(FILE *fp, const char *s, size_t n)
{
	static struct ovl_buf b;	/* reused: no allocation once grown */

	b.len = 0;
	ovl_json_string_buf(&b, s, n);
	fwrite(b.p, 1, b.len, fp);
}

void
ovl_json_u32s(FILE *fp, const uint32_t *a, size_t n)
{
	ovl_json_ids(fp, a, 4, n);
}

void
ovl_json_ids(FILE *fp, const void *a, uint32_t width, size_t n)
{
	char buf[4096];
	size_t i, len = 0;

	buf[len++] = '[';
	for (i = 0; i < n; i++) {
		char tmp[12];
		int k = 0;
		uint32_t v = width == 2 ? ((const uint16_t *)a)[i] :
		    ((const uint32_t *)a)[i];

		if (len > sizeof(buf) - 16) {
			fwrite(buf, 1, len, fp);
			len = 0;
		}
		if (i > 0)
			buf[len++] = ',';
		do {
			tmp[k++] = (char)('0' + v % 10);
			v /= 10;
		} while (v != 0);
		while (k > 0)
			buf[len++] = tmp[--k];
	}
	buf[len++] = ']';
	fwrite(buf, 1, len, fp);
}
