/*
 * ovl-source: options, setup and main. See source.h.
 */
#include "source.h"

static struct ovl_cli cli = {
	"ovl-source",
	"ovl-source [options] NAME PATH...",
	NULL,	/* the formats' names from the plan's (main) */
};

static const char help[] =
	"Read one source and write its documents as DOC frames (or --json lines).\n"
	"\n"
	"  --format F            %s\n"
	"                        (default: from the name)\n"
	"  --field PATH          jsonl field or parquet column, dotted (default\n"
	"                        text)\n"
	"  --json-parser P       fast (default) or jansson\n"
	"  --field-type T        jsonl: %s (default %s); ids: an array of\n"
	"                        token ids, pre-tokenized, checked against the\n"
	"                        tokenizer\n"
	"  --doc-per MODE        text: line (default), blank-line or file;\n"
	"                        npy: eod (default), offsets or file\n"
	"  --member-ext EXT      tar/wds: the text member(s), e.g. .c (repeatable)\n"
	"  --tokenizer SPEC      bytes (default), tiktoken:FILE[:PATTERN],\n"
	"                        hf:FILE (a Hugging Face tokenizer.json) or\n"
	"                        sentencepiece:FILE (a tokenizer.model)\n"
	"  --eod-token TOK       end-of-document token, text or id\n"
	"  --bos-token TOK       beginning-of-document token, text or id\n"
	"                        (default: a tokenizer.json's post_processor's)\n"
	"  --add-special-tokens yes|no\n"
	"                        yes (default): a tokenizer.json's post_processor\n"
	"                        gives the beginning-of-document token\n"
	"  --token-bits N        ids in DOC frames: 16 or 32 (default: 16 when\n"
	"                        the vocabulary has at most 65,536 ids)\n"
	"  --image-cost SPEC     place each image of a WebDataset sample as a run\n"
	"                        of placeholder tokens: fixed:N, patch:P or\n"
	"                        dynamic:P:MERGE:MIN_PIXELS:MAX_PIXELS\n"
	"  --image-token TOK     the placeholder token (text or id)\n"
	"  --images MODE         %s (default %s): placed images\n"
	"                        travel as their bytes, as a reference (shard,\n"
	"                        member, offset, length) or not at all (IMAGE\n"
	"                        frames, ovl-frame(5))\n"
	"  --special POLICY      special-token text in documents (tiktoken):\n"
	"                        %s (default %s)\n"
	"  --min-tokens N        drop documents with fewer tokens\n"
	"  --max-tokens N        drop documents with more tokens\n"
	"  --match REGEX         keep only documents matching (PCRE2)\n"
	"  --drop REGEX          drop documents matching (PCRE2)\n"
	"  --chunk-size SIZE     cut large uncompressed files (e.g. 64M; 0: never)\n"
	"  --partition P/N       read the canonical chunks k with k % N == P\n"
	"  --shuffle-seed S      permute the chunk order per epoch\n"
	"  --shuffle-window W    permute the documents of every W records of a\n"
	"                        chunk, of every G chunks (Gchunks), of every\n"
	"                        chunk (chunk) or none (none), from the seed\n"
	"  --split W,W[,W]       held-out splits by document: the weights of\n"
	"                        train, validation[, test]\n"
	"  --split-keep NAME     the split this source reads: %s\n"
	"                        (default %s)\n"
	"  --split-seed S        the seed of the split assignment (default 0)\n"
	"  --split-root DIR      a file's name for the assignment is its path\n"
	"                        relative to DIR\n"
	"  --epochs N            passes over the source (default 1)\n"
	"  --repeat              repeat forever\n"
	"  --resume CURSOR       start just after cursor E:C:OFF:REC\n"
	"  --on-error MODE       %s (default %s) bad records, counted\n"
	"  --max-doc-bytes SIZE  longest record (default 32Mi)\n"
	"  --id N                source id in frames (default 0)\n"
	"  --text                include the text in DOC frames\n"
	"  --throttle RATE       at most RATE input bytes/s (4M) or docs/s (200docs)\n"
	"  --json                one JSON object per document, for people\n"
	"  --output FILE         write to FILE (a FIFO, say, or a tcp: endpoint)\n"
	"                        instead of standard output\n"
	"  --retries N           remote files: retries of a failed request with no\n"
	"                        byte received in between (default 8)\n"
	"  --retry-wait SECONDS  remote files: wait before the first retry, doubled\n"
	"                        each time up to 30 s (default 0.5)\n"
	"  --s3-endpoint URL     s3:// paths: this server, path-style (default\n"
	"                        AWS_ENDPOINT_URL, else AWS's own)\n"
	"  --standby CTL         warm standby: load, then wait for a cursor line on\n"
	"                        CTL and resume there (shadow loaders; needs --output)\n"
	OVL_NET_HELP
	"  -v, --verbose         per-chunk figures on stderr\n"
	"  -q, --quiet           only errors\n"
	"  -h, --help            this help\n"
	"  -V, --version         the version\n";


