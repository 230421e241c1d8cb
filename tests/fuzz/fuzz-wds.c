/*
 * libFuzzer target: tar and WebDataset member grouping (src/lib/wds.c) on
 * archives read from memory by libarchive, as a plain tar and as a
 * WebDataset, from the start and resumed at a later group. Documents must
 * come in order, numbered without gaps, each within the text limit, and
 * the resumed reading must see the same documents from its group on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>

#include "buf.h"
#include "input.h"
#include "wds.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

struct seen {
	uint64_t	 n, last_index, next_record;
	uint64_t	 index[64];
	size_t		 len[64];
};

static void
on_doc(void *arg, const struct ovl_wds_group *g)
{
	struct seen *s = arg;

	uint32_t i;

	for (i = 0; g->images != NULL && i < g->nimages; i++)
		if (g->images[i].width == 0 || g->images[i].height == 0)
			abort();
	if (g->len > 4096 || g->record != s->next_record ||
	    (s->n > 0 && g->index <= s->last_index))
		abort();
	if (s->n < 64) {
		s->index[s->n] = g->index;
		s->len[s->n] = g->len;
	}
	s->n++;
	s->next_record++;
	s->last_index = g->index;
}

static void
on_bad(void *arg, int what, uint64_t index, const char *member,
    const char *msg)
{
	(void)arg;
	(void)what;
	(void)index;
	if (member == NULL || msg == NULL || msg[0] == '\0')
		abort();
}

static void
one(const uint8_t *data, size_t n, int wds, uint64_t g0, struct seen *s)
{
	static struct ovl_buf text;
	static const char *const ext[] = { ".txt", ".md" };
	/* a WebDataset also reads its images' sizes (image.h) */
	struct ovl_wds_opts o = { wds, ext, wds ? 2 : 0, 4096, wds };
	struct ovl_wds_cb cb = { on_doc, on_bad, s };
	struct ovl_wds_result res;
	struct archive *a;

	/* the library reads through ovl_arc, loaded at first use (dl.h) */
	if (ovl_arc.read_new == NULL && ovl_arc_load() != 0)
		abort();
	a = archive_read_new();

	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	if (archive_read_open_memory(a, data, n) == ARCHIVE_OK)
		ovl_wds_read(a, &o, g0, 0, &text, &cb, &res);
	archive_read_free(a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct seen all, from;
	uint64_t i, j;
	int wds;

	for (wds = 0; wds <= 1; wds++) {
		memset(&all, 0, sizeof(all));
		one(data, n, wds, 0, &all);
		if (all.n < 2 || all.n > 64)
			continue;
		/* resumed at the second document's group */
		memset(&from, 0, sizeof(from));
		one(data, n, wds, all.index[1], &from);
		if (from.n > all.n - 1)
			abort();
		for (i = 0, j = 1; i < from.n && i < 64; i++, j++)
			if (from.index[i] != all.index[j] ||
			    from.len[i] != all.len[j])
				abort();
	}
	return 0;
}
