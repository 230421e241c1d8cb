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
};

const char *const ovl_pack_names[] = { "bfd", "first-fit", "concat", NULL };
#define NNAMES	(sizeof(ovl_pack_names) / sizeof(ovl_pack_names[0]) - 1)

int
ovl_pack_parse(const char *name)
{
	return ovl_cli_choice(ovl_pack_names, NNAMES, name);
}

const char *
ovl_pack_name(int method)
{
	return ovl_cli_choice_name(ovl_pack_names, NNAMES, method);
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
