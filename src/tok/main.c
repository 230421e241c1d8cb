/*
 * ovl-tok: the tokenizers of overlord on their own: encode text, decode
 * ids or whole streams back to text, describe a tokenizer. For checking a
 * tokenizer file before a run, and for reading what a run packed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "io.h"
#include "tok.h"

static const struct ovl_cli cli = {
	"ovl-tok",
	"ovl-tok [options] --tokenizer SPEC encode [FILE...]\n"
	"ovl-tok [options] --tokenizer SPEC decode [FILE...]\n"
	"ovl-tok [options] --tokenizer SPEC info",
	"Encode text, decode ids or streams, describe a tokenizer.\n"
	"\n"
	"  -t, --tokenizer SPEC  bytes, tiktoken:FILE[:PATTERN], hf:FILE\n"
	"                        (tokenizer.json) or sentencepiece:FILE\n"
	"  -0, --null            records end in NUL, not newline (text in,\n"
	"                        and text out)\n"
	"      --special POLICY  special-token text: plain (default), error,\n"
	"                        allow, strip\n"
	"      --eod-token TOK   end-of-document token, text or id (info, and\n"
	"                        dropped when decoding a stream)\n"
	"      --bos-token TOK   beginning-of-document token (likewise)\n"
	"      --keep-specials   decode: keep the end and beginning tokens\n"
	"      --frames          decode: the input is an ovl-frame(5) stream (a\n"
	"                        file is recognized without it; a pipe is not)\n"
	"\n"
	"encode: one line of space-separated ids per input line (or record).\n"
	"decode: lines of ids, or an ovl-frame(5) stream (DOC frames: one\n"
	"record per document; SEQ frames: one per packed piece), to text.\n"
	"info:   name, vocabulary, end and beginning of document, as META has them.\n"
	"\n"
	"  -h, --help  -V, --version  -v, --verbose  -q, --quiet\n"
};

enum { O_SPECIAL = 256, O_EOD, O_BOS, O_KEEP, O_FRAMES };

static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "tokenizer", required_argument, NULL, 't' },
	{ "null", no_argument, NULL, '0' },
	{ "special", required_argument, NULL, O_SPECIAL },
	{ "eod-token", required_argument, NULL, O_EOD },
	{ "bos-token", required_argument, NULL, O_BOS },
	{ "keep-specials", no_argument, NULL, O_KEEP },
	{ "frames", no_argument, NULL, O_FRAMES },
	{ NULL, 0, NULL, 0 }
};

struct opts {
	const char	*spec, *special, *eod, *bos;
	int		 nul, keep, frames;
};

static FILE *
open_in(const char *path)
{
	FILE *fp;

	if (strcmp(path, "-") == 0)
		return stdin;
	if ((fp = fopen(path, "rb")) == NULL)
		ovl_err(OVL_EXIT_DATA, "'%s'", path);
	return fp;
}

static int
encode(struct ovl_tok *t, const struct opts *o, char **files, int n)
{
	struct ovl_u32vec v = { 0 };
	char *line = NULL;
	size_t cap = 0, off, j;
	uint64_t rec;
	ssize_t len;
	int i, rc = OVL_EXIT_OK;
	char *stdin_only[] = { "-" };

	if (n == 0) {
		files = stdin_only;
		n = 1;
	}
	for (i = 0; i < n; i++) {
		FILE *fp = open_in(files[i]);

		for (rec = 1; (len = getdelim(&line, &cap, o->nul ? '\0' : '\n',
		    fp)) > 0; rec++) {
			if (line[len - 1] == (o->nul ? '\0' : '\n'))
				len--;
			v.len = 0;
			if (ovl_tok_encode(t, line, (size_t)len, &v, &off) != 0) {
				ovl_warnx("'%s': record %" PRIu64 ": %s at byte %zu",
				    files[i], rec, ovl_tok_error(t), off);
				rc = OVL_EXIT_DATA;
				putchar('\n');
				continue;
			}
			for (j = 0; j < v.len; j++)
				printf(j ? " %" PRIu32 : "%" PRIu32, v.p[j]);
			putchar('\n');
		}
		if (ferror(fp))
			ovl_err(OVL_EXIT_DATA, "'%s'", files[i]);
		if (fp != stdin)
			fclose(fp);
	}
	free(line);
	ovl_u32vec_free(&v);
	return rc;
}

/*
 * Write the text of n ids of width bytes (ovl-frame(5)), without the end
 * and beginning, unless kept.
 */
