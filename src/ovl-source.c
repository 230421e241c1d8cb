/*
 * ovl-source: read one source (jsonl, text, tar, WebDataset; zstd, gzip or
 * plain), tokenize every document and write DOC frames in canonical order,
 * each with its cursor; CHUNK_END after every chunk this partition owns.
 * See ovl-source(1) and HACKING.md ("Sources, chunks, cursors").
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <zlib.h>
#include <zstd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "buf.h"
#include "chunk.h"
#include "cli.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "input.h"
#include "io.h"
#include "json.h"
#include "jsonl.h"
#include "lines.h"
#include "num.h"
#include "tok.h"
#include "wds.h"

static const struct ovl_cli cli = {
	"ovl-source",
	"ovl-source [options] NAME PATH...",
	"Read one source and write its documents as DOC frames (or --json lines).\n"
	"\n"
	"  --format F            jsonl, text, tar or wds (default: from the name)\n"
	"  --field PATH          jsonl field, dotted (default text)\n"
	"  --json-parser P       fast (default) or jansson\n"
	"  --doc-per MODE        text: line (default), blank-line or file\n"
	"  --member-ext EXT      tar/wds: the text member(s), e.g. .c (repeatable)\n"
	"  --tokenizer SPEC      bytes (default) or tiktoken:FILE[:PATTERN]\n"
	"  --eod-token TOK       end-of-document token, text or id\n"
	"  --special POLICY      special-token text in documents: plain (default),\n"
	"                        error, allow or strip (tiktoken)\n"
	"  --min-tokens N        drop documents with fewer tokens\n"
	"  --max-tokens N        drop documents with more tokens\n"
	"  --match REGEX         keep only documents matching (PCRE2)\n"
	"  --drop REGEX          drop documents matching (PCRE2)\n"
	"  --chunk-size SIZE     cut large uncompressed files (e.g. 64M; 0: never)\n"
	"  --partition P/N       read the canonical chunks k with k % N == P\n"
	"  --shuffle-seed S      permute the chunk order per epoch\n"
	"  --epochs N            passes over the source (default 1)\n"
	"  --repeat              repeat forever\n"
	"  --resume CURSOR       start just after cursor E:C:OFF:REC\n"
	"  --on-error MODE       fail (default) or skip bad records, counted\n"
	"  --max-doc-bytes SIZE  longest record (default 32Mi)\n"
	"  --id N                source id in frames (default 0)\n"
	"  --text                include the text in DOC frames\n"
	"  --throttle RATE       at most RATE input bytes/s (4M) or docs/s (200docs)\n"
	"  --json                one JSON object per document, for people\n"
	"  --output FILE         write to FILE (a FIFO, say) instead of standard output\n"
	"  --standby CTL         warm standby: load, then wait for a cursor line on\n"
	"                        CTL and resume there (shadow loaders; needs --output)\n"
	"  -v, --verbose         per-chunk figures on stderr\n"
	"  -q, --quiet           only errors\n"
	"  -h, --help            this help\n"
	"  -V, --version         the version\n"
};

enum fmt { FMT_AUTO, FMT_JSONL, FMT_TEXT, FMT_TAR, FMT_WDS };
enum per { PER_LINE, PER_BLANK, PER_FILE };
enum { PARSER_FAST, PARSER_JANSSON };

#define MAX_EXT		16
#define BLOCK		OVL_INPUT_BLOCK
#define MAX_DOC_LIMIT	(128ull << 20)

struct src_opts {
	const char	*name;
	char		**paths;
	int		 npaths;
	int		 format;
	const char	*field;
	int		 parser;
	int		 per;
	const char	*ext[MAX_EXT];
	int		 next;
	const char	*tokenizer;
	const char	*eod_token;
	const char	*special;
	uint64_t	 min_tokens;
	uint64_t	 max_tokens;	/* 0: no limit */
	const char	*match;
	const char	*drop;
	uint64_t	 chunk_size;
	uint32_t	 part_p, part_n;
	int		 shuffle;
	uint64_t	 seed;
	uint32_t	 epochs;
	int		 repeat;
	int		 resume;
	struct ovl_cursor cursor;
	int		 skip;
	uint64_t	 max_doc;
	uint32_t	 id;
	int		 text;
	int		 json;
	double		 throttle;	/* per second; 0: none */
	int		 throttle_docs;
	const char	*output;	/* NULL: standard output */
	const char	*standby;	/* control FIFO of a warm standby */
};

/* Why a record was skipped (--on-error=skip). */
enum { R_JSON, R_MISSING, R_NOTSTRING, R_UTF8, R_TOOLONG, R_INPUT, R_OPEN,
	R_DUP, R_TOK, R_NREASONS };
static const char *const reason_names[R_NREASONS] = {
	"invalid JSON", "missing field", "field not a string", "invalid UTF-8",
	"too long", "unreadable or corrupt input", "unopenable file",
	"duplicate text member", "tokenizer error"
};



/* What the current chunk is. */
struct cx {
	uint32_t	 epoch, k, ci;
	const struct ovl_chunk *c;
	const char	*path;
	uint64_t	 docs, tokens, recs;
	struct timespec	 t0;
};

/* A record about to become a document. */
struct rec {
	uint64_t	 start_off;
	uint64_t	 next_off;
	uint64_t	 index;
	uint64_t	 line;		/* for messages; 0: unknown */
	uint32_t	 nimages;
	int		 utf8_ok;	/* already validated */
	const char	*member;	/* tar member name, for messages */
};

struct src {
	const struct src_opts *o;
	struct ovl_chunks cs;
	uint32_t	*perm;
	struct ovl_tok	*tok;
	int		 tok_bytes;
	uint32_t	 eod;
	pcre2_code	*re_match, *re_drop;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack	*jst;
	struct ovl_jsonl_path path;
	struct ovl_writer *w;
	struct ovl_input_ctx inx;	/* decoders, buffers, read-ahead thread */
	struct ovl_lines lr;
	struct ovl_buf	 scratch;
	struct ovl_buf	 doc;		/* a tar member's text */
	struct ovl_u32vec toks;
	struct cx	 cx;
	uint64_t	 docs, tokens, bytes, recs;
	uint64_t	 filtered_len, filtered_re;
	uint64_t	 skipped[R_NREASONS];
	uint64_t	 no_text_groups;
	struct timespec	 t0;
	uint64_t	 thr_bytes, thr_docs;
};

