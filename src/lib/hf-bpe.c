/*
 * hf-bpe: the BPE of a tokenizer.json (hf.h): its vocabulary and merge
 * tables, and the merging of one piece as HF's tokenizers library merges
 * it. The fast way (the default) finds a piece that is a token with one
 * look-up, remembers merged pieces in the cache bpe.c uses (bpe-int.h) and
 * merges a short piece by scanning an array, as tiktoken's own algorithm
 * does; the general way merges every piece with a heap, as HF does. Both
 * give the same ids.
 */
#include "hf-int.h"

#include <stdlib.h>
#include <string.h>

#include "bpe-int.h"
#include "err.h"

#define SCAN_MAX	64	/* longer pieces merge with the heap */

/*
 * A table's size for n entries: a power of two, at most three quarters
 * full (a smaller table misses the cache less; linear probing stays
 * short).
 */
static size_t
pow2_above(size_t n)
{
	size_t s = 64;

	while (s * 3 < n * 4)
		s *= 2;
	return s;
}

/* ---- tables ------------------------------------------------------------ */

void
ovl_hf__vocab_init(struct ovl_hf *h, size_t nvocab)
{
	h->smask = pow2_above(nvocab) - 1;
	h->slot = ovl_xmalloc_huge((h->smask + 1) * sizeof(*h->slot));
	memset(h->slot, 0, (h->smask + 1) * sizeof(*h->slot));
	h->rmask = pow2_above(1) - 1;
	h->rslot = ovl_xcalloc(h->rmask + 1, sizeof(*h->rslot));
	h->self = ovl_xcalloc(h->nids, 1);
	h->cache = ovl_xcalloc((size_t)1 << OVL_BPE_CACHE_BITS,
	    sizeof(*h->cache));
}

void
ovl_hf__merge_init(struct ovl_hf *h, size_t nmerges)
{
	size_t s = pow2_above(nmerges);

	h->mmask = s - 1;
	h->merge = ovl_xmalloc_huge(s * sizeof(*h->merge));
	memset(h->merge, 0xff, s * sizeof(*h->merge));	/* key UINT64_MAX */
}

void
ovl_hf__tables_free(struct ovl_hf *h)
{
	free(h->slot);
	free(h->rslot);
	free(h->merge);
	free(h->pair);
	free(h->two);
	free(h->self);
	free(h->cache);
	free(h->sym);
	free(h->heap);
	ovl_u32vec_free(&h->tmp);
}

static inline uint32_t
tab_find(const struct hf_vslot *slot, size_t mask, const unsigned char *arena,
    const unsigned char *p, size_t n, uint64_t hv)
{
	size_t i = (size_t)hv & mask;
	uint32_t tag = (uint32_t)(hv >> 32);
	const struct hf_vslot *e;

	for (;; i = (i + 1) & mask) {
		e = &slot[i];
		if (e->id1 == 0)
			return HF_NONE;
		if (e->tag == tag && e->len == n &&
		    ovl_bpe__eq(arena + e->off, p, n))
			return e->id1 - 1;
	}
}

static inline uint32_t
vfind_h(const struct ovl_hf *h, const unsigned char *p, size_t n, uint64_t hv)
{
	return tab_find(h->slot, h->smask, h->arena.p, p, n, hv);
}

static inline uint32_t
vfind(const struct ovl_hf *h, const unsigned char *p, size_t n)
{
	return vfind_h(h, p, n, ovl_bpe__hash(p, n));
}

uint32_t
ovl_hf__vocab_find(const struct ovl_hf *h, const unsigned char *p, size_t n,
    int raw)
{
	if (raw)
		return tab_find(h->rslot, h->rmask, h->arena.p, p, n,
		    ovl_bpe__hash(p, n));
	return vfind(h, p, n);
}

uint64_t
ovl_hf__vocab_hash(const struct ovl_hf *h, const unsigned char *p, size_t n)
{
	uint64_t hv = ovl_bpe__hash(p, n);

	__builtin_prefetch(&h->slot[(size_t)hv & h->smask]);
	return hv;
}