static int
put_text(struct ovl_tok *t, const struct opts *o, const void *wids,
    uint32_t width, size_t n, struct ovl_buf *out)
{
	static struct ovl_u32vec wide;	/* 16-bit ids widened */
	uint32_t eod = ovl_tok_eod(t), bos = ovl_tok_bos(t);
	const uint32_t *ids = wids;

	if (width == 2) {
		wide.len = 0;
		(void)ovl_tok_copy(ovl_u32vec_reserve(&wide, n), 4, wids, 2, n);
		ids = wide.p;
	}

	if (!o->keep) {
		if (n > 0 && ids[0] == bos)
			ids++, n--;
		if (n > 0 && ids[n - 1] == eod)
			n--;
	}
	out->len = 0;
	if (ovl_tok_decode(t, ids, n, out) != 0)
		return -1;
	ovl_buf_append(out, o->nul ? "" : "\n", 1);
	if (fwrite(out->p, 1, out->len, stdout) != out->len)
		ovl_io_check_stdout();
	return 0;
}

static int
decode_frames(struct ovl_tok *t, const struct opts *o, int fd, const char *name,
    struct ovl_buf *out)
{
	struct ovl_reader *r = ovl_reader_new(fd, name, 0);
	struct ovl_frame f;
	struct ovl_doc d;
	struct ovl_seq s;
	uint32_t i;
	int rc;

	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME) {
		if (f.kind == OVL_DOC) {
			if (ovl_doc_decode(&f, &d) != 0)
				goto bad;
			if (put_text(t, o, d.tokens, d.width, d.ntokens,
			    out) != 0)
				goto bad_id;
		} else if (f.kind == OVL_SEQ) {
			if (ovl_seq_decode(&f, &s) != 0)
				goto bad;
			for (i = 0; i < s.npieces; i++)
				if (put_text(t, o, ovl_tok_from(s.tokens,
				    s.width, s.cu_seqlens[i]), s.width,
				    s.cu_seqlens[i + 1] - s.cu_seqlens[i], out) != 0)
					goto bad_id;
		}
	}
	if (rc < 0)
		ovl_reader_die(r);
	ovl_reader_free(r);
	return OVL_EXIT_OK;
bad:
	ovl_errx(OVL_EXIT_FRAME, "'%s': a frame at byte offset %" PRIu64
	    " does not decode", name, ovl_reader_offset(r));
bad_id:
	ovl_errx(OVL_EXIT_DATA, "'%s': the frame at byte offset %" PRIu64
	    " holds an id that is not a token of %s", name,
	    ovl_reader_offset(r), ovl_tok_name(t));
}