/* ---- options -------------------------------------------------------- */

enum {
	O_FORMAT = 256, O_FIELD, O_PARSER, O_DOCPER, O_EXT, O_TOKENIZER,
	O_EOD, O_MIN, O_MAX, O_MATCH, O_DROP, O_CHUNK, O_PART, O_SEED,
	O_EPOCHS, O_REPEAT, O_RESUME, O_ONERR, O_MAXDOC, O_ID, O_TEXT, O_JSON,
	O_THROTTLE, O_OUTPUT, O_STANDBY, O_SPECIAL
};

static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "format", required_argument, NULL, O_FORMAT },
	{ "field", required_argument, NULL, O_FIELD },
	{ "json-parser", required_argument, NULL, O_PARSER },
	{ "doc-per", required_argument, NULL, O_DOCPER },
	{ "member-ext", required_argument, NULL, O_EXT },
	{ "tokenizer", required_argument, NULL, O_TOKENIZER },
	{ "eod-token", required_argument, NULL, O_EOD },
	{ "min-tokens", required_argument, NULL, O_MIN },
	{ "max-tokens", required_argument, NULL, O_MAX },
	{ "match", required_argument, NULL, O_MATCH },
	{ "drop", required_argument, NULL, O_DROP },
	{ "chunk-size", required_argument, NULL, O_CHUNK },
	{ "partition", required_argument, NULL, O_PART },
	{ "shuffle-seed", required_argument, NULL, O_SEED },
	{ "epochs", required_argument, NULL, O_EPOCHS },
	{ "repeat", no_argument, NULL, O_REPEAT },
	{ "resume", required_argument, NULL, O_RESUME },
	{ "on-error", required_argument, NULL, O_ONERR },
	{ "max-doc-bytes", required_argument, NULL, O_MAXDOC },
	{ "id", required_argument, NULL, O_ID },
	{ "text", no_argument, NULL, O_TEXT },
	{ "json", no_argument, NULL, O_JSON },
	{ "throttle", required_argument, NULL, O_THROTTLE },
	{ "output", required_argument, NULL, O_OUTPUT },
	{ "standby", required_argument, NULL, O_STANDBY },
	{ "special", required_argument, NULL, O_SPECIAL },
	{ NULL, 0, NULL, 0 }
};

static uint64_t
opt_u64(const char *name, const char *v, uint64_t max)
{
	uint64_t x;

	if (ovl_num_u64_max(v, max, &x) != 0)
		ovl_cli_usagex(&cli, "bad value for --%s: '%s'", name, v);
	return x;
}

static uint64_t
opt_size(const char *name, const char *v)
{
	uint64_t x;

	if (ovl_num_size(v, &x) != 0)
		ovl_cli_usagex(&cli, "bad size for --%s: '%s'", name, v);
	return x;
}

static void
opt_throttle(struct src_opts *o, const char *v)
{
	size_t n = strlen(v);
	uint64_t x;

	if (n > 4 && strcmp(v + n - 4, "docs") == 0) {
		char tmp[64];

		if (n - 4 >= sizeof(tmp))
			ovl_cli_usagex(&cli, "bad value for --throttle: '%s'", v);
		memcpy(tmp, v, n - 4);
		tmp[n - 4] = '\0';
		x = opt_u64("throttle", tmp, UINT32_MAX);
		o->throttle_docs = 1;
	} else
		x = opt_size("throttle", v);
	if (x == 0)
		ovl_cli_usagex(&cli, "--throttle must be positive");
	o->throttle = (double)x;
}

static int
parse_format(const char *v)
{
	if (strcmp(v, "jsonl") == 0)
		return FMT_JSONL;
	if (strcmp(v, "text") == 0)
		return FMT_TEXT;
	if (strcmp(v, "tar") == 0)
		return FMT_TAR;
	if (strcmp(v, "wds") == 0)
		return FMT_WDS;
	ovl_cli_usagex(&cli, "unknown --format '%s' (jsonl, text, tar, wds)", v);
}

