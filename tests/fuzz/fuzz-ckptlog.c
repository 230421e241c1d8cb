/*
 * libFuzzer target: the checkpoint log reader. Any bytes as a ckpt.log:
 * the reader and the replay of every record's state (base and diffs) must
 * return an error or a state, never crash (src/lib/ckptlog.h). The input's
 * first byte E splits off its last 16 + 24 x E bytes (as many as there
 * are) as the log's index (ckpt.idx), and the log is read from its tail
 * too: a read that holds records begins with a base record at log->from.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckptlog.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static char path[64], idxpath[80];

static void
remove_path(void)
{
	unlink(path);
	unlink(idxpath);
}

static void
put(const char *p, const uint8_t *data, size_t n)
{
	FILE *fp;

	if ((fp = fopen(p, "wb")) == NULL)
		abort();
	fwrite(data, 1, n, fp);
	fclose(fp);
}

/* Read (whole, or from the back-th last base) and replay every record. */
static void
read_replay(unsigned back)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	char err[512];
	size_t i;

	(void)ovl_ckptlog_read_tail(path, idxpath, back, &log, err,
	    sizeof(err));
	if (log.from > 0 && log.nrec > 0 && (log.rec[0].offset != log.from ||
	    log.rec[0].type != OVL_CKPTREC_BASE))
		abort();
	for (i = 0; i < log.nrec; i++)
		if (ovl_ckptlog_state(&log, i, &st, err, sizeof(err)) != 0)
			break;
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	size_t ilen;

	if (path[0] == '\0') {
		snprintf(path, sizeof(path), "/tmp/ovl-fuzz-ckptlog.%ld",
		    (long)getpid());
		snprintf(idxpath, sizeof(idxpath), "%s.idx", path);
		atexit(remove_path);
	}
	if (n == 0)
		return 0;
	ilen = OVL_CKPTIDX_HDR_LEN + (size_t)data[0] * OVL_CKPTIDX_ENT_LEN;
	if (ilen > n - 1)
		ilen = n - 1;
	put(path, data + 1, n - 1 - ilen);
	put(idxpath, data + n - ilen, ilen);
	read_replay(0);
	read_replay(1);
	read_replay(2);
	return 0;
}
