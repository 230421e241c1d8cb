/*
 * libFuzzer target: the stream format. Any bytes go through the stream
 * header check and the frame parser, and every frame with a good CRC
 * through its kind's decoder: nothing may crash, read out of bounds or
 * loop, whatever the input (ovl-frame(5)); and through a reader holding
 * the grammar of ovl-mix and of ovl-ckpt (ovl_reader_expect).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "frame.h"
#include "frameio.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

/*
 * The same bytes through a reader that holds a stage's grammar: every
 * frame it returns, or the error that ends it, and nothing else.
 */
static void
grammar(const uint8_t *data, size_t n, unsigned checks, const char *keys)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	int fd = memfd_create("stream", MFD_CLOEXEC), rc, guard = 0;

	if (fd < 0 || write(fd, data, n) != (ssize_t)n ||
	    lseek(fd, 0, SEEK_SET) != 0)
		abort();
	r = ovl_reader_new(fd, "fuzz", 1u << 20);
	ovl_reader_set_chunk(r, 4096);	/* small reads: more runs per second */
	ovl_reader_expect(r, &(struct ovl_expect){ .meta_keys = keys,
	    .checks = checks, .ranks = 4 });
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME)
		if (++guard > 1 << 20)
			abort();
	if (rc < 0 && ovl_reader_error(r)[0] == '\0')
		abort();	/* every error says what it is */
	ovl_reader_free(r);
	close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct ovl_frame f;
	struct ovl_doc d;
	struct ovl_seq s;
	struct ovl_piece p;
	struct ovl_barrier b;
	struct ovl_state st;
	struct ovl_chunk_end ce;
	struct ovl_cursor c;
	const char *text;
	uint32_t tl, i;
	uint64_t nf;
	uint16_t minor;
	struct ovl_step sp;
	size_t off = OVL_STREAM_HDR_LEN;
	static uint32_t *pos;
	static volatile uint32_t sink;

	/* the header check must hold up too; frames are parsed either way */
	(void)ovl_stream_hdr_check(data, n, &minor);
	if (n < off)
		off = 0;
	while (off < n) {
		if (ovl_frame_parse(data + off, n - off, 1u << 20, &f) != OVL_F_OK)
			break;
		switch (f.kind) {
		case OVL_META:
			(void)ovl_meta_decode(&f, &text, &tl);
			break;
		case OVL_DOC:
			if (ovl_doc_decode(&f, &d) == OVL_F_OK) {
				ovl_doc_cursor(&d, &c);
				/* every id read, in either width */
				sink ^= ovl_tok_max(d.tokens, d.width, d.ntokens);
			}
			break;
		case OVL_CHUNK_END:
			(void)ovl_chunk_end_decode(&f, &ce);
			break;
		case OVL_SEQ:
			if (ovl_seq_decode(&f, &s) == OVL_F_OK) {
				for (i = 0; i < s.npieces; i++)
					ovl_seq_piece(&s, i, &p);
				sink ^= ovl_tok_max(s.tokens, s.width, s.ntokens);
				/* positions sent (either width) or derived */
				pos = realloc(pos, ((size_t)s.ntokens + 1) * 4);
				if (pos == NULL)
					abort();
				ovl_seq_position_ids(&s, pos);
				for (i = 0; i < s.ntokens; i++)
					sink ^= pos[i];
			}
			break;
		case OVL_BARRIER:
			(void)ovl_barrier_decode(&f, &b);
			break;
		case OVL_STATE:
			(void)ovl_state_decode(&f, &st);
			break;
		case OVL_END:
			(void)ovl_end_decode(&f, &nf);
			break;
		case OVL_STEP:
			(void)ovl_step_decode(&f, &sp);
			break;
		case OVL_IMAGE: {
			struct ovl_image im;
			volatile uint8_t sink = 0;

			/* every byte it names lies inside the frame */
			if (ovl_image_decode(&f, &im) == OVL_F_OK) {
				for (i = 0; i < im.name_len; i++)
					sink ^= (uint8_t)im.name[i];
				for (i = 0; i < im.path_len; i++)
					sink ^= (uint8_t)im.path[i];
				for (i = 0; i < im.data_len; i++)
					sink ^= im.data[i];
			}
			(void)sink;
			break;
		}
		default:
			break;
		}
		off += f.size;
	}
	grammar(data, n, OVL_EXPECT_SEQ, "vocab");
	grammar(data, n, OVL_EXPECT_DOC, "vocab eod");
	return 0;
}
