/*
 * ovl-gendocs: a deterministic stream of synthetic DOC frames for the
 * constructor's tests and benchmark (not installed).
 *
 *   ovl-gendocs [--docs N] [--seed S] [--median M] [--sigma X]
 *       [--tail PCT] [--tail-min L] [--tail-max L] [--lengths a,b,...]
 *       [--sources K] [--images K] [--mixed]
 *       [--checkpoint-every K --ranks R --micro-batches M --seq-len SCHED]
 *       [--from-checkpoint N] [--exact] [--jsonl] [--bits 16|32]
 *
 * Lengths are lognormal around the median (sigma X) with PCT percent of
 * documents log-uniform in [tail-min, tail-max], or the --lengths list
 * repeated. With --checkpoint-every it places barriers as ovl-mix does
 * (src/lib/step.h): STATE(mix, n) and BARRIER(n, ...) before the document
 * in which step n*K opens; --from-checkpoint N writes META and then only
 * what follows BARRIER N (a resumed mixer's stream). --exact cuts steps
 * as a plan with 'uniform yes' does (the step cutter's exact mode).
 * --jsonl writes the documents as JSON lines {"text":"..."} instead, each
 * of its length in bytes (lowercase words), for ovl-source (a corpus of
 * long-tailed documents for scripts/bench-memory and t27). --bits 16 writes
 * 16-bit token ids (ovl-frame(5) minor 2; default 32).
 */
#include <errno.h>
#include <math.h>
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
#include "num.h"
#include "rng.h"
#include "step.h"

static const struct ovl_cli cli = {
	"ovl-gendocs",
	"ovl-gendocs [options]",
	"synthetic DOC frames for the constructor's tests and benchmark\n"
};

static uint64_t
num(const char *opt, const char *s)
{
	uint64_t v;

	if (ovl_num_size(s, &v) != 0)
		ovl_cli_usagex(&cli, "bad %s '%s'", opt, s);
	return v;
}

/* The length of document d: the --lengths list, the tail or lognormal. */
static uint32_t
draw_len(struct ovl_rng *rng, uint64_t d, const uint32_t *lens, size_t nlens,
    uint64_t median, double sigma, double tail, uint64_t tail_min,
    uint64_t tail_max)
{
	if (nlens > 0)
		return lens[d % nlens];
	if (ovl_rng_double(rng) * 100 < tail) {
		double u = ovl_rng_double(rng);
		return (uint32_t)(tail_min * exp(u * log((double)tail_max /
		    tail_min)));
	} else {
		double u1 = ovl_rng_double(rng) + 1e-300;
		double u2 = ovl_rng_double(rng);
		double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		double l = exp(log((double)median) + sigma * z);
		return l < 1 ? 1 : l > 1e7 ? 10000000 : (uint32_t)l;
	}
}

#define POOL	(1u << 16)

/*
 * --jsonl: each document a line {"text":"..."} of its length in bytes,
 * slices of a pool of random lowercase words (fast enough for gigabytes).
 */