/* ---- options -------------------------------------------------------- */

enum {
	O_FORMAT = 256, O_FIELD, O_FIELD_TYPE, O_PARSER, O_DOCPER, O_EXT, O_TOKENIZER,
	O_EOD, O_BOS, O_MIN, O_MAX, O_MATCH, O_DROP, O_CHUNK, O_PART, O_SEED,
	O_EPOCHS, O_REPEAT, O_RESUME, O_ONERR, O_MAXDOC, O_ID, O_TEXT, O_JSON,
	O_THROTTLE, O_OUTPUT, O_STANDBY, O_SPECIAL, O_RETRIES, O_RETRY_WAIT,
	O_S3_ENDPOINT, O_IMAGE_COST, O_IMAGE_TOKEN, O_TOKEN_BITS, O_IMAGES,
	O_WINDOW, O_ADD_SPECIAL, O_SPLIT, O_SPLIT_KEEP, O_SPLIT_SEED, O_SPLIT_ROOT
};

static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "format", required_argument, NULL, O_FORMAT },
	{ "field", required_argument, NULL, O_FIELD },
	{ "json-parser", required_argument, NULL, O_PARSER },
	{ "field-type", required_argument, NULL, O_FIELD_TYPE },
	{ "doc-per", required_argument, NULL, O_DOCPER },
	{ "member-ext", required_argument, NULL, O_EXT },
	{ "tokenizer", required_argument, NULL, O_TOKENIZER },
	{ "eod-token", required_argument, NULL, O_EOD },
	{ "bos-token", required_argument, NULL, O_BOS },
	{ "add-special-tokens", required_argument, NULL, O_ADD_SPECIAL },
	{ "min-tokens", required_argument, NULL, O_MIN },
	{ "max-tokens", required_argument, NULL, O_MAX },
	{ "match", required_argument, NULL, O_MATCH },
	{ "drop", required_argument, NULL, O_DROP },
	{ "chunk-size", required_argument, NULL, O_CHUNK },
	{ "partition", required_argument, NULL, O_PART },
	{ "shuffle-seed", required_argument, NULL, O_SEED },
	{ "shuffle-window", required_argument, NULL, O_WINDOW },
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
	{ "retries", required_argument, NULL, O_RETRIES },
	{ "retry-wait", required_argument, NULL, O_RETRY_WAIT },
	{ "s3-endpoint", required_argument, NULL, O_S3_ENDPOINT },
	{ "token-bits", required_argument, NULL, O_TOKEN_BITS },
	{ "image-cost", required_argument, NULL, O_IMAGE_COST },
	{ "image-token", required_argument, NULL, O_IMAGE_TOKEN },
	{ "images", required_argument, NULL, O_IMAGES },
	{ "split", required_argument, NULL, O_SPLIT },
	{ "split-keep", required_argument, NULL, O_SPLIT_KEEP },
	{ "split-seed", required_argument, NULL, O_SPLIT_SEED },
	{ "split-root", required_argument, NULL, O_SPLIT_ROOT },
	OVL_NET_LONGOPTS,
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

