/*
 * libFuzzer target: the checkpoint log reader. Any bytes as a ckpt.log:
 * the reader and the replay of every record's state (base and diffs) must
 * return an error or a state, never crash (src/lib/ckptlog.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckptlog.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static char path[64];

static void
remove_path(void)
{
	unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	char err[512];
	FILE *fp;
	size_t i;

	if (path[0] == '\0') {
		snprintf(path, sizeof(path), "/tmp/ovl-fuzz-ckptlog.%ld",
		    (long)getpid());
		atexit(remove_path);
	}
	if ((fp = fopen(path, "wb")) == NULL)
		return 0;
	fwrite(data, 1, n, fp);
	fclose(fp);
	(void)ovl_ckptlog_read(path, &log, err, sizeof(err));
	for (i = 0; i < log.nrec; i++)
		if (ovl_ckptlog_state(&log, i, &st, err, sizeof(err)) != 0)
			break;
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	return 0;
}
