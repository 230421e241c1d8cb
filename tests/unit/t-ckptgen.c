/*
 * t-ckptgen: a stream generator for the ovl-ckpt tests, built from
 * src/lib/frame.h, and its own unit test.
 *
 *   t-ckptgen                 TAP self-test (run by make check)
 *   t-ckptgen SEED STEPS RANKS EVERY VOCAB [FROM]
 *
 * writes what ovl-construct sends ovl-ckpt: META (vocab, ranks, two
 * sources), then per step its SEQ frames (one per rank, random lengths,
 * pieces and ids below VOCAB), with STATE(mix, n), STATE(construct, n) and
 * BARRIER n before every step that is a multiple of EVERY, and END. With
 * FROM, the stream a pipeline resumed at checkpoint FROM sends: META, then
 * everything after BARRIER FROM. The same arguments give the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "frameio.h"
#include "num.h"
#include "rng.h"
#include "unit.h"

static void
emit_state(struct ovl_writer *w, uint32_t stage, uint64_t n, uint64_t step)
{
	char text[512];
	struct ovl_state s;
	uint32_t len;
	int tl;

	if (stage == OVL_STAGE_MIX)
		tl = snprintf(text, sizeof(text), "mixed %llu\n"
		    "source.web.cursor 0:%llu:%llu:%llu\n"
		    "source.web.partitions 2\n"
		    "source.code.cursor 0:0:%llu:0\n"
		    "source.code.partitions 1\n",
		    (unsigned long long)(step * 7), (unsigned long long)(step / 3),
		    (unsigned long long)(step * 100), (unsigned long long)step,
		    (unsigned long long)(step * 50));
	else
		tl = snprintf(text, sizeof(text), "step %llu\nskip %llu\n",
		    (unsigned long long)step, (unsigned long long)(step % 5));
	s.stage = stage;
	s.n = n;
	s.text = text;
	s.text_len = (uint32_t)tl;
	len = ovl_state_payload_len(s.text_len);
	ovl_state_encode(ovl_writer_begin(w, len), &s);
	ovl_writer_finish(w, OVL_STATE, 0);
}

static void
emit_seq(struct ovl_writer *w, uint64_t seed, uint64_t step, uint32_t rank,
    uint32_t vocab)
{
	struct ovl_rng r;
	struct ovl_seq s;
	struct ovl_piece pc;
	uint32_t ntok, np, i, k, at, *tok, *pos, *cu, cut[9];
	uint8_t *p;

	ovl_rng_seed2(&r, seed, step * 1000 + rank);
	memset(&s, 0, sizeof(s));
	ntok = 1 + (uint32_t)ovl_rng_below(&r, 60);
	np = 1 + (uint32_t)ovl_rng_below(&r, ntok < 8 ? ntok : 8);
	cut[0] = 0;
	for (i = 1; i < np; i++)
		cut[i] = cut[i - 1] + 1 + (uint32_t)ovl_rng_below(&r,
		    (ntok - cut[i - 1] - (np - i)));
	cut[np] = ntok;
	for (i = 1; i < np; i++)	/* keep the cuts strictly increasing */
		if (cut[i] <= cut[i - 1] || cut[i] >= ntok)
			cut[i] = cut[i - 1] + 1;
	s.step = step;
	s.rank = rank;
	s.ntokens = ntok;
	s.npieces = np;
	s.seq_len = 64;
	s.width = s.pos_width = 4;
	p = ovl_writer_begin(w, ovl_seq_payload_len(ntok, np, 4, 4));
	ovl_seq_encode(p, &s);
	tok = ovl_seq_tokens(p);
	pos = ovl_seq_positions(p, ntok, 4);
	cu = ovl_seq_cu(p, ntok, 4, 4);
	for (i = 0; i <= np; i++)
		cu[i] = cut[i];
	for (i = 0; i < np; i++) {
		for (k = cut[i], at = 0; k < cut[i + 1]; k++, at++) {
			tok[k] = (uint32_t)ovl_rng_below(&r, vocab);
			pos[k] = at;
		}
		memset(&pc, 0, sizeof(pc));
		pc.source = (uint32_t)ovl_rng_below(&r, 2);
		pc.chunk = (uint32_t)(step / 3);
		pc.record = step * 10 + i;
		pc.mix_pos = step * 100 + rank * 10 + i;
		pc.length = cut[i + 1] - cut[i];
		ovl_seq_put_piece(p, &s, i, &pc);
	}
	ovl_writer_finish(w, OVL_SEQ, 0);
}