static void
parse_opts(struct src_opts *o, int argc, char **argv)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->field = "text";
	o->tokenizer = "bytes";
	o->epochs = 1;
	o->part_n = 1;
	o->max_doc = 32ull << 20;
	while ((c = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, c))
			continue;
		switch (c) {
		case O_FORMAT:
			o->format = parse_format(optarg);
			break;
		case O_FIELD:
			o->field = optarg;
			break;
		case O_PARSER:
			if (strcmp(optarg, "fast") == 0)
				o->parser = PARSER_FAST;
			else if (strcmp(optarg, "jansson") == 0)
				o->parser = PARSER_JANSSON;
			else
				ovl_cli_usagex(&cli, "unknown --json-parser '%s' "
				    "(fast, jansson)", optarg);
			break;
		case O_DOCPER:
			if (strcmp(optarg, "line") == 0)
				o->per = PER_LINE;
			else if (strcmp(optarg, "blank-line") == 0)
				o->per = PER_BLANK;
			else if (strcmp(optarg, "file") == 0)
				o->per = PER_FILE;
			else
				ovl_cli_usagex(&cli, "unknown --doc-per '%s' "
				    "(line, blank-line, file)", optarg);
			break;
		case O_EXT:
			if (o->next == MAX_EXT)
				ovl_cli_usagex(&cli, "at most %d --member-ext",
				    MAX_EXT);
			if (optarg[0] == '\0')
				ovl_cli_usagex(&cli, "empty --member-ext");
			o->ext[o->next++] = optarg;
			break;
		case O_TOKENIZER:
			o->tokenizer = optarg;
			break;
		case O_EOD:
			o->eod_token = optarg;
			break;
		case O_MIN:
			o->min_tokens = opt_u64("min-tokens", optarg, UINT32_MAX);
			break;
		case O_MAX:
			o->max_tokens = opt_u64("max-tokens", optarg, UINT32_MAX);
			if (o->max_tokens == 0)
				ovl_cli_usagex(&cli, "--max-tokens must be positive");
			break;
		case O_MATCH:
			o->match = optarg;
			break;
		case O_DROP:
			o->drop = optarg;
			break;
		case O_CHUNK:
			o->chunk_size = opt_size("chunk-size", optarg);
			break;
		case O_PART:
			if (ovl_num_part(optarg, &o->part_p, &o->part_n) != 0)
				ovl_cli_usagex(&cli, "bad --partition '%s' "
				    "(P/N with P < N)", optarg);
			break;
		case O_SEED:
			o->seed = opt_u64("shuffle-seed", optarg, UINT64_MAX);
			o->shuffle = 1;
			break;
		case O_EPOCHS:
			o->epochs = (uint32_t)opt_u64("epochs", optarg,
			    UINT32_MAX - 1);
			break;
		case O_REPEAT:
			o->repeat = 1;
			break;
		case O_RESUME:
			if (ovl_cursor_parse(optarg, &o->cursor) != 0)
				ovl_cli_usagex(&cli, "bad --resume cursor '%s' "
				    "(EPOCH:CHUNK:OFF:REC)", optarg);
			o->resume = 1;
			break;
		case O_ONERR:
			if (strcmp(optarg, "skip") == 0)
				o->skip = 1;
			else if (strcmp(optarg, "fail") == 0)
				o->skip = 0;
			else
				ovl_cli_usagex(&cli, "unknown --on-error '%s' "
				    "(fail, skip)", optarg);
			break;
		case O_MAXDOC:
			o->max_doc = opt_size("max-doc-bytes", optarg);
			if (o->max_doc == 0 || o->max_doc > MAX_DOC_LIMIT)
				ovl_cli_usagex(&cli, "--max-doc-bytes must be "
				    "between 1 and 128Mi");
			break;
		case O_ID:
			o->id = (uint32_t)opt_u64("id", optarg, UINT32_MAX);
			break;
		case O_TEXT:
			o->text = 1;
			break;
		case O_JSON:
			o->json = 1;
			break;
		case O_THROTTLE:
			opt_throttle(o, optarg);
			break;
		case O_OUTPUT:
			o->output = optarg;
			break;
		case O_STANDBY:
			o->standby = optarg;
			break;
		case O_SPECIAL:
			o->special = optarg;
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (argc - optind < 2)
		ovl_cli_usagex(&cli, "a NAME and at least one PATH are needed");
	o->name = argv[optind];
	if (o->name[0] == '\0' || strpbrk(o->name, " \t\n\r") != NULL)
		ovl_cli_usagex(&cli, "bad source name '%s' (no spaces)", o->name);
	o->paths = argv + optind + 1;
	o->npaths = argc - optind - 1;
	if (o->max_tokens != 0 && o->min_tokens > o->max_tokens)
		ovl_cli_usagex(&cli, "--min-tokens is above --max-tokens");
	if (o->epochs == 0 && !o->repeat)
		ovl_cli_usagex(&cli, "--epochs must be at least 1");
	if (o->standby != NULL && o->output == NULL)
		ovl_cli_usagex(&cli, "--standby needs --output (the FIFO to take "
		    "over)");
}

/*
 * A stream input (stdin, a FIFO) is read exactly once: a second epoch could
 * not read it again, and stdin belongs to one process, so it has one
 * partition. Configuration errors, exit 2.
 */
static void
check_streams(const struct src *s)
{
	const struct src_opts *o = s->o;
	uint32_t i;

	if (!ovl_chunks_have_stream(&s->cs))
		return;
	for (i = 0; i < s->cs.nfiles; i++)
		if (strcmp(s->cs.files[i], "-") == 0 && o->part_n > 1)
			ovl_errx(OVL_EXIT_USAGE, "'-': standard input is read "
			    "once, by one process: it cannot be split into %"
			    PRIu32 " partitions", o->part_n);
	for (i = 0; i < s->cs.n; i++) {
		if (s->cs.v[i].comp != OVL_COMP_STREAM)
			continue;
		if (o->repeat || o->epochs > 1)
			ovl_errx(OVL_EXIT_USAGE, "'%s' is a stream, read once: "
			    "it cannot be read for more than one epoch",
			    ovl_chunks_path(&s->cs, i));
	}
}

/* The format a file name suggests, or FMT_AUTO. */
static int
guess_format(const char *path)
{
	static const char *const zs[] = { ".zst", ".zstd", ".gz", ".gzip",
	    ".xz", ".bz2", ".lz4" };
	const char *base = strrchr(path, '/');
	char name[256];
	size_t n, i;

	base = base != NULL ? base + 1 : path;
	n = strlen(base);
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, base, n);
	name[n] = '\0';
	for (i = 0; i < sizeof(zs) / sizeof(zs[0]); i++) {
		size_t l = strlen(zs[i]);
		if (n > l && strcasecmp(name + n - l, zs[i]) == 0) {
			n -= l;
			name[n] = '\0';
			break;
		}
	}
#define ENDS(s) (n > strlen(s) && strcasecmp(name + n - strlen(s), s) == 0)
	if (ENDS(".jsonl") || ENDS(".ndjson") || ENDS(".json"))
		return FMT_JSONL;
	if (ENDS(".tar") || ENDS(".tgz"))
		return FMT_TAR;
	if (ENDS(".txt") || ENDS(".text") || ENDS(".md"))
		return FMT_TEXT;
#undef ENDS
	return FMT_AUTO;
}

/* ---- messages and counting ------------------------------------------ */

