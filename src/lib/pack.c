#include "pack.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"

struct ovl_packer {
	uint32_t	*order;		/* bfd: pieces, longest first */
	size_t		 order_cap;
	int32_t		*head;		/* bfd: bins by remaining room, a stack each */
	uint64_t	*bits;		/* bfd: non-empty rooms */
	size_t		 room_cap;	/* entries of head (cap + 1) */
	int32_t		*next;		/* bfd: bin stack links */
	uint32_t	*tree;		/* first-fit: max room over bin ranges */
	size_t		 tree_cap;
	uint32_t	*room;		/* fill: room of each bin */
	size_t		 fill_cap;
	uint32_t	*defer;		/* fill: pieces that fit no bin whole */
	size_t		 defer_cap;
	struct ovl_frag	*tmp;		/* fill_ends: fragments as placed */
	size_t		 tmp_cap;
	uint32_t	*closer;	/* fill_ends: each bin's last fragment */
	size_t		*bstart;	/* fill_ends: each bin's first output */
	size_t		 ends_cap;
	uint32_t	*rlo;		/* fill_ends: what is left of a piece */
	struct ovl_frag	*pend;		/* fill_ends: open parts to place */
	size_t		 seq_cap;
	uint64_t	*reach;		/* fill_ends: subset sums, per piece */
	size_t		 reach_cap;
};

const char *const ovl_pack_names[] = { "bfd", "first-fit", "concat", NULL };

int
ovl_pack_parse(const char *name)
{
	return ovl_cli_choice(ovl_pack_names, name);
}

const char *
ovl_pack_name(int method)
{
	return ovl_cli_choice_name(ovl_pack_names, method);
}

struct ovl_packer *
ovl_packer_new(void)
{
	return ovl_xcalloc(1, sizeof(struct ovl_packer));
}

void
ovl_packer_free(struct ovl_packer *p)
{
	if (p == NULL)
		return;
	free(p->order);
	free(p->head);
	free(p->bits);
	free(p->next);
	free(p->tree);
	free(p->room);
	free(p->defer);
	free(p->tmp);
	free(p->closer);
	free(p->bstart);
	free(p->rlo);
	free(p->pend);
	free(p->reach);
	free(p);
}

static void
grow_items(struct ovl_packer *p, size_t n)
{
	if (n <= p->order_cap)
		return;
	p->order = ovl_xrealloc(p->order, n * sizeof(*p->order));
	p->next = ovl_xrealloc(p->next, n * sizeof(*p->next));
	p->order_cap = n;
}

/* Sort key: longer first, then earlier (ovl_pack_sort_desc). */
static const uint32_t *sort_len;

