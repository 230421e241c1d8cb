/*
 * ovl-source: the table of input formats, indexed by the plan's names
 * (enum ovl_in_format). A format is a reader and a row here.
 */
#include "source.h"

extern const struct src_format src_fmt_jsonl, src_fmt_text, src_fmt_tar,
	src_fmt_wds, src_fmt_parquet, src_fmt_megatron, src_fmt_npy;

const struct src_format *const src_formats[] = {
	[OVL_IN_JSONL] = &src_fmt_jsonl,
	[OVL_IN_TEXT] = &src_fmt_text,
	[OVL_IN_TAR] = &src_fmt_tar,
	[OVL_IN_WDS] = &src_fmt_wds,
	[OVL_IN_PARQUET] = &src_fmt_parquet,
	[OVL_IN_MEGATRON] = &src_fmt_megatron,
	[OVL_IN_NPY] = &src_fmt_npy,
};
_Static_assert(sizeof(src_formats) / sizeof(src_formats[0]) ==
    OVL_IN_NFORMATS, "a row per input format of the plan");

/* The format a file name suggests, or FMT_AUTO. */
int
guess_format(const char *path)
{
	static const char *const zs[] = { ".zst", ".zstd", ".gz", ".gzip",
	    ".xz", ".bz2", ".lz4" };
	const char *base = strrchr(path, '/');
	const char *const *e;
	char name[256];
	size_t n, i;
	int f;

	base = base != NULL ? base + 1 : path;
	n = strlen(base);
	if (ovl_remote_is(path) && !ovl_remote_is_s3(path))
		n = strcspn(base, "?#");	/* a URL's query is no name */
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
	for (f = 0; f < OVL_IN_NFORMATS; f++)
		for (e = src_formats[f]->exts; e != NULL && *e != NULL; e++)
			if (n > strlen(*e) &&
			    strcasecmp(name + n - strlen(*e), *e) == 0)
				return f;
	return FMT_AUTO;
}

