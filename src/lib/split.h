/*
 * split: held-out splits by document (plan key "split", ovl-source
 * --split). A split spec is two or three integer weights, "969,30,1",
 * for the splits named train, validation and test in that order.
 *
 * A document's split is a function of its identity and the seed alone:
 * the name of its file (relative to a root, normally the plan's
 * directory), the chunk part (a parquet row group, else 0) and its
 * position in the file (the record's byte offset, or its row or
 * document number for row formats). XXH64 of those, keyed by the seed,
 * scaled to the sum of the weights, picks the split whose cumulative
 * range holds it. So a document is in exactly one split, and its split
 * does not change with the mixture, the partitions, the shuffles, the
 * epoch, the chunk size of an uncompressed file or the source it is
 * read by.
 */
#ifndef OVL_SPLIT_H
#define OVL_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#define OVL_SPLIT_MAX	3

/* train validation test: the split names, NULL-terminated. */
extern const char *const ovl_split_names[OVL_SPLIT_MAX + 1];

struct ovl_split {
	unsigned	 n;			/* 2 or 3 weights */
	uint64_t	 w[OVL_SPLIT_MAX];	/* the weights, sum > 0 */
	uint64_t	 total;
};

/*
 * Parse "A,B[,C]" (integers, sum at least 1 and at most 2^32). 0, or -1
 * with *why set to a static message.
 */
int	ovl_split_parse(const char *spec, struct ovl_split *sp,
	    const char **why);

/* Print the weights as "A,B[,C]" into buf (at least 64 bytes). */
void	ovl_split_format(const struct ovl_split *sp, char *buf, size_t size);

/*
 * The split (index into ovl_split_names) of the document at pos of part
 * of the file named name (its name as ovl_split_relname gives it).
 */
unsigned ovl_split_of(const struct ovl_split *sp, uint64_t seed,
	    const char *name, uint32_t part, uint64_t pos);

/*
 * The file's name for the identity: path without root and the '/' after
 * it when path lies under root (root NULL or "": path as it is). Leading
 * "./" is dropped either way.
 */
const char *ovl_split_relname(const char *path, const char *root);

/*
 * The path a split's outputs go to: path itself for train (index 0),
 * else "PATH.NAME" (a new string; the caller frees it). path NULL: NULL.
 */
char	*ovl_split_path(const char *path, unsigned split);

#endif
