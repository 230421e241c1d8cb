#include "json.h"

#include <string.h>

#include "tok.h"

void
ovl_json_string(FILE *fp, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	size_t ok;

	putc('"', fp);
	while (p < end) {
		const unsigned char *run = p;

		while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' &&
		    *p != '\\')
			p++;
		if (p > run)
			fwrite(run, 1, (size_t)(p - run), fp);
		if (p == end)
			break;
		if (*p >= 0x80) {
			/* Copy one valid UTF-8 sequence, or replace one bad byte. */
			size_t len = (*p >= 0xf0) ? 4 : (*p >= 0xe0) ? 3 : 2;
			if (len > (size_t)(end - p))
				len = (size_t)(end - p);
			ok = ovl_utf8_valid((const char *)p, len);
			if (ok == len && len >= 2) {
				fwrite(p, 1, len, fp);
				p += len;
			} else {
				fputs("\\ufffd", fp);
				p++;
			}
			continue;
		}
		switch (*p) {
		case '"':
			fputs("\\\"", fp);
			break;
		case '\\':
			fputs("\\\\", fp);
			break;
		case '\n':
			fputs("\\n", fp);
			break;
		case '\t':
			fputs("\\t", fp);
			break;
		case '\r':
			fputs("\\r", fp);
			break;
		default:
			fprintf(fp, "\\u%04x", *p);
			break;
		}
		p++;
	}
	putc('"', fp);
}

void
ovl_json_u32s(FILE *fp, const uint32_t *a, size_t n)
{
	char buf[4096];
	size_t i, len = 0;

	buf[len++] = '[';
	for (i = 0; i < n; i++) {
		char tmp[12];
		int k = 0;
		uint32_t v = a[i];

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