uint32_t
ovl_hf__vocab_findh(const struct ovl_hf *h, const unsigned char *p, size_t n,
    uint64_t hv)
{
	return vfind_h(h, p, n, hv);
}

static void
tab_put(struct hf_vslot *slot, size_t mask, uint64_t hv, uint32_t id,
    uint32_t off, uint32_t len)
{
	size_t i = (size_t)hv & mask;

	while (slot[i].id1 != 0)
		i = (i + 1) & mask;
	slot[i].tag = (uint32_t)(hv >> 32);
	slot[i].id1 = id + 1;
	slot[i].len = len;
	slot[i].off = off;
}

int
ovl_hf__vocab_index(struct ovl_hf *h, uint32_t id, int raw)
{
	const unsigned char *p = h->arena.p + h->toff[id];
	uint64_t hv = ovl_bpe__hash(p, h->tlen[id]);
	size_t i, n;

	if (!raw) {
		if (vfind_h(h, p, h->tlen[id], hv) != HF_NONE)
			return -1;
		tab_put(h->slot, h->smask, hv, id, h->toff[id], h->tlen[id]);
		return 0;
	}
	if (tab_find(h->rslot, h->rmask, h->arena.p, p, h->tlen[id], hv) !=
	    HF_NONE)
		return -1;
	if (++h->nraw * 2 > h->rmask + 1) {
		/* grown: a byte-level file has few tokens outside the map */
		struct hf_vslot *old = h->rslot;
		size_t omask = h->rmask;

		h->rmask = h->rmask * 2 + 1;
		h->rslot = ovl_xcalloc(h->rmask + 1, sizeof(*h->rslot));
		for (i = 0; i <= omask; i++)
			if (old[i].id1 != 0) {
				n = old[i].len;
				tab_put(h->rslot, h->rmask, ovl_bpe__hash(
				    h->arena.p + old[i].off, n), old[i].id1 - 1,
				    old[i].off, (uint32_t)n);
			}
		free(old);
	}
	tab_put(h->rslot, h->rmask, hv, id, h->toff[id], h->tlen[id]);
	return 0;
}

static inline size_t
pair_hash(uint64_t k, size_t mask)
{
	k *= 0x9e3779b97f4a7c15ull;
	return (size_t)(k >> 29) & mask;
}

static inline int
merge_find(const struct ovl_hf *h, uint32_t a, uint32_t b, uint32_t *rank,
    uint32_t *id)
{
	uint64_t k = (uint64_t)a << 32 | b;
	size_t i = pair_hash(k, h->mmask);
	const struct hf_mslot *e;

	for (;; i = (i + 1) & h->mmask) {
		e = &h->merge[i];
		if (e->key == k) {
			*rank = e->rank;
			*id = e->id;
			return 1;
		}
		if (e->key == UINT64_MAX)
			return 0;
	}
}

void
ovl_hf__merge_put(struct ovl_hf *h, uint32_t a, uint32_t b, uint32_t rank,
    uint32_t id)
{
	uint64_t k = (uint64_t)a << 32 | b;
	size_t i = pair_hash(k, h->mmask);

	while (h->merge[i].key != UINT64_MAX && h->merge[i].key != k)
		i = (i + 1) & h->mmask;
	h->merge[i].key = k;
	h->merge[i].rank = rank;
	h->merge[i].id = id;
}

static size_t
utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* ---- merging ------------------------------------------------------------ */

/*
 * Every function below writes the ids of one piece of n bytes to dst, which
 * has room for n (a piece never gives more ids than it has bytes: a symbol
 * is a character or a byte, an unknown one a run of them), and returns
 * their count.
 */

static void
sym_add(struct ovl_hf *h, size_t *n, uint32_t id, uint32_t len)
{
	struct hf_sym *s;

	if (*n == h->symcap) {
		h->symcap = h->symcap ? h->symcap * 2 : 256;
		h->sym = ovl_xrealloc(h->sym, h->symcap * sizeof(*h->sym));
	}
	s = &h->sym[*n];
	s->id = id;
	s->len = len;
	s->prev = *n > 0 ? (uint32_t)*n - 1 : HF_NONE;
	s->next = HF_NONE;
	if (*n > 0)
		h->sym[*n - 1].next = (uint32_t)*n;
	(*n)++;
}