static int
gen_jsonl(uint64_t ndocs, uint64_t seed, uint64_t median, double sigma,
    double tail, uint64_t tail_min, uint64_t tail_max, const uint32_t *lens,
    size_t nlens)
{
	static char pool[POOL];
	struct ovl_rng rng, trng;
	uint64_t d;
	size_t i;
	FILE *out = stdout;

	ovl_rng_seed(&rng, seed);
	ovl_rng_seed2(&trng, seed, 1);
	for (i = 0; i < POOL; i++)
		pool[i] = ovl_rng_next(&trng) % 6 == 0 ? ' ' :
		    (char)('a' + ovl_rng_next(&trng) % 26);
	for (d = 0; d < ndocs; d++) {
		uint32_t len = draw_len(&rng, d, lens, nlens, median, sigma,
		    tail, tail_min, tail_max), n;

		fputs("{\"text\":\"", out);
		while (len > 0) {
			size_t at = (size_t)(ovl_rng_next(&trng) % (POOL / 2));
			n = len < POOL / 2 ? len : POOL / 2;
			fwrite(pool + at, 1, n, out);
			len -= n;
		}
		fputs("\"}\n", out);
	}
	ovl_io_close_stdout();
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		OVL_CLI_LONGOPTS,
		{ "docs", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "median", required_argument, NULL, 'm' },
		{ "sigma", required_argument, NULL, 'g' },
		{ "tail", required_argument, NULL, 't' },
		{ "tail-min", required_argument, NULL, 'a' },
		{ "tail-max", required_argument, NULL, 'b' },
		{ "lengths", required_argument, NULL, 'l' },
		{ "sources", required_argument, NULL, 'k' },
		{ "images", required_argument, NULL, 'i' },
		{ "mixed", no_argument, NULL, 'x' },
		{ "checkpoint-every", required_argument, NULL, 'c' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "micro-batches", required_argument, NULL, 'M' },
		{ "seq-len", required_argument, NULL, 'L' },
		{ "from-checkpoint", required_argument, NULL, 'f' },
		{ "exact", no_argument, NULL, 'e' },
		{ "jsonl", no_argument, NULL, 'j' },
		{ "bits", required_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 }
	};
	uint32_t width = 4;
	uint64_t ndocs = 100, seed = 1, median = 500, tail_min = 8192,
	    tail_max = 65536, nsrc = 1, images = 0, every = 0, ranks = 1,
	    mb = 1, from = 0;
	double sigma = 1.0, tail = 5.0;
	uint32_t lens[1024];
	size_t nlens = 0;
	uint64_t at[64];
	uint32_t sl[64];
	size_t nst = 1;
	int mixed = 0, exact = 0, jsonl = 0, opt;
	struct ovl_rng rng, trng;
	struct ovl_stepcfg cfg;
	struct ovl_stepcut cut;
	struct ovl_writer *w;
	struct ovl_u32vec toks = { 0 };
	char meta[4096], *p, *e;
	uint64_t d, mixtok = 0, nckpt = 0;
	int emitting;

	at[0] = 0;
	sl[0] = 2048;
	ovl_cli_init(&cli);
	while ((opt = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, opt))
			continue;
		switch (opt) {
		case 'n': ndocs = num("--docs", optarg); break;
		case 's': seed = num("--seed", optarg); break;
		case 'm': median = num("--median", optarg); break;
		case 'g':
			if (ovl_num_double(optarg, &sigma) != 0)
				ovl_cli_usagex(&cli, "bad --sigma");
			break;
		case 't':
			if (ovl_num_double(optarg, &tail) != 0)
				ovl_cli_usagex(&cli, "bad --tail");
			break;
		case 'a': tail_min = num("--tail-min", optarg); break;
		case 'b': tail_max = num("--tail-max", optarg); break;
		case 'k': nsrc = num("--sources", optarg); break;
		case 'i': images = num("--images", optarg); break;
		case 'x': mixed = 1; break;
		case 'e': exact = 1; break;
		case 'j': jsonl = 1; break;
		case 'B':
			width = num("--bits", optarg) / 8;
			if (width != 2 && width != 4)
				ovl_cli_usagex(&cli, "--bits must be 16 or 32");
			break;
		case 'c': every = num("--checkpoint-every", optarg); break;
		case 'r': ranks = num("--ranks", optarg); break;
		case 'M': mb = num("--micro-batches", optarg); break;
		case 'f': from = num("--from-checkpoint", optarg); break;
		case 'l':
			for (p = optarg; *p != '\0' && nlens < 1024; p = e) {
				uint64_t v = strtoull(p, &e, 10);
				if (e == p || v == 0 || v > 1u << 26)
					ovl_cli_usagex(&cli, "bad --lengths");
				lens[nlens++] = (uint32_t)v;
				if (*e == ',')
					e++;
			}
			break;
		case 'L':
			nst = 0;
			for (p = optarg; *p != '\0' && nst < 64; p = e) {
				uint64_t v = strtoull(p, &e, 10), a = 0;
				if (*e == '@')
					a = strtoull(e + 1, &e, 10);
				if (v == 0 || (nst == 0 && a != 0) ||
				    (nst > 0 && a <= at[nst - 1]))
					ovl_cli_usagex(&cli, "bad --seq-len");
				sl[nst] = (uint32_t)v;
				at[nst++] = a;
				if (*e == ',')
					e++;
				else if (*e != '\0')
					ovl_cli_usagex(&cli, "bad --seq-len");
			}
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (nsrc == 0 || nsrc > 64 || (from > 0 && every == 0))
		ovl_cli_usagex(&cli, "bad options");
	if (every > 0)
		mixed = 1;
	if (jsonl)
		return gen_jsonl(ndocs, seed, median, sigma, tail, tail_min,
		    tail_max, lens, nlens);
	ovl_io_refuse_tty(STDOUT_FILENO);
	w = ovl_writer_new(STDOUT_FILENO, "standard output");
	p = meta;
	p += sprintf(p, "tokenizer synthetic\nvocab 50000\neod 0\n");
	for (d = 0; d < nsrc; d++)
		p += sprintf(p, "source %llu gen%llu\n", (unsigned long long)d,
		    (unsigned long long)d);
	{
		uint32_t ml = ovl_meta_payload_len((uint32_t)(p - meta));
		uint8_t *pl = ovl_writer_begin(w, ml);
		ovl_meta_encode(pl, meta, (uint32_t)(p - meta));
		ovl_writer_finish(w, OVL_META, 0);
	}
	cfg.nseq = (uint32_t)(ranks * mb);
	cfg.budget = 0;
	cfg.nstages = nst;
	cfg.at = at;
	cfg.seq_len = sl;
	cfg.exact = exact;
	ovl_stepcut_init(&cut, &cfg);
	ovl_rng_seed(&rng, seed);
	ovl_rng_seed2(&trng, seed, 1);
	emitting = from == 0;
	for (d = 0; d < ndocs; d++) {
		struct ovl_doc doc;
		uint32_t len, i, plen;
		uint64_t off = 0;
		uint8_t *pl;
		int opened;

		len = draw_len(&rng, d, lens, nlens, median, sigma, tail,
		    tail_min, tail_max);
		memset(&doc, 0, sizeof(doc));
		doc.source = (uint32_t)(d % nsrc);
		doc.flags = mixed ? OVL_DOC_MIXED : 0;
		doc.record = d;
		doc.nchunks = 1;
		doc.nimages = images > 0 && d % images == 0 ? 2 : 0;
		doc.start_off = d * 100;
		doc.next_off = (d + 1) * 100;
		doc.next_rec = d + 1;
		doc.mix_pos = d;
		doc.mix_tokens = mixtok;
		doc.ntokens = len;
		/* barriers before the document, as ovl-mix places them */
		while (every > 0 && off < len) {
			plen = ovl_stepcut_next(&cut, len - off, &opened);
			if (opened && cut.step % every == 0) {
				struct ovl_barrier b;
				struct ovl_state st;
				char txt[128];
				int tl;

				nckpt++;
				if (emitting) {
					tl = snprintf(txt, sizeof(txt),
					    "gen.doc %llu\n",
					    (unsigned long long)d);
					st.stage = OVL_STAGE_MIX;
					st.n = nckpt;
					st.text = txt;
					st.text_len = (uint32_t)tl;
					pl = ovl_writer_begin(w,
					    ovl_state_payload_len(st.text_len));
					ovl_state_encode(pl, &st);
					ovl_writer_finish(w, OVL_STATE, 0);
					b.n = nckpt;
					b.step = cut.step;
					b.mix_pos = d;
					b.tokens = cut.start;
					b.offset = (uint32_t)off;
					pl = ovl_writer_begin(w, OVL_BARRIER_LEN);
					ovl_barrier_encode(pl, &b);
					ovl_writer_finish(w, OVL_BARRIER, 0);
				}
				if (nckpt == from)
					emitting = 1;
			}
			off += plen;
		}
		mixtok += len;
		toks.len = 0;
		ovl_u32vec_reserve(&toks, len);
		for (i = 0; i < len; i++)
			toks.p[i] = 1 + (uint32_t)(ovl_rng_next(&trng) % 49999);
		toks.p[len - 1] = 0;
		if (!emitting)
			continue;
		doc.tokens = NULL;
		doc.width = width;
		pl = ovl_writer_begin(w, ovl_doc_payload_len(len, 0, width));
		ovl_doc_encode(pl, &doc);
		(void)ovl_tok_copy(pl + OVL_DOC_FIXED, width, toks.p, 4, len);
		ovl_writer_finish(w, OVL_DOC, ovl_width_flags(width));
	}
	if (from > nckpt)
		ovl_errx(OVL_EXIT_USAGE, "no checkpoint %llu",
		    (unsigned long long)from);
	ovl_writer_end(w);
	ovl_writer_free(w);
	ovl_u32vec_free(&toks);
	ovl_io_close_stdout();
	return 0;
}
