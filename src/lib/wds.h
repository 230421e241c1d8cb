/*
 * wds: documents of a tar archive, one per member group. In a plain tar
 * every regular member is its own group; in a WebDataset, consecutive
 * members that share a key (the path up to the first dot of the base name)
 * form one sample. A group's document is its text member (by extension:
 * .txt by default in a WebDataset, every member in a tar); its images are
 * counted. Groups are numbered from 0 in archive order: that number is the
 * cursor offset of a tar chunk.
 */
#ifndef OVL_WDS_H
#define OVL_WDS_H

#include <stddef.h>
#include <stdint.h>

#include <archive.h>

#include "buf.h"

struct ovl_wds_opts {
	int		 wds;		/* WebDataset grouping; 0: a plain tar */
	const char *const *ext;		/* text member extensions */
	size_t		 next;		/* 0: the default */
	uint64_t	 max_doc;	/* longest text member, and image */
	int		 probe;		/* read every image's size (image.h) */
	int		 keep;		/* and keep its bytes (with probe) */
};

/* An image member of a group (with opts.probe). */
struct ovl_wds_image {
	uint32_t	 width, height;
	int		 format;	/* enum ovl_image_format */
	uint64_t	 size;		/* the member's bytes */
	uint64_t	 data_off;	/* byte offset of its data in the tar */
	size_t		 at;		/* its bytes at group.image_data + at (keep) */
	char		 member[256];
};

#define OVL_WDS_MAX_IMAGES	256	/* per group */

/* A group with a text member, about to become a document. */
struct ovl_wds_group {
	uint64_t	 index;		/* group number in the archive */
	uint64_t	 record;	/* document number (groups with text) */
	uint32_t	 nimages;
	const struct ovl_wds_image *images;	/* nimages of them, in member
						   order; NULL without probe */
	const uint8_t	*image_data;	/* their bytes (opts.keep), or NULL */
	const char	*member;	/* the text member's name */
	const char	*text;
	size_t		 len;
};

/*
 * What went wrong, for ovl_wds_cb.bad. OVL_WDS_IMAGE: an image member
 * whose header is damaged or of another format, larger than max_doc, or
 * one too many; its whole group is then left out (a caption without its
 * image is no sample).
 */
enum { OVL_WDS_INPUT, OVL_WDS_DUP, OVL_WDS_TOOLONG, OVL_WDS_IMAGE };

struct ovl_wds_cb {
	void	(*doc)(void *arg, const struct ovl_wds_group *g);
	/* a bad member or header: counted or fatal, as the caller decides */
	void	(*bad)(void *arg, int what, uint64_t index, const char *member,
		    const char *msg);
	void	*arg;
};

struct ovl_wds_result {
	uint64_t	 groups;	/* member groups in the archive */
	uint64_t	 no_text;	/* WebDataset groups without a text member */
	uint64_t	 bytes;		/* archive bytes read */
	int		 failed;	/* reading stopped at a corrupt archive */
};

/*
 * Read the archive open at a (headers with archive_read_next_header),
 * calling cb->doc for every group with text from group g0 on, numbering
 * documents from rec0; text lives in *buf (reused). Damaged headers that
 * libarchive can step over are reported and skipped; a corrupt archive is
 * reported and ends the reading (res->failed).
 */
void	ovl_wds_read(struct archive *a, const struct ovl_wds_opts *o,
	    uint64_t g0, uint64_t rec0, struct ovl_buf *buf,
	    const struct ovl_wds_cb *cb, struct ovl_wds_result *res);
/* Does name end with suffix? */
int	ovl_wds_ends_with(const char *name, const char *suffix);
/* The WebDataset key of a member name: its length in name. */
size_t	ovl_wds_keylen(const char *name);

#endif