/* Report a bad record: exit 1, or count it under --on-error=skip. */
static void
bad(struct src *s, int reason, const struct rec *r, const char *fmt, ...)
{
	char msg[512], where[128];
	const struct ovl_chunk *c = s->cx.c;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r == NULL)
		where[0] = '\0';
	else if (r->member != NULL)
		snprintf(where, sizeof(where), " group %" PRIu64, r->start_off);
	else if (r->line != 0)
		snprintf(where, sizeof(where), " line %" PRIu64, r->line);
	else if (c->comp != OVL_COMP_NONE)
		snprintf(where, sizeof(where), " decompressed byte offset %"
		    PRIu64, r->start_off);
	else
		snprintf(where, sizeof(where), " byte offset %" PRIu64,
		    c->off + r->start_off);
	if (r != NULL && r->member != NULL) {
		if (!s->o->skip)
			ovl_errx(OVL_EXIT_DATA, "'%s': member '%s' (%s): %s",
			    s->cx.path, r->member, where + 1, msg);
		ovl_info(1, "skipped: '%s': member '%s' (%s): %s", s->cx.path,
		    r->member, where + 1, msg);
	} else {
		if (!s->o->skip)
			ovl_errx(OVL_EXIT_DATA, "'%s':%s%s %s", s->cx.path, where,
			    where[0] != '\0' ? ":" : "", msg);
		ovl_info(1, "skipped: '%s':%s%s %s", s->cx.path, where,
		    where[0] != '\0' ? ":" : "", msg);
	}
	s->skipped[reason]++;
}