static void
parse_opts(struct src_opts *o, int argc, char **argv)
{
	int c, images_set = 0;
	double d;
	const char *why;
	char err[256];

	memset(o, 0, sizeof(*o));
	o->format = FMT_AUTO;
	if (ovl_remote_conf_env(&o->remote, err, sizeof(err)) != 0)
		ovl_cli_usagex(&cli, "%s", err);
	o->field = "text";
	o->tokenizer = "bytes";
	o->add_special = 1;
	o->epochs = 1;
	o->part_n = 1;
	o->max_doc = 32ull << 20;
	while ((c = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, c) || ovl_net_cli(&cli, c, optarg))
			continue;
		switch (c) {
		case O_FORMAT:
			o->format = ovl_cli_choice_opt(&cli, "--format",
			    ovl_plan_formats, optarg);
			break;
		case O_FIELD:
			o->field = optarg;
			o->field_set = 1;
			break;
		case O_FIELD_TYPE:
			o->ids = ovl_cli_choice_opt(&cli, "--field-type",
			    ovl_plan_fieldtypes, optarg);
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
			/* the plan's names, in PER_* order */
			o->per = ovl_cli_choice_opt(&cli, "--doc-per",
			    ovl_plan_docpers, optarg);
			o->per_set = 1;
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
		case O_BOS:
			o->bos_token = optarg;
			break;
		case O_ADD_SPECIAL:
			o->add_special = ovl_cli_choice_opt(&cli,
			    "--add-special-tokens", ovl_plan_yesno, optarg);
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
		case O_WINDOW:
			if (ovl_docshuf_parse(optarg, &o->window) != 0)
				ovl_cli_usagex(&cli, "bad --shuffle-window '%s' "
				    "(a count of records up to 2^32, "
				    "Gchunks, chunk or none)", optarg);
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
			/* the plan's names: fail, skip */
			o->skip = ovl_cli_choice_opt(&cli, "--on-error",
			    ovl_plan_onerrors, optarg);
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
		case O_SPLIT:
			if (ovl_split_parse(optarg, &o->split, &why) != 0)
				ovl_cli_usagex(&cli, "bad --split '%s': %s",
				    optarg, why);
			break;
		case O_SPLIT_KEEP:
			o->split_keep = (unsigned)ovl_cli_choice_opt(&cli,
			    "--split-keep", ovl_split_names, optarg);
			break;
		case O_SPLIT_SEED:
			o->split_seed = opt_u64("split-seed", optarg, UINT64_MAX);
			break;
		case O_SPLIT_ROOT:
			o->split_root = optarg;
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
		case O_RETRIES:
			o->remote.retries = (int)opt_u64("retries", optarg, 1000);
			break;
		case O_RETRY_WAIT:
			if (ovl_num_double(optarg, &d) != 0 || !(d >= 0 &&
			    d <= 3600))
				ovl_cli_usagex(&cli, "bad value for --retry-wait: "
				    "'%s' (seconds, 0 to 3600)", optarg);
			o->remote.retry_wait = d;
			break;
		case O_IMAGE_COST:
			if (ovl_image_cost_parse(optarg, &o->image_cost, err,
			    sizeof(err)) != 0)
				ovl_cli_usagex(&cli, "%s", err);
			break;
		case O_IMAGE_TOKEN:
			o->image_token = optarg;
			break;
		case O_IMAGES:
			o->images = ovl_cli_choice_opt(&cli, "--images",
			    ovl_plan_imagemodes, optarg);
			images_set = 1;
			break;
		case O_TOKEN_BITS:
			if (strcmp(optarg, "16") != 0 && strcmp(optarg, "32") != 0)
				ovl_cli_usagex(&cli, "--token-bits must be 16 or 32");
			o->token_bits = (unsigned)atoi(optarg);
			break;
		case O_S3_ENDPOINT:
			if (strncmp(optarg, "http://", 7) != 0 &&
			    strncmp(optarg, "https://", 8) != 0)
				ovl_cli_usagex(&cli, "bad --s3-endpoint '%s' "
				    "(http://HOST[:PORT] or https://...)", optarg);
			o->remote.s3_endpoint = optarg;
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
	if ((o->image_cost.kind != 0) != (o->image_token != NULL))
		ovl_cli_usagex(&cli, "--image-cost and --image-token go "
		    "together");
	if (images_set && o->image_cost.kind == 0)
		ovl_cli_usagex(&cli, "--images sends the images --image-cost "
		    "places");
	if (o->window.kind != OVL_DOCSHUF_OFF && o->json)
		ovl_cli_usagex(&cli, "--shuffle-window writes frames: not with "
		    "--json (ovl-mix --json shows a shuffled stream)");
	if (o->standby != NULL && o->output == NULL)
		ovl_cli_usagex(&cli, "--standby needs --output (the FIFO to take "
		    "over)");
	ovl_net_check(o->output, OVL_NET_WRITE);
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

static void
report(struct src *s)
{
	const struct src_opts *o = s->o;
	double t = ovl_io_since(&s->t0);
	uint64_t nskip = 0;
	int i;

	for (i = 0; i < R_NREASONS; i++)
		nskip += s->skipped[i];
	ovl_info(1, "%s: %" PRIu64 " docs, %" PRIu64 " tokens, %" PRIu64
	    " bytes in %.2f s (%.1f MB/s); %" PRIu64 " records, %" PRIu64
	    " filtered by length, %" PRIu64 " by pattern", o->name, s->docs,
	    s->tokens, s->bytes, t, t > 0 ? (double)s->bytes / t / 1e6 : 0.0,
	    s->recs, s->filtered_len, s->filtered_re);
	if (o->split.n != 0)
		ovl_info(1, "%s: split %s: %" PRIu64 " records in other splits",
		    o->name, ovl_split_names[o->split_keep], s->filtered_split);
	if (s->images > 0)
		ovl_info(1, "%s: %" PRIu64 " images placed as %" PRIu64
		    " tokens", o->name, s->images, s->image_tokens);
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
	char why[600];
	pcre2_code *re;

	if (ovl_pcre_load(why, sizeof(why)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "--%s: %s", opt, why);
	re = ovl_pcre.compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
	    PCRE2_UTF, &ec, &eo, NULL);
	if (re == NULL) {
		PCRE2_UCHAR msg[256];
		ovl_pcre.get_error_message(ec, msg, sizeof(msg));
		ovl_cli_usagex(&cli, "bad --%s pattern at offset %zu: %s", opt,
		    (size_t)eo, (const char *)msg);
	}
	(void)ovl_pcre.jit_compile(re, PCRE2_JIT_COMPLETE);
	return re;
}

static void
setup(struct src *s, struct src_opts *o)
{
	char err[512];
	const struct src_format *f;
	enum ovl_chunk_cut cut;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->sh.win = o->window;
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
	if (o->bos_token != NULL &&
	    ovl_tok_set_bos(s->tok, o->bos_token, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	ovl_tok_set_add_special(s->tok, o->add_special);
	if (ovl_tok_check_template(s->tok, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	s->eod = ovl_tok_eod(s->tok);
	if (s->eod == OVL_TOK_NONE)
		ovl_errx(OVL_EXIT_USAGE, "tokenizer %s (%s) has no usual "
		    "end-of-document token: name one with --eod-token",
		    ovl_tok_name(s->tok), o->tokenizer);
	s->bos = ovl_tok_bos(s->tok);
	/* every id is checked below the vocabulary: 16 bits hold them all */
	s->width = ovl_tok_vocab(s->tok) <= 65536 ? 2 : 4;
	if (o->token_bits == 32)
		s->width = 4;
	else if (o->token_bits == 16 && s->width != 2)
		ovl_errx(OVL_EXIT_USAGE, "--token-bits 16: tokenizer %s has %"
		    PRIu32 " ids, more than 16 bits hold", ovl_tok_name(s->tok),
		    ovl_tok_vocab(s->tok));
	if (o->image_token != NULL && ovl_tok_lookup(s->tok, "image",
	    o->image_token, &s->image_id, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "--image-token: %s", err);
	if (o->image_token != NULL && (s->image_id == s->eod ||
	    (s->bos != OVL_TOK_NONE && s->image_id == s->bos)))
		ovl_errx(OVL_EXIT_USAGE, "--image-token: %" PRIu32 " is the "
		    "%s token", s->image_id, s->image_id == s->eod ?
		    "end-of-document" : "beginning-of-document");
	s->tok_bytes = strcmp(ovl_tok_name(s->tok), "bytes") == 0 &&
	    s->bos == OVL_TOK_NONE;
	if (ovl_jsonl_path_init(&s->path, o->field) != 0)
		ovl_cli_usagex(&cli, "bad --field '%s' (dotted keys, none empty)",
		    o->field);
	if (o->match != NULL)
		s->re_match = compile_re("match", o->match);
	if (o->drop != NULL)
		s->re_drop = compile_re("drop", o->drop);
	if (s->re_match != NULL || s->re_drop != NULL) {
		s->md = ovl_pcre.match_data_create(1, NULL);
		s->mctx = ovl_pcre.match_context_create(NULL);
		s->jst = ovl_pcre.jit_stack_create(32 << 10, 8 << 20, NULL);
		ovl_pcre.jit_stack_assign(s->mctx, NULL, s->jst);
	}
	if (o->format == FMT_AUTO) {
		/* Guess from the first path (a glob's text is enough here). */
		o->format = guess_format(o->paths[0]);
		if (o->format == FMT_AUTO)
			ovl_cli_usagex(&cli, "cannot guess the format of '%s': "
			    "use --format", o->paths[0]);
	}
	f = src_formats[o->format];
	/* a post_processor's template is for text: ids come as they are */
	if (o->bos_token == NULL && (o->ids || (f->flags & SRC_FMT_TOKEN_DOCS)))
		s->bos = OVL_TOK_NONE;
	if (o->ids && !(f->flags & SRC_FMT_IDS))
		ovl_cli_usagex(&cli, "--field-type ids reads jsonl only");
	if (o->image_cost.kind != 0 && !(f->flags & SRC_FMT_IMAGES))
		ovl_cli_usagex(&cli, "--image-cost places the images of "
		    "WebDataset samples: --format wds");
	if (f->flags & SRC_FMT_TOKEN_DOCS) {
		if (!o->per_set)
			o->per = PER_EOD;
		if (o->per != PER_EOD && o->per != PER_OFFSETS && o->per != PER_FILE)
			ovl_cli_usagex(&cli, "%s: --doc-per eod, offsets or file",
			    ovl_plan_formats[o->format]);
	} else if (o->per == PER_EOD || o->per == PER_OFFSETS)
		ovl_cli_usagex(&cli, "--doc-per %s is for npy token files",
		    ovl_plan_docpers[o->per]);
	cut = f->cut_by != NULL ? f->cut_by(o) : f->cut;
	ovl_remote_configure(&o->remote);
	if (ovl_chunks_list(&s->cs, o->paths, (size_t)o->npaths, o->chunk_size,
	    cut, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_DATA, "%s", err);
	check_streams(s);
	if (o->image_cost.kind != 0 && o->images == IMG_REF) {
		uint32_t k;

		/* a reference is a byte offset a trainer seeks to in the file */
		for (k = 0; k < s->cs.n; k++)
			if (s->cs.v[k].comp != OVL_COMP_NONE)
				ovl_errx(OVL_EXIT_USAGE, "--images ref: '%s' is "
				    "compressed (or a stream): a reference's "
				    "offset is one in a plain tar file",
				    s->cs.files[s->cs.v[k].file]);
	}
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
	char name[512];

	snprintf(name, sizeof(name), "standard output");
	if (o->output != NULL) {
		ovl_net_redirect(o->output, OVL_NET_WRITE, STDOUT_FILENO, name,
		    sizeof(name));
		if (!o->json)
			ovl_io_refuse_tty(STDOUT_FILENO);
	}
	if (o->json) {
		static char obuf[1 << 20];
		setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	} else
		s->w = ovl_writer_new(STDOUT_FILENO, name);
}

static void
teardown(struct src *s)
{
	ovl_writer_free(s->w);
	ovl_tok_free(s->tok);
	ovl_jsonl_path_free(&s->path);
	if (ovl_pcre.code_free != NULL) {	/* loaded for --match/--drop */
		ovl_pcre.code_free(s->re_match);
		ovl_pcre.code_free(s->re_drop);
		ovl_pcre.match_data_free(s->md);
		ovl_pcre.match_context_free(s->mctx);
		ovl_pcre.jit_stack_free(s->jst);
	}
	ovl_input_ctx_free(&s->inx);
	ovl_lines_free(&s->lr);
	free(s->perm);
	ovl_buf_free(&s->scratch);
	ovl_buf_free(&s->doc);
	ovl_u32vec_free(&s->toks);
	ovl_u32vec_free(&s->itoks);
	ovl_chunks_free(&s->cs);
	shuf_free(s);
	free(s->gbytes);
}

/* cli.help: help with the choices' names from their tables */
static void
help_text(void)
{
	char *l[6];
	size_t i;

	l[0] = ovl_cli_choices(ovl_plan_formats, ", ", " or ");
	l[1] = ovl_cli_choices(ovl_plan_fieldtypes, ", ", " or ");
	l[2] = ovl_cli_choices(ovl_plan_imagemodes, ", ", " or ");
	l[3] = ovl_cli_choices(ovl_bpe_special_names, ", ", " or ");
	l[4] = ovl_cli_choices(ovl_plan_onerrors, ", ", " or ");
	l[5] = ovl_cli_choices(ovl_split_names, ", ", " or ");
	cli.help = ovl_cli_help_fill(help, (const char *[]){ l[0], l[1],
	    ovl_plan_fieldtypes[0], l[2], ovl_plan_imagemodes[IMG_INLINE],
	    l[3], ovl_bpe_special_names[OVL_BPE_PLAIN], l[5],
	    ovl_split_names[0], l[4], ovl_plan_onerrors[0], NULL });
	for (i = 0; i < 6; i++)
		free(l[i]);
}

int
main(int argc, char **argv)
{
	struct src_opts o;
	struct src s;

	help_text();
	ovl_cli_init(&cli);
	ovl_ring_default_size(OVL_RING_SIZE_SOURCE);
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