static inline int
hless(const struct hf_hentry *a, const struct hf_hentry *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void
hpush(struct ovl_hf *h, size_t *n, uint32_t rank, uint32_t pos, uint32_t id)
{
	struct hf_hentry e = { rank, pos, id };
	size_t i;

	if (*n == h->heapcap) {
		h->heapcap = h->heapcap ? h->heapcap * 2 : 256;
		h->heap = ovl_xrealloc(h->heap, h->heapcap * sizeof(*h->heap));
	}
	i = (*n)++;
	while (i > 0 && hless(&e, &h->heap[(i - 1) / 2])) {
		h->heap[i] = h->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->heap[i] = e;
}

static struct hf_hentry
hpop(struct ovl_hf *h, size_t *n)
{
	struct hf_hentry top = h->heap[0], last = h->heap[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && hless(&h->heap[c + 1], &h->heap[c]))
			c++;
		if (!hless(&h->heap[c], &last))
			break;
		h->heap[i] = h->heap[c];
		i = c;
	}
	if (*n > 0)
		h->heap[i] = last;
	return top;
}

/* The first symbols of a piece, as HF's BPE::merge_word makes them. */
static size_t
initial_symbols(struct ovl_hf *h, const unsigned char *p, size_t n)
{
	size_t ns = 0, i, l, k;
	uint32_t unk_len = 0;
	int have_unk = 0;

	for (i = 0; i < n; i += l) {
		uint32_t id;

		if (h->bytelevel) {
			l = 1;
			id = h->byte_id[p[i]];
		} else {
			l = utf8_len(p[i]);
			if (l > n - i)
				l = n - i;
			id = vfind(h, p + i, l);
		}
		if (id != HF_NONE) {
			if (have_unk) {
				sym_add(h, &ns, h->unk, unk_len);
				have_unk = 0;
			}
			sym_add(h, &ns, id, (uint32_t)l);
			continue;
		}
		if (h->byte_fallback && !h->bytelevel) {
			for (k = 0; k < l && h->byte_id[p[i + k]] != HF_NONE; k++)
				;
			if (k == l) {
				for (k = 0; k < l; k++)
					sym_add(h, &ns, h->byte_id[p[i + k]], 1);
				continue;
			}
		}
		if (h->unk == HF_NONE)
			continue;	/* HF drops it too */
		if (have_unk && h->fuse_unk)
			unk_len += (uint32_t)l;
		else {
			if (have_unk)
				sym_add(h, &ns, h->unk, unk_len);
			have_unk = 1;
			unk_len = (uint32_t)l;
		}
	}
	if (have_unk)
		sym_add(h, &ns, h->unk, unk_len);
	return ns;
}

/*
 * HF's merge order on the symbols sym[0..ns): the pair of the lowest merge
 * rank first, the leftmost among equals (HF's heap orders by rank, then
 * position), a heap of candidates; stale entries are dropped when popped.
 */
static size_t
merge_heap(struct ovl_hf *h, size_t ns, uint32_t *dst)
{
	size_t nh = 0, i, k = 0;
	uint32_t rank, id;

	for (i = 0; i + 1 < ns; i++)
		if (merge_find(h, h->sym[i].id, h->sym[i + 1].id, &rank, &id))
			hpush(h, &nh, rank, (uint32_t)i, id);
	while (nh > 0) {
		struct hf_hentry top = hpop(h, &nh);
		struct hf_sym *s = &h->sym[top.pos], *r;
		uint32_t nx;

		if (s->len == 0 || s->next == HF_NONE)
			continue;
		nx = s->next;
		r = &h->sym[nx];
		/* an expired entry: the pair there now makes another token */
		if (!merge_find(h, s->id, r->id, &rank, &id) || id != top.id)
			continue;
		s->id = top.id;
		s->len += r->len;
		s->next = r->next;
		r->len = 0;
		if (s->next != HF_NONE)
			h->sym[s->next].prev = top.pos;
		if (s->prev != HF_NONE &&
		    merge_find(h, h->sym[s->prev].id, s->id, &rank, &id))
			hpush(h, &nh, rank, s->prev, id);
		if (s->next != HF_NONE &&
		    merge_find(h, s->id, h->sym[s->next].id, &rank, &id))
			hpush(h, &nh, rank, top.pos, id);
	}
	for (i = 0; i < ns; i++)
		if (h->sym[i].len != 0)
			dst[k++] = h->sym[i].id;
	return k;
}

/*
 * The same order for a few symbols: the lowest pair found by a scan. p:
 * the piece's bytes (ns of them) in a byte-level model with a token for
 * every byte, which are the symbols; else NULL, the symbols in h->sym.
 */
static size_t
merge_scan(const struct ovl_hf *h, const unsigned char *p, size_t ns,
    uint32_t *dst)
{
	uint32_t tk[SCAN_MAX], rk[SCAN_MAX], nid[SCAN_MAX], r, id, min;
	size_t m = ns, i, j, best;

	if (p != NULL)
		/* the bytes of a byte-level piece: their tokens, one table */
		for (i = 0; i < m; i++)
			tk[i] = h->byte_id[p[i]];
	else
		for (i = 0; i < m; i++)
			tk[i] = h->sym[i].id;
	if (p != NULL)
		for (i = 0; i + 1 < m; i++) {
			uint64_t e = h->pair[p[i] << 8 | p[i + 1]];
			rk[i] = (uint32_t)(e >> 32);
			nid[i] = (uint32_t)e;
		}
	else
		for (i = 0; i + 1 < m; i++)
			rk[i] = merge_find(h, tk[i], tk[i + 1], &r, &nid[i]) ?
			    r : HF_NONE;
	rk[m - 1] = HF_NONE;
	for (;;) {
		min = HF_NONE;
		best = 0;
		for (i = 0; i + 1 < m; i++)
			if (rk[i] < min) {
				min = rk[i];
				best = i;
			}
		if (min == HF_NONE)
			break;
		i = best;
		tk[i] = nid[i];
		for (j = i + 1; j + 1 < m; j++) {
			tk[j] = tk[j + 1];
			rk[j] = rk[j + 1];
			nid[j] = nid[j + 1];
		}
		m--;
		if (i > 0)
			rk[i - 1] = merge_find(h, tk[i - 1], tk[i], &r, &id) ?
			    (nid[i - 1] = id, r) : HF_NONE;
		rk[i] = i + 1 < m && merge_find(h, tk[i], tk[i + 1], &r, &id) ?
		    (nid[i] = id, r) : HF_NONE;
	}
	memcpy(dst, tk, m * sizeof(*tk));
	return m;
}

/*
 * HF's BPE::tokenize of one piece: fast picks the merge algorithm; known:
 * the piece is known not to be a token (so ignore_merges changes nothing).
 */
static size_t
bpe_piece(struct ovl_hf *h, const unsigned char *p, size_t n, int fast,
    int known, uint32_t *dst)
{
	size_t ns;
	uint32_t id;

	if (h->ignore_merges && !known && (id = vfind(h, p, n)) != HF_NONE) {
		dst[0] = id;
		return 1;
	}
	if (fast && h->bytes_all == 1 && n <= SCAN_MAX)
		return merge_scan(h, p, n, dst);
	ns = initial_symbols(h, p, n);
	if (ns == 0)
		return 0;
	if (fast && ns <= SCAN_MAX)
		return merge_scan(h, NULL, ns, dst);
	return merge_heap(h, ns, dst);
}

/* The tables of a byte-level model with a token for every byte. */
static void
make_byte_tables(struct ovl_hf *h)
{
	unsigned char pc[2];
	uint32_t r, id;
	unsigned a, b;

	h->bytes_all = -1;
	if (!h->bytelevel)
		return;
	for (a = 0; a < 256; a++)
		if (h->byte_id[a] == HF_NONE)
			return;
	h->pair = ovl_xmalloc(65536 * sizeof(*h->pair));
	h->two = ovl_xmalloc(65536 * sizeof(*h->two));
	for (a = 0; a < 256; a++)
		for (b = 0; b < 256; b++)
			h->pair[a << 8 | b] = merge_find(h, h->byte_id[a],
			    h->byte_id[b], &r, &id) ? (uint64_t)r << 32 | id :
			    UINT64_MAX;
	/*
	 * The pieces of one and two bytes, as BPE::tokenize gives them: the
	 * token of the piece when merges are ignored, else the pair's merge,
	 * else the two bytes' tokens.
	 */
	for (a = 0; a < 256; a++) {
		h->one[a] = h->byte_id[a];
		pc[0] = (unsigned char)a;
		for (b = 0; b < 256; b++) {
			uint64_t e = h->pair[a << 8 | b];

			pc[1] = (unsigned char)b;
			if (h->ignore_merges && (id = vfind(h, pc, 2)) != HF_NONE)
				e = (uint64_t)HF_NONE << 32 | id;
			else if (e != UINT64_MAX)
				e = (uint64_t)HF_NONE << 32 | (uint32_t)e;
			else
				e = (uint64_t)h->byte_id[b] << 32 | h->byte_id[a];
			h->two[a << 8 | b] = e;
		}
	}
	h->bytes_all = 1;
}

void
ovl_hf__tables_ready(struct ovl_hf *h)
{
	if (h->bytes_all == 0)
		make_byte_tables(h);
}

/* 1 when the piece of token id's bytes p[0..n) merges to id itself. */
static int
self_merges(struct ovl_hf *h, uint32_t id, const unsigned char *p, size_t n)
{
	if (h->self[id] == 0) {
		ovl_u32vec_reserve(&h->tmp, n);
		h->self[id] = bpe_piece(h, p, n, 1, 0, h->tmp.p) == 1 &&
		    h->tmp.p[0] == id ? 1 : 2;
	}
	return h->self[id] == 1;
}

size_t
ovl_hf__piece_to(struct ovl_hf *h, const unsigned char *p, size_t n,
    uint32_t *dst)
{
	return ovl_hf__piece_h(h, p, n, n > 2 ? ovl_bpe__hash(p, n) : 0, dst);
}

size_t
ovl_hf__piece_h(struct ovl_hf *h, const unsigned char *p, size_t n,
    uint64_t hv, uint32_t *dst)
{
	struct ovl_bpe_cslot *c;
	uint32_t id;
	size_t k;

	if (!h->fast)
		return bpe_piece(h, p, n, 0, 0, dst);
	if (n <= 2 && h->bytes_all == 1) {
		uint64_t e = n == 1 ? (uint64_t)HF_NONE << 32 | h->one[p[0]] :
		    h->two[p[0] << 8 | p[1]];

		dst[0] = (uint32_t)e;
		if (e >> 32 == HF_NONE)
			return 1;
		dst[1] = (uint32_t)(e >> 32);
		return 2;
	}
	if (n <= 2)
		hv = ovl_bpe__hash(p, n);
	id = vfind_h(h, p, n, hv);
	if (id != HF_NONE && (h->ignore_merges || self_merges(h, id, p, n))) {
		dst[0] = id;
		return 1;
	}
	if (n > OVL_BPE_CACHE_KEY)
		return bpe_piece(h, p, n, 1, 1, dst);
	c = ovl_bpe__cslot(h->cache, hv);
	if (ovl_bpe__chit(c, hv, p, n)) {
		memcpy(dst, c->tok, c->ntok * sizeof(uint32_t));
		return c->ntok;
	}
	k = bpe_piece(h, p, n, 1, 1, dst);
	/* a piece of no token (bytes the vocabulary lacks) is not cached */
	if (k > 0)
		ovl_bpe__cput(c, hv, p, n, dst, k);
	return k;
}

void
ovl_hf__piece(struct ovl_hf *h, const unsigned char *p, size_t n,
    struct ovl_u32vec *out)
{
	ovl_u32vec_reserve(out, n);
	out->len += ovl_hf__piece_to(h, p, n, out->p + out->len);
}