static double
elapsed(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	    (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void
flush_out(struct src *s)
{
	if (s->w != NULL)
		ovl_writer_flush(s->w);
	else if (fflush(stdout) != 0) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

static void
throttle(struct src *s, uint64_t bytes)
{
	double due, now;

	s->thr_bytes += bytes;
	s->thr_docs++;
	due = (s->o->throttle_docs ? (double)s->thr_docs :
	    (double)s->thr_bytes) / s->o->throttle;
	now = elapsed(&s->t0);
	if (due > now + 0.0005) {
		struct timespec ts;
		double d = due - now;

		flush_out(s);
		ts.tv_sec = (time_t)d;
		ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
}

/* ---- documents ------------------------------------------------------ */

static inline void
widen(uint32_t *t, const unsigned char *p, size_t n)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i z = _mm_setzero_si128();

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		__m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);

		_mm_storeu_si128((__m128i *)(void *)(t + i),
		    _mm_unpacklo_epi16(lo, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 4),
		    _mm_unpackhi_epi16(lo, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 8),
		    _mm_unpacklo_epi16(hi, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 12),
		    _mm_unpackhi_epi16(hi, z));
	}
#endif
	for (; i < n; i++)
		t[i] = p[i];
}

static int
re_hit(struct src *s, pcre2_code *re, const char *text, size_t len)
{
	int rc = pcre2_match(re, (PCRE2_SPTR)text, len, 0, PCRE2_NO_UTF_CHECK,
	    s->md, s->mctx);

	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	{
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(rc, msg, sizeof(msg));
		ovl_errx(OVL_EXIT_DATA, "'%s': regular expression match failed: %s",
		    s->cx.path, (const char *)msg);
	}
}

static void
emit_json(struct src *s, const struct rec *r, const char *text, size_t len,
    const uint32_t *toks, uint32_t ntok)
{
	struct ovl_cursor cur;
	char cbuf[OVL_CURSOR_STRLEN];

	cur.epoch = s->cx.epoch;
	cur.chunk = s->cx.k;
	cur.off = r->next_off;
	cur.rec = r->index + 1;
	fputs("{\"source\":", stdout);
	ovl_json_string(stdout, s->o->name, strlen(s->o->name));
	printf(",\"id\":%" PRIu32 ",\"pos\":[%" PRIu32 ",%" PRIu32 ",%" PRIu64
	    "],\"cursor\":\"%s\",\"off\":%" PRIu64 ",\"nimages\":%" PRIu32
	    ",\"ntokens\":%" PRIu32 ",\"tokens\":", s->o->id, s->cx.epoch,
	    s->cx.k, r->index, ovl_cursor_format(&cur, cbuf), r->start_off,
	    r->nimages, ntok);
	ovl_json_u32s(stdout, toks, ntok);
	if (s->o->text) {
		fputs(",\"text\":", stdout);
		ovl_json_string(stdout, text, len);
	}
	fputs("}\n", stdout);
	if (ferror(stdout)) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

/*
 * One record's text: check, filter, tokenize and write it. The text stays
 * where it is (no copy) on the bytes tokenizer's path.
 */
static void
record(struct src *s, const struct rec *r, const char *text, size_t len)
{
	const struct src_opts *o = s->o;
	uint64_t ntok;
	const uint32_t *toks = NULL;

	s->recs++;
	s->cx.recs++;
	if (!r->utf8_ok || !s->tok_bytes) {
		size_t ok = ovl_utf8_valid(text, len);
		if (ok != len) {
			bad(s, R_UTF8, r, "invalid UTF-8 at byte %zu of the record",
			    ok);
			return;
		}
	}
	if (s->re_match != NULL && !re_hit(s, s->re_match, text, len)) {
		s->filtered_re++;
		return;
	}
	if (s->re_drop != NULL && re_hit(s, s->re_drop, text, len)) {
		s->filtered_re++;
		return;
	}
	if (s->tok_bytes)
		ntok = len;
	else {
		size_t badoff;

		s->toks.len = 0;
		if (ovl_tok_encode(s->tok, text, len, &s->toks, &badoff) != 0) {
			bad(s, R_TOK, r, "%s at byte %zu of the document",
			    ovl_tok_error(s->tok), badoff);
			return;
		}
		ntok = s->toks.len;
		toks = s->toks.p;
	}
	if (ntok < o->min_tokens || (o->max_tokens != 0 && ntok > o->max_tokens)) {
		s->filtered_len++;
		return;
	}
	if (ntok + 1 > UINT32_MAX ||
	    ovl_doc_payload_len((uint32_t)ntok + 1, o->text ? (uint32_t)len : 0) == 0) {
		bad(s, R_TOOLONG, r, "document too large for one frame");
		return;
	}
	if (o->json) {
		if (toks == NULL) {
			uint32_t *t;
			s->toks.len = 0;
			t = ovl_u32vec_reserve(&s->toks, len + 1);
			widen(t, (const unsigned char *)text, len);
			s->toks.len = len;
			toks = s->toks.p;
		}
		ovl_u32vec_push(&s->toks, s->eod);
		emit_json(s, r, text, len, s->toks.p, (uint32_t)ntok + 1);
	} else {
		struct ovl_doc d;
		uint32_t tl = o->text ? (uint32_t)len : 0;
		uint32_t plen = ovl_doc_payload_len((uint32_t)ntok + 1, tl);
		uint8_t *p = ovl_writer_begin(s->w, plen);
		uint32_t *t = (uint32_t *)(void *)(p + OVL_DOC_FIXED);

		memset(&d, 0, sizeof(d));
		d.source = o->id;
		d.epoch = s->cx.epoch;
		d.chunk = s->cx.k;
		d.record = r->index;
		d.nchunks = s->cs.n;
		d.nimages = r->nimages;
		d.start_off = r->start_off;
		d.next_off = r->next_off;
		d.next_rec = r->index + 1;
		d.ntokens = (uint32_t)ntok + 1;
		d.text_len = tl;
		d.text = text;
		ovl_doc_encode(p, &d);
		if (toks != NULL)
			memcpy(t, toks, ntok * 4);
		else
			widen(t, (const unsigned char *)text, len);
		t[ntok] = s->eod;
		ovl_writer_finish(s->w, OVL_DOC, 0);
	}
	s->docs++;
	s->tokens += ntok + 1;
	s->cx.docs++;
	s->cx.tokens += ntok + 1;
	if (o->throttle > 0)
		throttle(s, len);
}

/* A JSON line: extract the field, then record it. */
static void
json_record(struct src *s, struct rec *r, const char *line, size_t len)
{
	struct ovl_jsonl_result jr;
	int rc;

	if (s->o->parser == PARSER_JANSSON) {
		json_error_t je;
		json_t *root = json_loadb(line, len, 0, &je), *v;
		size_t i;

		if (root == NULL) {
			bad(s, R_JSON, r, "invalid JSON at column %d: %s",
			    je.column, je.text);
			return;
		}
		v = root;
		for (i = 0; i < s->path.n && v != NULL; i++)
			v = json_is_object(v) ? json_object_get(v, s->path.key[i]) :
			    NULL;
		if (v == NULL)
			bad(s, R_MISSING, r, "no field '%s'", s->o->field);
		else if (!json_is_string(v))
			bad(s, R_NOTSTRING, r, "field '%s' is not a string",
			    s->o->field);
		else {
			/* Copy: the record outlives nothing, but root does not. */
			s->scratch.len = 0;
			ovl_buf_append(&s->scratch, json_string_value(v),
			    json_string_length(v));
			r->utf8_ok = 1;
			json_decref(root);
			record(s, r, (const char *)s->scratch.p, s->scratch.len);
			return;
		}
		json_decref(root);
		return;
	}
	rc = ovl_jsonl_extract(&s->path, line, len, &s->scratch, &jr);
	switch (rc) {
	case OVL_JSONL_OK:
		r->utf8_ok = 1;
		record(s, r, jr.val, jr.len);
		break;
	case OVL_JSONL_MISSING:
		bad(s, R_MISSING, r, "no field '%s'", s->o->field);
		break;
	case OVL_JSONL_NOTSTRING:
		bad(s, R_NOTSTRING, r, "field '%s' is %s %s, not a string",
		    s->o->field, jr.type[0] == 'a' || jr.type[0] == 'o' ? "an" :
		    "a", jr.type);
		break;
	default:
		bad(s, R_JSON, r, "invalid JSON at column %zu: %s",
		    jr.err_off + 1, jr.err);
		break;
	}
}

/* ---- input: lib/input.c ---- */

/* The line reader reads the chunk's decompressed bytes. */
static ssize_t
lines_read(void *arg, unsigned char *buf, size_t n)
{
	return ovl_input_read(arg, buf, n);
}

static void
input_failed(struct src *s, struct ovl_input *in, uint64_t at)
{
	struct rec rr;

	memset(&rr, 0, sizeof(rr));
	rr.start_off = at;
	rr.line = s->lr.line;
	bad(s, R_INPUT, &rr, "%s", in->err);
}

/* Count a skip of the chunk's remainder under --on-error=skip. */
static void
resume_error(struct src *s, uint64_t off, const char *why)
{
	ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64 " %s "
	    "(chunk %" PRIu32 " of epoch %" PRIu32 ")", s->cx.path, off, why,
	    s->cx.k, s->cx.epoch);
}

/* A chunk of jsonl or text: returns the chunk's decompressed bytes read. */
static uint64_t
run_lines(struct src *s, uint64_t off0, uint64_t rec0)
{
	const struct src_opts *o = s->o;
	struct ovl_lines *r = &s->lr;
	struct ovl_input in;
	struct rec rc;
	uint64_t idx = rec0;
	int jsonl = o->format == FMT_JSONL;

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 0) != 0) {
		bad(s, in.fd == -1 ? R_OPEN : R_INPUT, NULL, "%s", in.err);
		ovl_input_close(&in);
		return 0;
	}
	if (in.kind != OVL_COMP_NONE && !in.zeof)
		ovl_input_readahead(&in);
	r->max = (size_t)o->max_doc;
	r->read = lines_read;
	r->arg = &in;
	/* Line numbers are known when the chunk is read from its start. */
	ovl_lines_reset(r, s->cx.c->off == 0 && (off0 == 0 ||
	    in.comp != OVL_COMP_NONE || in.stream) ? 1 : 0);
	if (off0 > 0) {
		int k;

		if (in.comp == OVL_COMP_NONE &&
		    s->cx.c->len != OVL_CHUNK_WHOLE) {
			if (off0 > s->cx.c->len)
				resume_error(s, off0, "is beyond the end");
		}
		if (in.comp == OVL_COMP_NONE && !in.stream &&
		    in.kind != OVL_INPUT_ARCHIVE) {
			unsigned char prev;
			ssize_t n = pread(in.fd, &prev, 1,
			    (off_t)(s->cx.c->off + off0 - 1));
			if (n != 1)
				resume_error(s, off0, "is beyond the end");
			if (prev != '\n' && !(o->format == FMT_TEXT &&
			    o->per == PER_FILE))
				resume_error(s, off0, "is not at a record start");
			if (lseek(in.fd, (off_t)(s->cx.c->off + off0),
			    SEEK_SET) == -1)
				ovl_err(OVL_EXIT_DATA, "'%s': cannot seek",
				    s->cx.path);
			if (in.remain != OVL_CHUNK_WHOLE)
				in.remain -= off0;
			r->base = off0;
		} else if ((k = ovl_lines_skip(r, off0)) != 0) {
			if (k == -1) {
				input_failed(s, &in, r->base + r->beg);
				ovl_input_close(&in);
				return r->base + r->end;
			}
			if (k == -2)
				resume_error(s, off0, "is beyond the end");
			if (!(o->format == FMT_TEXT && o->per == PER_FILE))
				resume_error(s, off0, "is not at a record start");
		}
	}
	if (o->format == FMT_TEXT && o->per == PER_FILE) {
		/* One record: the whole chunk, unless the cursor is past it. */
		int got;

		while ((got = ovl_lines_fill(r)) > 0) {
			if (idx > 0 || off0 > 0) {
				r->beg = r->end;
				continue;
			}
			if (r->end - r->beg > o->max_doc)
				break;
		}
		memset(&rc, 0, sizeof(rc));
		if (got < 0) {
			input_failed(s, &in, r->base + r->end);
		} else if (idx == 0 && off0 == 0 && r->end > 0) {
			if (r->end - r->beg > o->max_doc) {
				bad(s, R_TOOLONG, &rc, "document longer than "
				    "--max-doc-bytes (%" PRIu64 ")", o->max_doc);
				r->beg = r->end;
				while ((got = ovl_lines_fill(r)) > 0)
					r->beg = r->end;
				if (got < 0)
					input_failed(s, &in, r->base + r->end);
			} else {
				rc.next_off = r->base + r->end;
				rc.index = 0;
				record(s, &rc, (const char *)r->buf, r->end);
			}
		}
		ovl_input_close(&in);
		return r->base + r->end;
	}
	for (;;) {
		size_t ls, le, nx;
		int k = o->format == FMT_TEXT && o->per == PER_BLANK ?
		    ovl_lines_para(r, &ls, &le, &nx) : ovl_lines_line(r, &ls, &le,
		    &nx);

		if (k == 0)
			break;
		if (k == -1) {
			input_failed(s, &in, r->base + r->beg);
			break;
		}
		memset(&rc, 0, sizeof(rc));
		if (k == -2) {
			uint64_t nxo;
			int para = o->format == FMT_TEXT && o->per == PER_BLANK;

			rc.start_off = r->base + r->beg;
			rc.line = para ? r->pline : r->line;
			bad(s, R_TOOLONG, &rc, "record longer than --max-doc-bytes "
			    "(%" PRIu64 ")", o->max_doc);
			if (ovl_lines_discard(r, para, &nxo) != 0) {
				input_failed(s, &in, r->base + r->beg);
				break;
			}
			idx++;
			continue;
		}
		if (o->format == FMT_TEXT && o->per == PER_BLANK) {
			rc.line = r->pline;
		} else {
			rc.line = r->line;
			if (r->line != 0)
				r->line++;
			if (!jsonl && le > ls && r->buf[le - 1] == '\r')
				le--;
			if (ovl_lines_blank(r->buf + ls, le - ls))
				continue;
		}
		rc.start_off = r->base + ls;
		rc.next_off = r->base + nx;
		rc.index = idx++;
		if (le - ls > o->max_doc) {
			bad(s, R_TOOLONG, &rc, "record longer than --max-doc-bytes "
			    "(%" PRIu64 ")", o->max_doc);
			continue;
		}
		if (jsonl)
			json_record(s, &rc, (const char *)r->buf + ls, le - ls);
		else
			record(s, &rc, (const char *)r->buf + ls, le - ls);
	}
	ovl_input_close(&in);
	return r->base + r->end;
}

