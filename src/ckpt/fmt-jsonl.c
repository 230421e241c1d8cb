/*
 * ovl-ckpt --format jsonl: PREFIX.jsonl, a JSON line a sequence (seq,
 * step, rank, mb, tokens, positions, cu_seqlens, and with a cp plan
 * cu_seqlens_padded and max_seqlen, cp.h); the same lines are ovl-ckpt
 * --json's on standard output.
 */
#include "ckpt.h"

#include "cp.h"

static char *
put_u64(char *p, uint64_t v)
{
	char t[24];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*p++ = t[--n];
	return p;
}

static void
json_array(struct ovl_buf *b, const char *key, const void *a, uint32_t width,
    size_t n)
{
	char *p;
	size_t i;

	p = (char *)ovl_buf_reserve(b, strlen(key) + 6 + n * 11);
	p += sprintf(p, ",\"%s\":[", key);
	for (i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		p = put_u64(p, ovl_tok_at(a, width, i));
	}
	*p++ = ']';
	b->len = (size_t)(p - (char *)b->p);
}

void
json_seq_head(struct ovl_buf *b, const struct ovl_seq *s, uint64_t index)
{
	char t[160];

	snprintf(t, sizeof(t), "{\"seq\":%" PRIu64 ",\"step\":%" PRIu64
	    ",\"rank\":%" PRIu32 ",\"mb\":%" PRIu32, index, s->step, s->rank,
	    s->mb);
	ovl_buf_append(b, t, strlen(t));
}

/*
 * The positions of s and their width: its own array, or (none sent,
 * ovl-frame(5) NOPOS) derived from cu_seqlens into a buffer of this file.
 */
static const void *
seq_positions(const struct ovl_seq *s, uint32_t *width)
{
	static struct ovl_u32vec derived;

	if (s->positions != NULL) {
		*width = s->pos_width;
		return s->positions;
	}
	derived.len = 0;
	ovl_seq_position_ids(s, ovl_u32vec_reserve(&derived, s->ntokens));
	*width = 4;
	return derived.p;
}

void
seq_json(struct ckpt_run *R, struct out *o, const struct ovl_seq *s)
{
	const void *pos;
	uint32_t pw;
	struct ovl_buf *b = &R->scratch;

	b->len = 0;
	json_seq_head(b, s, R->nseqs);
	json_array(b, "tokens", s->tokens, s->width, s->ntokens);
	pos = seq_positions(s, &pw);
	json_array(b, "positions", pos, pw, s->ntokens);
	json_array(b, "cu_seqlens", s->cu_seqlens, 4, (size_t)s->npieces + 1);
	if (R->cp > 0) {
		static struct ovl_u32vec cup;	/* kept, as derived is */
		uint32_t m;
		char t[40];
		int n;

		cup.len = 0;
		m = ovl_cp_layout(ovl_cp_seq_size(R->cp, R->cp_hybrid,
		    s->flags), R->cp_pad, s->cu_seqlens, s->npieces,
		    s->ntokens, ovl_u32vec_reserve(&cup, (size_t)s->npieces +
		    1));
		json_array(b, "cu_seqlens_padded", cup.p, 4,
		    (size_t)s->npieces + 1);
		n = snprintf(t, sizeof(t), ",\"max_seqlen\":%u", m);
		ovl_buf_append(b, t, (size_t)n);
		if (R->cp_hybrid) {
			n = snprintf(t, sizeof(t), ",\"local_cp_size\":%u,"
			    "\"cp_first\":%u", OVL_CP_GROUP_SIZE(s->flags),
			    OVL_CP_GROUP_FIRST(s->flags));
			ovl_buf_append(b, t, (size_t)n);
		}
	}
	ovl_buf_append(b, "}\n", 2);
	out_put(o, b->p, b->len);
}

static void *
jsonl_open(struct ckpt_run *R)
{
	char *p = xasprintf("%s.jsonl", R->o->prefix);
	struct out *o = out_add(R, "jsonl", p, OT_RAW);

	free(p);
	return o;
}

static void
jsonl_seq(struct ckpt_run *R, void *state, const struct ovl_seq *s,
    const struct ovl_frame *f)
{
	(void)f;
	seq_json(R, state, s);
}

const struct ckpt_format ckpt_fmt_jsonl = {
	.tok16_vocab = 65536,
	.open = jsonl_open,
	.seq = jsonl_seq,
};
