/*
 * ovl-ckpt: the npy (version 1.0) header of a fixed NPY_HDR bytes, so an
 * output's header is rewritten in place as it grows.
 */
#include "ckpt.h"

void
npy_header(uint8_t hdr[NPY_HDR], const char *descr, uint64_t rows,
    uint32_t cols)
{
	char dict[NPY_HDR];
	int len;

	if (cols > 1)
		len = snprintf(dict, sizeof(dict), "{'descr': '%s', "
		    "'fortran_order': False, 'shape': (%" PRIu64 ", %u), }",
		    descr, rows, cols);
	else
		len = snprintf(dict, sizeof(dict), "{'descr': '%s', "
		    "'fortran_order': False, 'shape': (%" PRIu64 ",), }",
		    descr, rows);
	memset(hdr, ' ', NPY_HDR);
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (uint8_t)(NPY_HDR - 10);
	hdr[9] = 0;
	memcpy(hdr + 10, dict, (size_t)len);
	hdr[NPY_HDR - 1] = '\n';
}

void
npy_rewrite(struct out *o)
{
	uint8_t hdr[NPY_HDR];

	npy_header(hdr, o->descr, (o->len - o->hdr) / o->itemsize / o->cols,
	    o->cols);
	if (pwrite(o->fd, hdr, NPY_HDR, 0) != (ssize_t)NPY_HDR)
		ovl_err(OVL_EXIT_DATA, "write error on '%s'", o->path);
}