/* ---- tar and WebDataset: lib/wds.c ---------------------------------- */

static void
tar_doc(void *arg, const struct ovl_wds_group *g)
{
	struct src *s = arg;
	struct rec rc;

	memset(&rc, 0, sizeof(rc));
	rc.start_off = g->index;
	rc.next_off = g->index + 1;
	rc.index = g->record;
	rc.nimages = g->nimages;
	rc.member = g->member;
	record(s, &rc, g->text, g->len);
}

static void
tar_bad(void *arg, int what, uint64_t index, const char *member,
    const char *msg)
{
	struct src *s = arg;
	struct rec rr;

	memset(&rr, 0, sizeof(rr));
	rr.start_off = index;
	rr.member = member;
	bad(s, what == OVL_WDS_DUP ? R_DUP : what == OVL_WDS_TOOLONG ?
	    R_TOOLONG : R_INPUT, &rr, "%s", msg);
}

static uint64_t
run_tar(struct src *s, uint64_t g0, uint64_t rec0)
{
	const struct src_opts *o = s->o;
	struct ovl_wds_opts wo = { o->format == FMT_WDS, o->ext,
	    (size_t)o->next, o->max_doc };
	struct ovl_wds_cb cb = { tar_doc, tar_bad, s };
	struct ovl_wds_result res;
	struct ovl_input in;

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 1) != 0) {
		bad(s, in.fd == -1 ? R_OPEN : R_INPUT, NULL, "%s", in.err);
		ovl_input_close(&in);
		return 0;
	}
	ovl_wds_read(in.a, &wo, g0, rec0, &s->doc, &cb, &res);
	s->no_text_groups += res.no_text;
	ovl_input_close(&in);
	if (!res.failed && g0 > res.groups)
		resume_error(s, g0, "is beyond the last member group");
	return res.bytes;
}