static void
generate(int fd, uint64_t seed, uint64_t steps, uint32_t ranks,
    uint64_t every, uint32_t vocab, int from_set, uint64_t from)
{
	struct ovl_writer *w = ovl_writer_new(fd, "standard output");
	struct ovl_barrier b;
	char meta[256];
	uint64_t step, n;
	uint32_t r, len;
	int on = !from_set, ml;

	ml = snprintf(meta, sizeof(meta), "tokenizer bytes\nvocab %u\neod 256\n"
	    "source 0 web\nsource 1 code\nranks %u\n", vocab, ranks);
	len = ovl_meta_payload_len((uint32_t)ml);
	ovl_meta_encode(ovl_writer_begin(w, len), meta, (uint32_t)ml);
	ovl_writer_finish(w, OVL_META, 0);
	for (step = 0; step < steps; step++) {
		if (step > 0 && step % every == 0) {
			n = step / every;
			if (on) {
				emit_state(w, OVL_STAGE_MIX, n, step);
				emit_state(w, OVL_STAGE_CONSTRUCT, n, step);
				memset(&b, 0, sizeof(b));
				b.n = n;
				b.step = step;
				b.mix_pos = step * 100;
				b.tokens = step * 1000;
				ovl_barrier_encode(ovl_writer_begin(w,
				    OVL_BARRIER_LEN), &b);
				ovl_writer_finish(w, OVL_BARRIER, 0);
			}
			if (from_set && n == from)
				on = 1;
		}
		if (!on)
			continue;
		for (r = 0; r < ranks; r++)
			emit_seq(w, seed, step, r, vocab);
	}
	ovl_writer_end(w);
	ovl_writer_free(w);
}

/* Self-test: the stream parses back, frame by frame, with the expected kinds. */
static void
test_roundtrip(void)
{
	int fds[2];
	struct ovl_reader *r;
	struct ovl_frame f;
	struct ovl_seq s;
	int rc, seqs = 0, bars = 0, ok = 1;

	CHECK(pipe(fds) == 0);
	generate(fds[1], 7, 9, 2, 4, 300, 0, 0);
	close(fds[1]);
	r = ovl_reader_new(fds[0], "pipe", 0);
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME) {
		if (f.kind == OVL_SEQ) {
			seqs++;
			if (ovl_seq_decode(&f, &s) != OVL_F_OK)
				ok = 0;
		} else if (f.kind == OVL_BARRIER)
			bars++;
	}
	CHECK(rc == OVL_RD_EOF && ok);
	CHECK(seqs == 18 && bars == 2);
	ovl_reader_free(r);
	close(fds[0]);
}

int
main(int argc, char **argv)
{
	uint64_t seed, steps, ranks, every, vocab, from = 0;

	if (argc == 1) {
		RUN(test_roundtrip);
		UNIT_DONE();
	}
	if ((argc != 6 && argc != 7) || ovl_num_u64(argv[1], &seed) != 0 ||
	    ovl_num_u64(argv[2], &steps) != 0 ||
	    ovl_num_u64_max(argv[3], 1024, &ranks) != 0 || ranks == 0 ||
	    ovl_num_u64(argv[4], &every) != 0 || every == 0 ||
	    ovl_num_u64_max(argv[5], UINT32_MAX, &vocab) != 0 || vocab == 0 ||
	    (argc == 7 && ovl_num_u64(argv[6], &from) != 0)) {
		fprintf(stderr, "usage: t-ckptgen SEED STEPS RANKS EVERY VOCAB "
		    "[FROM]\n");
		return 2;
	}
	generate(STDOUT_FILENO, seed, steps, (uint32_t)ranks, every,
	    (uint32_t)vocab, argc == 7, from);
	return 0;
}
