/*
 * json: writing JSON for the human-readable (--json) modes.
 * (Reading JSON lines is ovl-source's job; see the extractor below, when
 * present, and jansson as its oracle.)
 */
#ifndef OVL_JSON_H
#define OVL_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Write s[0..n) as a quoted JSON string: ", \ and control characters
 * escaped, valid UTF-8 copied, each invalid byte written as \ufffd.
 */
void	ovl_json_string(FILE *fp, const char *s, size_t n);
struct ovl_buf;
/* The same, appended to b. */
void	ovl_json_string_buf(struct ovl_buf *b, const char *s, size_t n);
/* Write [a0,a1,...] in decimal. */
void	ovl_json_u32s(FILE *fp, const uint32_t *a, size_t n);
/* The same for n ids of width bytes (2 or 4, ovl-frame(5)). */
void	ovl_json_ids(FILE *fp, const void *a, uint32_t width, size_t n);

#endif