/* ---- the run -------------------------------------------------------- */

static void
chunk_end(struct src *s, uint64_t bytes)
{
	const struct src_opts *o = s->o;
	double t = elapsed(&s->cx.t0);

	s->bytes += bytes;
	ovl_info(1, "%s: chunk %" PRIu32 ":%" PRIu32 " '%s': %" PRIu64
	    " docs, %" PRIu64 " tokens, %" PRIu64 " bytes, %.1f MB/s", o->name,
	    s->cx.epoch, s->cx.k, s->cx.path, s->cx.docs, s->cx.tokens, bytes,
	    t > 0 ? (double)bytes / t / 1e6 : 0.0);
	if (o->json)
		return;
	{
		struct ovl_chunk_end ce;
		uint8_t *p = ovl_writer_begin(s->w, OVL_CHUNK_END_LEN);

		ce.source = o->id;
		ce.epoch = s->cx.epoch;
		ce.chunk = s->cx.k;
		ce.nchunks = s->cs.n;
		ce.ndocs = s->cx.docs;
		ce.nbytes = bytes;
		ovl_chunk_end_encode(p, &ce);
		ovl_writer_finish(s->w, OVL_CHUNK_END, 0);
	}
}

static void
run_chunk(struct src *s, uint32_t epoch, uint32_t k, uint64_t off0,
    uint64_t rec0)
{
	uint64_t bytes;

	memset(&s->cx, 0, sizeof(s->cx));
	s->cx.epoch = epoch;
	s->cx.k = k;
	s->cx.ci = s->perm[k];
	s->cx.c = &s->cs.v[s->cx.ci];
	s->cx.path = ovl_chunks_path(&s->cs, s->cx.ci);
	clock_gettime(CLOCK_MONOTONIC, &s->cx.t0);
	if (s->o->format == FMT_TAR || s->o->format == FMT_WDS)
		bytes = run_tar(s, off0, rec0);
	else
		bytes = run_lines(s, off0, rec0);
	chunk_end(s, bytes);
}

static void
write_meta(struct src *s)
{
	const struct src_opts *o = s->o;
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	if (o->json)
		return;
	if ((fp = open_memstream(&text, &len)) == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	fprintf(fp, "tokenizer %s\nvocab %" PRIu32 "\neod %" PRIu32 "\n"
	    "source %" PRIu32 " %s\nsource.%s.chunks %" PRIu32 "\n"
	    "source.%s.partition %" PRIu32 "/%" PRIu32 "\n",
	    ovl_tok_name(s->tok), ovl_tok_vocab(s->tok), s->eod, o->id, o->name,
	    o->name, s->cs.n, o->name, o->part_p, o->part_n);
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	{
		uint32_t plen = ovl_meta_payload_len((uint32_t)len);
		uint8_t *p = ovl_writer_begin(s->w, plen);

		ovl_meta_encode(p, text, (uint32_t)len);
		ovl_writer_finish(s->w, OVL_META, 0);
	}
	free(text);
}

static void
run(struct src *s)
{
	const struct src_opts *o = s->o;
	uint32_t n = s->cs.n, e = 0, k0 = 0, k;
	uint64_t off0 = 0, rec0 = 0;
	int inside = 0;

	write_meta(s);
	if (o->resume) {
		const struct ovl_cursor *c = &o->cursor;

		if (c->chunk == n && c->off == 0 && c->rec == 0 &&
		    c->epoch < UINT32_MAX) {
			/* "the start of chunk n": the next epoch's start */
			e = c->epoch + 1;
			goto epochs;
		}
		if (c->chunk >= n)
			ovl_errx(OVL_EXIT_USAGE, "--resume cursor chunk %" PRIu32
			    " is out of range: the source has %" PRIu32 " chunks",
			    c->chunk, n);
		e = c->epoch;
		if (ovl_chunks_owned(c->chunk, o->part_p, o->part_n)) {
			k0 = c->chunk;
			off0 = c->off;
			rec0 = c->rec;
			inside = 1;
		} else
			k0 = c->chunk + 1;
	}
epochs:
	if (o->part_p < n) {
		for (;; e++) {
			if (!o->repeat && e >= o->epochs)
				break;
			ovl_chunks_perm(n, o->shuffle, o->seed, e, s->perm);
			for (k = ovl_chunks_next_owned(k0, n, o->part_p, o->part_n);
			    k < n; k = ovl_chunks_next_owned(k + 1, n, o->part_p,
			    o->part_n)) {
				run_chunk(s, e, k, inside ? off0 : 0,
				    inside ? rec0 : 0);
				inside = 0;
			}
			k0 = 0;
			if (e == UINT32_MAX)
				break;
		}
	}
	if (!o->json)
		ovl_writer_end(s->w);
}

static void
report(struct src *s)
{
	const struct src_opts *o = s->o;
	double t = elapsed(&s->t0);
	uint64_t nskip = 0;
	int i;

	for (i = 0; i < R_NREASONS; i++)
		nskip += s->skipped[i];
	ovl_info(1, "%s: %" PRIu64 " docs, %" PRIu64 " tokens, %" PRIu64
	    " bytes in %.2f s (%.1f MB/s); %" PRIu64 " records, %" PRIu64
	    " filtered by length, %" PRIu64 " by pattern", o->name, s->docs,
	    s->tokens, s->bytes, t, t > 0 ? (double)s->bytes / t / 1e6 : 0.0,
	    s->recs, s->filtered_len, s->filtered_re);
	if (s->no_text_groups > 0)
		ovl_info(0, "%s: %" PRIu64 " member groups without a text member",
		    o->name, s->no_text_groups);
	if (nskip > 0) {
		char buf[1024];
		size_t len = 0;

		for (i = 0; i < R_NREASONS && len < sizeof(buf) - 80; i++)
			if (s->skipped[i] > 0)
				len += (size_t)snprintf(buf + len, sizeof(buf) - len,
				    "%s%" PRIu64 " %s", len > 0 ? ", " : "",
				    s->skipped[i], reason_names[i]);
		ovl_warnx("%s: skipped %" PRIu64 " bad record%s (%s)", o->name,
		    nskip, nskip == 1 ? "" : "s", buf);
	}
}

static pcre2_code *
compile_re(const char *opt, const char *pat)
{
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
	    PCRE2_UTF, &ec, &eo, NULL);

	if (re == NULL) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		ovl_cli_usagex(&cli, "bad --%s pattern at offset %zu: %s", opt,
		    (size_t)eo, (const char *)msg);
	}
	(void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
	return re;
}