static int
decode(struct ovl_tok *t, const struct opts *o, char **files, int n)
{
	struct ovl_u32vec v = { 0 };
	struct ovl_buf out = { 0 };
	char *line = NULL, *p, *e;
	size_t cap = 0;
	ssize_t len;
	uint64_t rec;
	int i, rc = OVL_EXIT_OK;
	unsigned char c1;
	char *stdin_only[] = { "-" };

	if (n == 0) {
		files = stdin_only;
		n = 1;
	}
	for (i = 0; i < n; i++) {
		FILE *fp = open_in(files[i]);
		const char *name = strcmp(files[i], "-") == 0 ? "standard input" :
		    files[i];

		/*
		 * An ovl-frame(5) stream starts with 0x89: seen in a file, or
		 * said by --frames (a pipe cannot be looked into and given back).
		 */
		if (o->frames || (pread(fileno(fp), &c1, 1, 0) == 1 &&
		    c1 == 0x89)) {
			rc |= decode_frames(t, o, fileno(fp), name, &out);
			if (fp != stdin)
				fclose(fp);
			continue;
		}
		/* a record of ids ends at a newline or a NUL, either way */
		rec = 0;
		while ((len = getline(&line, &cap, fp)) > 0) {
			char *end = line + len;

			for (p = line; p < end; p++) {
				rec++;
				v.len = 0;
				for (;; p = e) {
					unsigned long long x;

					while (p < end && (*p == ' ' ||
					    *p == '\t' || *p == '\r'))
						p++;
					if (p == end || *p == '\n' || *p == '\0')
						break;
					errno = 0;
					x = strtoull(p, &e, 10);
					if (e == p || errno != 0 || x > UINT32_MAX)
						ovl_errx(OVL_EXIT_DATA, "'%s': record "
						    "%" PRIu64 ": expected ids "
						    "(decimal numbers; a stream on "
						    "a pipe needs --frames)", name,
						    rec);
					ovl_u32vec_push(&v, (uint32_t)x);
				}
				if (put_text(t, o, v.p, 4, v.len, &out) != 0)
					ovl_errx(OVL_EXIT_DATA, "'%s': record %"
					    PRIu64 ": an id is not a token of %s",
					    name, rec, ovl_tok_name(t));
				if (p == end)
					break;
			}
		}
		if (ferror(fp))
			ovl_err(OVL_EXIT_DATA, "'%s'", name);
		if (fp != stdin)
			fclose(fp);
	}
	free(line);
	ovl_u32vec_free(&v);
	ovl_buf_free(&out);
	return rc;
}

static int
info(struct ovl_tok *t)
{
	printf("tokenizer %s\nvocab %" PRIu32 "\n", ovl_tok_name(t),
	    ovl_tok_vocab(t));
	if (ovl_tok_eod(t) != OVL_TOK_NONE)
		printf("eod %" PRIu32 "\n", ovl_tok_eod(t));
	if (ovl_tok_bos(t) != OVL_TOK_NONE)
		printf("bos %" PRIu32 "\n", ovl_tok_bos(t));
	return OVL_EXIT_OK;
}

int
main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct ovl_tok *t;
	char err[512];
	const char *cmd;
	int c, rc;

	ovl_cli_init(&cli);
	while ((c = getopt_long(argc, argv, OVL_CLI_SHORTOPTS "t:0", longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, c))
			continue;
		switch (c) {
		case 't':
			o.spec = optarg;
			break;
		case '0':
			o.nul = 1;
			break;
		case O_SPECIAL:
			o.special = optarg;
			break;
		case O_EOD:
			o.eod = optarg;
			break;
		case O_BOS:
			o.bos = optarg;
			break;
		case O_KEEP:
			o.keep = 1;
			break;
		case O_FRAMES:
			o.frames = 1;
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (optind >= argc)
		ovl_cli_usagex(&cli, "a command is needed: encode, decode or info");
	cmd = argv[optind++];
	if (strcmp(cmd, "encode") != 0 && strcmp(cmd, "decode") != 0 &&
	    strcmp(cmd, "info") != 0)
		ovl_cli_usagex(&cli, "unknown command '%s' (encode, decode, info)",
		    cmd);
	if (o.spec == NULL)
		ovl_cli_usagex(&cli, "--tokenizer is needed");
	if ((t = ovl_tok_open(o.spec, err, sizeof(err))) == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	if ((o.special != NULL &&
	    ovl_tok_set_special(t, o.special, err, sizeof(err)) != 0) ||
	    (o.eod != NULL && ovl_tok_set_eod(t, o.eod, err, sizeof(err)) != 0) ||
	    (o.bos != NULL && ovl_tok_set_bos(t, o.bos, err, sizeof(err)) != 0))
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	if (strcmp(cmd, "info") == 0) {
		if (optind != argc)
			ovl_cli_usagex(&cli, "info takes no file");
		rc = info(t);
	} else {
		rc = strcmp(cmd, "encode") == 0 ?
		    encode(t, &o, argv + optind, argc - optind) :
		    decode(t, &o, argv + optind, argc - optind);
	}
	ovl_tok_free(t);
	ovl_io_close_stdout();
	return rc;
}
