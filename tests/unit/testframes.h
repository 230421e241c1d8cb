/*
 * Test frames of t-frameio and t-ring: STATE frames whose payload byte i of
 * a frame of length len is pbyte(len, i), so a reader can check each.
 */
#ifndef OVL_TESTFRAMES_H
#define OVL_TESTFRAMES_H

#include <stdint.h>

#include "frame.h"
#include "frameio.h"

/* payload byte i of a test frame of length len */
static inline uint8_t
pbyte(uint32_t len, uint32_t i)
{
	return (uint8_t)(i * 7u + len * 13u + (i >> 9));
}

/* f is the test frame of length len */
static inline int
frame_ok(const struct ovl_frame *f, uint32_t len)
{
	uint32_t i;

	if (f->kind != OVL_STATE || f->len != len)
		return 0;
	for (i = 0; i < len; i++)
		if (f->payload[i] != pbyte(len, i))
			return 0;
	return 1;
}

/* the test frame of length len, built whole in w's buffer */
static inline void
put_frame(struct ovl_writer *w, uint32_t len)
{
	uint8_t *p = ovl_writer_begin(w, len);
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = pbyte(len, i);
	ovl_writer_finish(w, OVL_STATE, 0);
}

#endif