static void
setup(struct src *s, struct src_opts *o)
{
	char err[512];
	enum ovl_chunk_cut cut = OVL_CUT_NONE;

	memset(s, 0, sizeof(*s));
	s->o = o;
	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	if (!o->json && o->output == NULL)
		ovl_io_refuse_tty(STDOUT_FILENO);
	if ((s->tok = ovl_tok_open(o->tokenizer, err, sizeof(err))) == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	if (o->special != NULL &&
	    ovl_tok_set_special(s->tok, o->special, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "--special: %s", err);
	if (o->eod_token != NULL &&
	    ovl_tok_set_eod(s->tok, o->eod_token, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	s->eod = ovl_tok_eod(s->tok);
	s->tok_bytes = strcmp(ovl_tok_name(s->tok), "bytes") == 0;
	if (ovl_jsonl_path_init(&s->path, o->field) != 0)
		ovl_cli_usagex(&cli, "bad --field '%s' (dotted keys, none empty)",
		    o->field);
	if (o->match != NULL)
		s->re_match = compile_re("match", o->match);
	if (o->drop != NULL)
		s->re_drop = compile_re("drop", o->drop);
	if (s->re_match != NULL || s->re_drop != NULL) {
		s->md = pcre2_match_data_create(1, NULL);
		s->mctx = pcre2_match_context_create(NULL);
		s->jst = pcre2_jit_stack_create(32 << 10, 8 << 20, NULL);
		pcre2_jit_stack_assign(s->mctx, NULL, s->jst);
	}
	if (o->format == FMT_AUTO) {
		/* Guess from the first path (a glob's text is enough here). */
		o->format = guess_format(o->paths[0]);
		if (o->format == FMT_AUTO)
			ovl_cli_usagex(&cli, "cannot guess the format of '%s': "
			    "use --format", o->paths[0]);
	}
	if (o->format == FMT_JSONL || (o->format == FMT_TEXT && o->per == PER_LINE))
		cut = OVL_CUT_LINES;
	else if (o->format == FMT_TEXT && o->per == PER_BLANK)
		cut = OVL_CUT_PARAGRAPHS;
	if (ovl_chunks_list(&s->cs, o->paths, (size_t)o->npaths, o->chunk_size,
	    cut, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_DATA, "%s", err);
	check_streams(s);
	s->perm = ovl_xcalloc(s->cs.n, sizeof(*s->perm));
	if (ovl_input_ctx_init(&s->inx) != 0)
		ovl_errx(OVL_EXIT_DATA, "out of memory");
}

/*
 * A warm standby (shadow loader): everything is loaded; wait for the
 * supervisor to write the cursor to resume at, one line on the control
 * FIFO. End of file without a line means "not needed": exit quietly.
 */
static void
standby(struct src_opts *o)
{
	char line[OVL_CURSOR_STRLEN + 2];
	size_t len = 0;
	ssize_t n;
	int fd;

	fd = open(o->standby, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot open control FIFO '%s'", o->standby);
	while (len < sizeof(line) - 1) {
		n = read(fd, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ovl_err(OVL_EXIT_DATA, "cannot read '%s'", o->standby);
		if (n == 0)
			break;
		len += (size_t)n;
		if (memchr(line, '\n', len) != NULL)
			break;
	}
	close(fd);
	if (len == 0) {
		ovl_info(1, "%s: standby released", o->name);
		exit(OVL_EXIT_OK);
	}
	line[len] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (ovl_cursor_parse(line, &o->cursor) != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': bad cursor '%s'", o->standby, line);
	o->resume = 1;
	ovl_info(1, "%s: taking over at %s", o->name, line);
}

/* Open the output (after a standby, only now) and the frame writer. */
static void
open_output(struct src *s)
{
	const struct src_opts *o = s->o;
	int fd;

	if (o->output != NULL) {
		fd = open(o->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o->output);
		if (dup2(fd, STDOUT_FILENO) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot redirect to '%s'", o->output);
		close(fd);
		if (!o->json)
			ovl_io_refuse_tty(STDOUT_FILENO);
	}
	if (o->json) {
		static char obuf[1 << 20];
		setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	} else
		s->w = ovl_writer_new(STDOUT_FILENO, o->output != NULL ?
		    o->output : "standard output");
}

static void
teardown(struct src *s)
{
	ovl_writer_free(s->w);
	ovl_tok_free(s->tok);
	ovl_jsonl_path_free(&s->path);
	pcre2_code_free(s->re_match);
	pcre2_code_free(s->re_drop);
	pcre2_match_data_free(s->md);
	pcre2_match_context_free(s->mctx);
	pcre2_jit_stack_free(s->jst);
	ovl_input_ctx_free(&s->inx);
	ovl_lines_free(&s->lr);
	free(s->perm);
	ovl_buf_free(&s->scratch);
	ovl_buf_free(&s->doc);
	ovl_u32vec_free(&s->toks);
	ovl_chunks_free(&s->cs);
}

int
main(int argc, char **argv)
{
	struct src_opts o;
	struct src s;

	ovl_cli_init(&cli);
	parse_opts(&o, argc, argv);
	setup(&s, &o);
	if (o.standby != NULL) {
		standby(&o);
		/* rates (--throttle, -v) count from the takeover */
		clock_gettime(CLOCK_MONOTONIC, &s.t0);
	}
	open_output(&s);
	run(&s);
	report(&s);
	teardown(&s);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}