static int
cmp_len_desc(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	if (sort_len[i] != sort_len[j])
		return sort_len[i] > sort_len[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

void
ovl_pack_sort_desc(uint32_t *idx, size_t n, const uint32_t *len)
{
	sort_len = len;
	qsort(idx, n, sizeof(*idx), cmp_len_desc);
	sort_len = NULL;
}

/* The smallest room r >= want with a bin waiting, or -1. */
static long
find_room(const struct ovl_packer *p, uint32_t want, uint32_t cap)
{
	size_t w = want / 64, nw = (size_t)cap / 64 + 1;
	uint64_t word = p->bits[w] & (~(uint64_t)0 << (want % 64));

	for (;;) {
		if (word != 0)
			return (long)(w * 64 + (size_t)__builtin_ctzll(word));
		if (++w >= nw)
			return -1;
		word = p->bits[w];
	}
}

static void
room_push(struct ovl_packer *p, uint32_t room, int32_t b)
{
	p->next[b] = p->head[room];
	p->head[room] = b;
	p->bits[room / 64] |= (uint64_t)1 << (room % 64);
}

static int32_t
room_pop(struct ovl_packer *p, uint32_t room)
{
	int32_t b = p->head[room];

	p->head[room] = p->next[b];
	if (p->head[room] < 0)
		p->bits[room / 64] &= ~((uint64_t)1 << (room % 64));
	return b;
}

static size_t
pack_bfd(struct ovl_packer *p, const uint32_t *len, size_t n, uint32_t cap,
    uint32_t *bin)
{
	size_t i, nb = 0, nwords = (size_t)cap / 64 + 1;

	if ((size_t)cap + 1 > p->room_cap) {
		p->head = ovl_xrealloc(p->head, ((size_t)cap + 1) *
		    sizeof(*p->head));
		p->bits = ovl_xrealloc(p->bits, nwords * sizeof(*p->bits));
		p->room_cap = (size_t)cap + 1;
	}
	memset(p->head, 0xff, ((size_t)cap + 1) * sizeof(*p->head));
	memset(p->bits, 0, nwords * sizeof(*p->bits));
	for (i = 0; i < n; i++)
		p->order[i] = (uint32_t)i;
	ovl_pack_sort_desc(p->order, n, len);
	for (i = 0; i < n; i++) {
		uint32_t k = p->order[i], l = len[k];
		long r = find_room(p, l, cap);
		uint32_t room;
		int32_t b;

		if (r >= 0) {
			b = room_pop(p, (uint32_t)r);
			room = (uint32_t)r - l;
		} else {
			b = (int32_t)nb++;
			room = cap - l;
		}
		bin[k] = (uint32_t)b;
		if (room > 0)
			room_push(p, room, b);
	}
	return nb;
}

/* Leftmost bin with room >= want in the max-tree, or -1. */
static long
tree_find(const struct ovl_packer *p, size_t size, uint32_t want)
{
	size_t x = 1;

	if (p->tree[1] < want)
		return -1;
	while (x < size)
		x = p->tree[2 * x] >= want ? 2 * x : 2 * x + 1;
	return (long)(x - size);
}

static void
tree_set(struct ovl_packer *p, size_t size, size_t b, uint32_t room)
{
	size_t x = size + b;

	p->tree[x] = room;
	for (x /= 2; x >= 1; x /= 2) {
		uint32_t l = p->tree[2 * x], r = p->tree[2 * x + 1];
		p->tree[x] = l > r ? l : r;
	}
}

static size_t
pack_first_fit(struct ovl_packer *p, const uint32_t *len, size_t n,
    uint32_t cap, uint32_t *bin)
{
	size_t size = 1, i, nb = 0;

	while (size < n)
		size *= 2;
	if (2 * size > p->tree_cap) {
		p->tree = ovl_xrealloc(p->tree, 2 * size * sizeof(*p->tree));
		p->tree_cap = 2 * size;
	}
	memset(p->tree, 0, 2 * size * sizeof(*p->tree));
	for (i = 0; i < n; i++) {
		long b = tree_find(p, size, len[i]);
		size_t bb = b >= 0 ? (size_t)b : nb++;
		uint32_t room = b >= 0 ? p->tree[size + bb] : cap;

		bin[i] = (uint32_t)bb;
		tree_set(p, size, bb, room - len[i]);
	}
	return nb;
}

static size_t
pack_concat(const uint32_t *len, size_t n, uint32_t cap, uint32_t *bin)
{
	size_t i, nb = 0;
	uint32_t room = 0;

	for (i = 0; i < n; i++) {
		if (nb == 0 || len[i] > room) {
			nb++;
			room = cap;
		}
		bin[i] = (uint32_t)(nb - 1);
		room -= len[i];
	}
	return nb;
}

size_t
ovl_pack(struct ovl_packer *p, int method, const uint32_t *len, size_t n,
    uint32_t cap, uint32_t *bin)
{
	if (n == 0)
		return 0;
	grow_items(p, n);
	switch (method) {
	case OVL_PACK_BFD:
		return pack_bfd(p, len, n, cap, bin);
	case OVL_PACK_FIRST_FIT:
		return pack_first_fit(p, len, n, cap, bin);
	default:
		return pack_concat(len, n, cap, bin);
	}
}

/* ---- fixed shapes: fill a fixed number of bins, cutting pieces -------- */

static size_t
fill_cut(struct ovl_packer *p, const uint32_t *len, size_t nd, uint32_t cap,
    size_t nbins, struct ovl_frag *frag, size_t nf)
{
	size_t i, j;

	(void)cap;
	for (i = 0; i < nd; i++) {
		uint32_t k = p->defer[i], off = 0, left = len[k];

		while (left > 0) {
			size_t m = 0;
			uint32_t t;

			for (j = 1; j < nbins; j++)
				if (p->room[j] > p->room[m])
					m = j;
			if (p->room[m] == 0)
				return nf;	/* more than fits: caller's error */
			t = left < p->room[m] ? left : p->room[m];
			frag[nf].item = k;
			frag[nf].off = off;
			frag[nf].len = t;
			frag[nf].bin = (uint32_t)m;
			nf++;
			p->room[m] -= t;
			off += t;
			left -= t;
		}
	}
	return nf;
}

size_t
ovl_pack_fill(struct ovl_packer *p, int method, const uint32_t *len,
    size_t n, uint32_t cap, size_t nbins, struct ovl_frag *frag)
{
	size_t i, j, nf = 0, nd = 0;

	if (n == 0 || nbins == 0)
		return 0;
	grow_items(p, n);
	if (nbins > p->fill_cap) {
		p->room = ovl_xrealloc(p->room, nbins * sizeof(*p->room));
		p->fill_cap = nbins;
	}
	if (n > p->defer_cap) {
		p->defer = ovl_xrealloc(p->defer, n * sizeof(*p->defer));
		p->defer_cap = n;
	}
	for (j = 0; j < nbins; j++)
		p->room[j] = cap;
	if (method == OVL_PACK_CONCAT) {
		uint32_t off;

		for (i = 0, j = 0; i < n; i++) {
			for (off = 0; off < len[i];) {
				uint32_t t = len[i] - off;

				while (j + 1 < nbins && p->room[j] == 0)
					j++;
				if (p->room[j] == 0)
					return nf;
				if (t > p->room[j])
					t = p->room[j];
				frag[nf].item = (uint32_t)i;
				frag[nf].off = off;
				frag[nf].len = t;
				frag[nf].bin = (uint32_t)j;
				nf++;
				p->room[j] -= t;
				off += t;
			}
		}
		return nf;
	}
	for (i = 0; i < n; i++)
		p->order[i] = (uint32_t)i;
	if (method == OVL_PACK_BFD) {
		ovl_pack_sort_desc(p->order, n, len);
	}
	for (i = 0; i < n; i++) {
		uint32_t k = p->order[i];
		size_t m = nbins;

		for (j = 0; j < nbins; j++) {
			if (p->room[j] < len[k])
				continue;
			if (m == nbins || (method == OVL_PACK_BFD &&
			    p->room[j] < p->room[m]))
				m = j;
			if (method != OVL_PACK_BFD || p->room[m] == len[k])
				break;
		}
		if (m == nbins) {
			p->defer[nd++] = k;
			continue;
		}
		frag[nf].item = k;
		frag[nf].off = 0;
		frag[nf].len = len[k];
		frag[nf].bin = (uint32_t)m;
		nf++;
		p->room[m] -= len[k];
	}
	if (nd > 0 && method != OVL_PACK_BFD) {
		/* longest first, as bfd does */
		ovl_pack_sort_desc(p->defer, nd, len);
	}
	return fill_cut(p, len, nd, cap, nbins, frag, nf);
}

#define NO_CLOSER	UINT32_MAX

/* The bin with the least room of at least need (open bins only: without a
 * last fragment yet), or nbins. */
static size_t
best_bin(const struct ovl_packer *p, size_t nbins, uint32_t need, int open)
{
	size_t j, m = nbins;

	for (j = 0; j < nbins; j++) {
		if (p->room[j] < need || (open && p->closer[j] != NO_CLOSER))
			continue;
		if (m == nbins || p->room[j] < p->room[m])
			m = j;
	}
	return m;
}

/*
 * One try of ovl_pack_fill_ends over p->order (longest first): whole
 * pieces, the open ones first (first == 0) or the closed ones first,
 * then the rest cut. The fragments into p->tmp, each bin's last in
 * p->closer; returns their number or SIZE_MAX.
 */
static size_t
fill_ends_try(struct ovl_packer *p, const uint32_t *len, const uint8_t *open,
    size_t n, uint32_t cap, size_t nbins, int first)
{
	size_t i, j, nt = 0, nd = 0, m;
	int pass;

	for (j = 0; j < nbins; j++) {
		p->room[j] = cap;
		p->closer[j] = NO_CLOSER;
	}
	/* whole: the open pieces last in a bin each, the closed anywhere */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			uint32_t k = p->order[i];
			int o = pass == first;

			if ((open[k] != 0) != o)
				continue;
			m = best_bin(p, nbins, len[k], o);
			if (m == nbins) {
				p->defer[nd++] = k;
				continue;
			}
			p->tmp[nt] = (struct ovl_frag){ k, 0, len[k],
			    (uint32_t)m };
			if (o)
				p->closer[m] = (uint32_t)nt;
			p->room[m] -= len[k];
			nt++;
		}
	if (nd > 1)
		ovl_pack_sort_desc(p->defer, nd, len);
	/* the rest cut: every head is the last of its bin */
	for (i = 0; i < nd; i++) {
		uint32_t k = p->defer[i], off = 0, left = len[k];

		while (left > 0) {
			m = best_bin(p, nbins, left, open[k] != 0);
			if (m < nbins) {
				p->tmp[nt] = (struct ovl_frag){ k, off, left,
				    (uint32_t)m };
				if (open[k])
					p->closer[m] = (uint32_t)nt;
				p->room[m] -= left;
				nt++;
				break;
			}
			for (j = 0; j < nbins; j++)
				if (p->closer[j] == NO_CLOSER && p->room[j] > 0 &&
				    (m == nbins || p->room[j] > p->room[m]))
					m = j;
			if (m == nbins || nt == p->tmp_cap)
				return SIZE_MAX;
			p->tmp[nt] = (struct ovl_frag){ k, off, p->room[m],
			    (uint32_t)m };
			p->closer[m] = (uint32_t)nt;
			off += p->room[m];
			left -= p->room[m];
			p->room[m] = 0;
			nt++;
		}
	}
	return nt;
}

/* The exact fills look among at most this many of the shortest pieces. */
#define EXACT_MAX	256

/*
 * Subset sums up to room of the closed pieces left whole ([rlo, len)),
 * the EXACT_MAX shortest of those that fit (cand[0..*nc)): p->reach holds
 * a bitset of the sums reachable with the first k of them for every k.
 * Returns the words per bitset.
 */
static size_t
subset_sums(struct ovl_packer *p, const uint32_t *len, const uint8_t *open,
    size_t n, uint32_t room, uint32_t *cand, size_t *nc)
{
	size_t i, c = 0, w = (size_t)room / 64 + 1, k, b;

	/* p->order is longest first: the shortest from its end */
	for (i = n; i > 0 && c < EXACT_MAX; i--) {
		uint32_t x = p->order[i - 1];

		if (!open[x] && p->rlo[x] < len[x] && len[x] - p->rlo[x] <= room)
			cand[c++] = x;
	}
	if ((c + 1) * w > p->reach_cap) {
		p->reach_cap = (c + 1) * w;
		p->reach = ovl_xrealloc(p->reach, p->reach_cap *
		    sizeof(*p->reach));
	}
	memset(p->reach, 0, w * sizeof(*p->reach));
	p->reach[0] = 1;
	for (k = 0; k < c; k++) {
		const uint64_t *a = p->reach + k * w;
		uint64_t *z = p->reach + (k + 1) * w;
		uint32_t l = len[cand[k]] - p->rlo[cand[k]];
		size_t ws = l / 64, bs = l % 64;

		for (b = 0; b < w; b++) {
			uint64_t v = a[b];

			if (b >= ws) {
				v |= a[b - ws] << bs;
				if (bs > 0 && b > ws)
					v |= a[b - ws - 1] >> (64 - bs);
			}
			z[b] = v;
		}
	}
	*nc = c;
	return w;
}

#define REACHED(p, w, k, t)	((p)->reach[(k) * (w) + (t) / 64] >> ((t) % 64) & 1)

/*
 * Closed pieces left whole whose lengths add up to exactly room into bin
 * m: returns 1, or 0 when there are none such.
 */
static int
exact_fill(struct ovl_packer *p, const uint32_t *len, const uint8_t *open,
    size_t n, uint32_t room, size_t m, size_t *nt)
{
	uint32_t cand[EXACT_MAX], t;
	size_t c, w, k;

	w = subset_sums(p, len, open, n, room, cand, &c);
	if (!REACHED(p, w, c, room))
		return 0;
	for (k = c, t = room; k > 0 && t > 0; k--) {
		uint32_t x = cand[k - 1], l = len[x] - p->rlo[x];

		if (REACHED(p, w, k - 1, t))
			continue;	/* reached without it */
		p->tmp[(*nt)++] = (struct ovl_frag){ x, p->rlo[x], l,
		    (uint32_t)m };
		p->rlo[x] = len[x];
		p->room[m] -= l;
		t -= l;
	}
	return 1;
}

/*
 * The closed piece whose tail fills a gap before an open part, its head
 * the next open part: one whose head leaves a room that the others can
 * fill exactly, if there is one, else the shortest longer than the gap.
 * Returns it or UINT32_MAX.
 */
static uint32_t
gap_piece(struct ovl_packer *p, const uint32_t *len, const uint8_t *open,
    size_t n, uint32_t cap, uint32_t gap)
{
	uint32_t cand[EXACT_MAX], x = UINT32_MAX;
	size_t i, c, w;

	w = subset_sums(p, len, open, n, cap, cand, &c);
	for (i = n; i > 0; i--) {
		uint32_t y = p->order[i - 1], l = len[y] - p->rlo[y];

		if (open[y] || l <= gap || l - gap > cap)
			continue;
		if (x == UINT32_MAX)
			x = y;
		if (REACHED(p, w, c, cap - (l - gap)))
			return y;
	}
	return x;
}

/*
 * The third try of ovl_pack_fill_ends, bin after bin: a bin that takes an
 * open part (a piece without its end token, or a head cut before) fills
 * the room before it with closed pieces whose lengths add up to it
 * exactly, else with whole ones longest first and then the tail of one
 * more (its head is the next open part to place); any other bin takes
 * whole closed pieces longest first and ends with the head of one more.
 */
static size_t
fill_ends_seq(struct ovl_packer *p, const uint32_t *len, const uint8_t *open,
    size_t n, uint32_t cap, size_t nbins)
{
	size_t i, j, nt = 0, np = 0;

	if (n + nbins > p->seq_cap) {
		p->seq_cap = n + nbins;
		p->rlo = ovl_xrealloc(p->rlo, p->seq_cap * sizeof(*p->rlo));
		p->pend = ovl_xrealloc(p->pend, p->seq_cap * sizeof(*p->pend));
	}
	for (i = n; i > 0; i--) {
		uint32_t x = p->order[i - 1];

		p->rlo[x] = 0;
		if (open[x])	/* longest last: taken first */
			p->pend[np++] = (struct ovl_frag){ x, 0, len[x], 0 };
	}
	for (j = 0; j < nbins; j++) {
		struct ovl_frag last = { 0, 0, 0, (uint32_t)j };
		int have = np > 0;
		uint32_t gap;

		p->room[j] = cap;
		p->closer[j] = NO_CLOSER;
		if (have) {
			last = p->pend[--np];
			last.bin = (uint32_t)j;
			if (last.len > cap)
				return SIZE_MAX;
			p->room[j] -= last.len;
			if (p->room[j] > 0 && exact_fill(p, len, open, n,
			    p->room[j], j, &nt))
				goto close;
		}
		for (i = 0; i < n && p->room[j] > 0; i++) {
			uint32_t x = p->order[i], l = len[x] - p->rlo[x];

			if (open[x] || l == 0 || l > p->room[j])
				continue;
			p->tmp[nt++] = (struct ovl_frag){ x, p->rlo[x], l,
			    (uint32_t)j };
			p->rlo[x] = len[x];
			p->room[j] -= l;
		}
		gap = p->room[j];
		if (gap > 0) {
			uint32_t x = UINT32_MAX;

			if (have) {
				x = gap_piece(p, len, open, n, cap, gap);
			} else {
				/* the shortest closed piece longer than the gap */
				for (i = n; i > 0 && x == UINT32_MAX; i--) {
					uint32_t y = p->order[i - 1];

					if (!open[y] && len[y] - p->rlo[y] > gap)
						x = y;
				}
			}
			if (x != UINT32_MAX && have) {
				/* its tail here, its head an open part */
				uint32_t cut = len[x] - gap;

				p->tmp[nt++] = (struct ovl_frag){ x, cut, gap,
				    (uint32_t)j };
				p->pend[np++] = (struct ovl_frag){ x, p->rlo[x],
				    cut - p->rlo[x], 0 };
				p->rlo[x] = len[x];
				p->room[j] = 0;
			} else if (x != UINT32_MAX) {
				last = (struct ovl_frag){ x, p->rlo[x], gap,
				    (uint32_t)j };
				p->rlo[x] += gap;
				p->room[j] = 0;
				have = 1;
			}
		}
close:
		if (have) {
			p->closer[j] = (uint32_t)nt;
			p->tmp[nt++] = last;
		}
	}
	if (np > 0)
		return SIZE_MAX;
	for (i = 0; i < n; i++)
		if (!open[i] && p->rlo[i] < len[i])
			return SIZE_MAX;
	return nt;
}

size_t
ovl_pack_fill_ends(struct ovl_packer *p, const uint32_t *len,
    const uint8_t *open, size_t n, uint32_t cap, size_t nbins,
    struct ovl_frag *frag)
{
	size_t i, j, nt = SIZE_MAX;
	int first;

	if (n == 0 || nbins == 0)
		return 0;
	grow_items(p, n);
	if (n > p->defer_cap) {
		p->defer = ovl_xrealloc(p->defer, n * sizeof(*p->defer));
		p->defer_cap = n;
	}
	if (n + nbins > p->tmp_cap) {
		p->tmp_cap = n + nbins;
		p->tmp = ovl_xrealloc(p->tmp, p->tmp_cap * sizeof(*p->tmp));
	}
	if (nbins > p->fill_cap) {
		p->room = ovl_xrealloc(p->room, nbins * sizeof(*p->room));
		p->fill_cap = nbins;
	}
	if (nbins + 1 > p->ends_cap) {
		p->ends_cap = nbins + 1;
		p->closer = ovl_xrealloc(p->closer, p->ends_cap *
		    sizeof(*p->closer));
		p->bstart = ovl_xrealloc(p->bstart, p->ends_cap *
		    sizeof(*p->bstart));
	}
	for (i = 0; i < n; i++)
		p->order[i] = (uint32_t)i;
	ovl_pack_sort_desc(p->order, n, len);
	for (first = 0; first < 2 && nt == SIZE_MAX; first++)
		nt = fill_ends_try(p, len, open, n, cap, nbins, first);
	if (nt == SIZE_MAX)
		nt = fill_ends_seq(p, len, open, n, cap, nbins);
	if (nt == SIZE_MAX)
		return SIZE_MAX;
	/* out bin by bin, each bin's last fragment last */
	memset(p->bstart, 0, (nbins + 1) * sizeof(*p->bstart));
	for (i = 0; i < nt; i++)
		p->bstart[p->tmp[i].bin + 1]++;
	for (j = 0; j < nbins; j++)
		p->bstart[j + 1] += p->bstart[j];
	for (i = 0; i < nt; i++) {
		j = p->tmp[i].bin;
		if (p->closer[j] != i)
			frag[p->bstart[j]++] = p->tmp[i];
	}
	for (j = 0; j < nbins; j++)
		if (p->closer[j] != NO_CLOSER)
			frag[p->bstart[j]++] = p->tmp[p->closer[j]];
	return nt;
}

