/* ovl-ckpt --format null: writes nothing (a scratch format, counted). */
#include "ckpt.h"

static void *
null_open(struct ckpt_run *R)
{
	(void)R;
	return NULL;
}

const struct ckpt_format ckpt_fmt_null = {
	.tok16_vocab = 65536,
	.open = null_open,
};
