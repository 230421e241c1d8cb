/*
 * ovl-test-tool: small helpers for the test suite (git's t/helper style),
 * over the same library the tools use. Not installed.
 *
 *   ovl-test-tool frames FILE
 *	one line per frame: index, byte offset, kind name, payload length
 *   ovl-test-tool dump FILE|-
 *	one line per frame, decoded (the tests' frame reader; FILE - is
 *	standard input). The stream header is checked; the frames are not
 *	(a test may hand it a damaged stream). Lines:
 *	  META <text, newlines as |>
 *	  DOC src= flags= pos=E:C:REC nchunks= nimages= cursor=E:C:OFF:REC
 *	      start= ntok= eod=<last token> text='<escaped>' sum=<of tokens>
 *	      mix=POS:TOKENS hash=<XXH64 of the payload, hex>
 *	  CHUNK_END src= epoch= chunk= nchunks= docs= bytes=
 *	  SEQ step= rank= mb= ntok= npieces= seq_len= flags= real= sum=
 *	      hash=
 *	  BARRIER n= step= mix_pos= tokens= offset=
 *	  STATE stage= n= <text, newlines as |>
 *	  STEP step= rank= seqs=
 *	  IMAGE inline|ref fmt= w= h= index= ntok= doc_pos= seq_pos= step=
 *	      rank= mb= piece= off= len= member= path= data=<XXH64 of bytes>
 *	  END frames=N
 *	  KIND<k> len=N (a kind this tool does not know)
 *   ovl-test-tool poke FILE INDEX PAYLOAD-OFFSET U32
 *	set the little-endian u32 at PAYLOAD-OFFSET of frame INDEX (0 is the
 *	first frame after the stream header) and seal the frame again, so its
 *	CRC holds: a frame that passes its CRC but makes no sense; with
 *	"kind" for PAYLOAD-OFFSET, set the frame's kind to U32 instead; with
 *	"flags", its header's flags byte
 *   ovl-test-tool minor FILE N
 *	set the stream header's minor version to N (header CRC resealed)
 *   ovl-test-tool net-cat IN OUT
 *	copy the bytes of IN to OUT, each a file, - or a tcp: endpoint
 *	(net.h; settings from the environment: OVL_SECRET_FILE, ...): a
 *	trainer's end of a stream, or a plain writer for the benchmarks
 *
 *   ovl-test-tool parquet FILE COLUMN
 *	read every row of COLUMN through lib/parquet.c and print what was
 *	met: "rowgroups= rows= values= nulls= pages= v1= v2= dict=
 *	enc=<names> sum=<XXH64 of the values>", then "rg=K off= len= rows="
 *	per row group; a reader error goes to stderr (exit 1)
 *
 * Exits 0, 1 on a bad file, 2 on bad arguments.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "frame.h"
#include "hash64.h"
#include "io.h"
#include "net.h"
#include "num.h"
#include "parquet.h"

static uint8_t *
slurp(const char *path, size_t *n)
{
	FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	uint8_t *b = NULL;
	size_t cap = 0, len = 0, r;

	if (fp == NULL) {
		fprintf(stderr, "ovl-test-tool: cannot open '%s': %s\n", path,
		    strerror(errno));
		exit(1);
	}
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			if ((b = realloc(b, cap)) == NULL)
				exit(1);
		}
		r = fread(b + len, 1, cap - len, fp);
		len += r;
	} while (r > 0);
	fclose(fp);
	*n = len;
	return b;
}

/* Walk the frames: calls fn for each; stops when fn returns non-zero. */
static int
walk(uint8_t *b, size_t n, int (*fn)(uint8_t *, size_t, uint64_t,
    const struct ovl_frame *, void *), void *arg)
{
	struct ovl_frame f;
	size_t off = OVL_STREAM_HDR_LEN;
	uint64_t i = 0;
	int rc;

	while (off < n) {
		rc = ovl_frame_parse(b + off, n - off, OVL_FRAME_LIMIT, &f);
		if (rc != OVL_F_OK) {
			fprintf(stderr, "ovl-test-tool: %s at byte offset %zu\n",
			    ovl_frame_strerror(rc), off);
			return 1;
		}
		if (fn(b + off, off, i++, &f, arg) != 0)
			return 0;
		off += f.size;
	}
	return 0;
}

static int
print_frame(uint8_t *p, size_t off, uint64_t i, const struct ovl_frame *f,
    void *arg)
{
	(void)p;
	(void)arg;
	printf("%" PRIu64 " %zu %s %" PRIu32 "\n", i, off, ovl_kind_name(f->kind),
	    f->len);
	return 0;
}

/* Text with newlines as |. */
static void
put_lines(const char *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		putchar(t[i] == '\n' ? '|' : t[i]);
}

/* 'text' with \\, \', \n, \r, \t and other control bytes escaped. */
static void
put_quoted(const char *t, size_t n)
{
	size_t i;
	unsigned char c;

	putchar('\'');
	for (i = 0; i < n; i++) {
		c = (unsigned char)t[i];
		if (c == '\\' || c == '\'')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\r')
			fputs("\\r", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	putchar('\'');
}

static int
dump_frame(uint8_t *p, size_t off, uint64_t i, const struct ovl_frame *f,
    void *arg)
{
	const char *text;
	uint32_t tl, k;
	uint64_t sum = 0;
	struct ovl_doc d;
	struct ovl_chunk_end ce;
	struct ovl_seq q;
	struct ovl_barrier b;
	struct ovl_state st;
	uint64_t n;

	(void)p;
	(void)i;
	(void)arg;
	switch (f->kind) {
	case OVL_META:
		if (ovl_meta_decode(f, &text, &tl) != OVL_F_OK)
			break;
		fputs("META ", stdout);
		put_lines(text, tl);
		putchar('\n');
		return 0;
	case OVL_DOC:
		if (ovl_doc_decode(f, &d) != OVL_F_OK)
			break;
		for (k = 0; k < d.ntokens; k++)
			sum += ovl_tok_at(d.tokens, d.width, k);
		printf("DOC src=%" PRIu32 " flags=%" PRIu32 " pos=%" PRIu32 ":%"
		    PRIu32 ":%" PRIu64 " nchunks=%" PRIu32 " nimages=%" PRIu32
		    " cursor=%" PRIu32 ":%" PRIu32 ":%" PRIu64 ":%" PRIu64
		    " start=%" PRIu64 " ntok=%" PRIu32 " eod=%" PRId64 " text=",
		    d.source, d.flags, d.epoch, d.chunk, d.record, d.nchunks,
		    d.nimages, d.epoch, d.chunk, d.next_off, d.next_rec,
		    d.start_off, d.ntokens, d.ntokens > 0 ?
		    (int64_t)ovl_tok_at(d.tokens, d.width, d.ntokens - 1) :
		    (int64_t)-1);
		put_quoted(d.text, d.text_len);
		printf(" sum=%" PRIu64 " mix=%" PRIu64 ":%" PRIu64 " hash=%016"
		    PRIx64 "\n", sum, d.mix_pos, d.mix_tokens,
		    ovl_hash64(f->payload, f->len, 0));
		return 0;
	case OVL_CHUNK_END:
		if (ovl_chunk_end_decode(f, &ce) != OVL_F_OK)
			break;
		printf("CHUNK_END src=%" PRIu32 " epoch=%" PRIu32 " chunk=%" PRIu32
		    " nchunks=%" PRIu32 " docs=%" PRIu64 " bytes=%" PRIu64 "\n",
		    ce.source, ce.epoch, ce.chunk, ce.nchunks, ce.ndocs,
		    ce.nbytes);
		return 0;
	case OVL_SEQ:
		if (ovl_seq_decode(f, &q) != OVL_F_OK)
			break;
		for (k = 0; k < q.ntokens; k++)
			sum += ovl_tok_at(q.tokens, q.width, k);
		printf("SEQ step=%" PRIu64 " rank=%" PRIu32 " mb=%" PRIu32
		    " ntok=%" PRIu32 " npieces=%" PRIu32 " seq_len=%" PRIu32
		    " flags=%" PRIu32 " real=%" PRIu32 " sum=%" PRIu64 " hash=%016"
		    PRIx64 "\n", q.step, q.rank, q.mb, q.ntokens, q.npieces,
		    q.seq_len, q.flags, q.cu_seqlens[q.npieces], sum,
		    ovl_hash64(f->payload, f->len, 0));
		return 0;
	case OVL_BARRIER:
		if (ovl_barrier_decode(f, &b) != OVL_F_OK)
			break;
		printf("BARRIER n=%" PRIu64 " step=%" PRIu64 " mix_pos=%" PRIu64
		    " tokens=%" PRIu64 " offset=%" PRIu32 "\n", b.n, b.step,
		    b.mix_pos, b.tokens, b.offset);
		return 0;
	case OVL_STATE:
		if (ovl_state_decode(f, &st) != OVL_F_OK)
			break;
		printf("STATE stage=%" PRIu32 " n=%" PRIu64 " ", st.stage, st.n);
		put_lines(st.text, st.text_len);
		putchar('\n');
		return 0;
	case OVL_STEP: {
		struct ovl_step sp;

		if (ovl_step_decode(f, &sp) != OVL_F_OK)
			break;
		printf("STEP step=%" PRIu64 " rank=%" PRIu32 " seqs=%" PRIu32 "\n",
		    sp.step, sp.rank, sp.seqs);
		return 0;
	}
	case OVL_IMAGE: {
		struct ovl_image im;

		if (ovl_image_decode(f, &im) != OVL_F_OK)
			break;
		printf("IMAGE %s fmt=%" PRIu32 " w=%" PRIu32 " h=%" PRIu32
		    " index=%" PRIu32 " ntok=%" PRIu32 " doc_pos=%" PRIu32
		    " seq_pos=%" PRIu32 " step=%" PRIu64 " rank=%" PRIu32 " mb=%"
		    PRIu32 " piece=%" PRIu32 " off=%" PRIu64 " len=%" PRIu64
		    " member=%.*s path=%.*s data=%016" PRIx64 "\n",
		    im.flags == OVL_IMAGE_REF ? "ref" : "inline", im.format,
		    im.width, im.height, im.index, im.ntokens, im.doc_pos,
		    im.seq_pos, im.step, im.rank, im.mb, im.piece, im.offset,
		    im.length, (int)im.name_len, im.name, (int)im.path_len,
		    im.path, ovl_hash64(im.data, im.data_len, 0));
		return 0;
	}
	case OVL_END:
		if (ovl_end_decode(f, &n) != OVL_F_OK)
			break;
		printf("END frames=%" PRIu64 "\n", n);
		return 0;
	default:
		printf("KIND%u len=%" PRIu32 "\n", f->kind, f->len);
		return 0;
	}
	printf("%s malformed len=%" PRIu32 " at=%zu\n", ovl_kind_name(f->kind),
	    f->len, off);
	return 0;
}

struct poke {
	uint64_t index, at, val;
	int done, kind;
};

static int
poke_frame(uint8_t *p, size_t off, uint64_t i, const struct ovl_frame *f,
    void *arg)
{
	struct poke *k = arg;

	(void)off;
	if (i != k->index)
		return 0;
	if (k->kind == 2) {	/* the header's flags */
		ovl_frame_seal(p, f->kind, (uint8_t)k->val, f->len);
		k->done = 1;
		return 1;
	}
	if (k->kind) {
		ovl_frame_seal(p, (uint8_t)k->val, f->flags, f->len);
		k->done = 1;
		return 1;
	}
	if (k->at + 4 > f->len) {
		fprintf(stderr, "ovl-test-tool: frame %" PRIu64 " has %" PRIu32
		    " payload bytes\n", i, f->len);
		exit(1);
	}
	ovl_put32(p + OVL_FRAME_HDR_LEN + k->at, (uint32_t)k->val);
	ovl_frame_seal(p, f->kind, f->flags, f->len);
	k->done = 1;
	return 1;
}

static int
net_cat(const char *in, const char *out)
{
	static uint8_t buf[1 << 20];
	char name[512];
	ssize_t n;

	ovl_err_setprog("ovl-test-tool");
	ovl_net_redirect(in, OVL_NET_READ, STDIN_FILENO, name, sizeof(name));
	ovl_net_redirect(out, OVL_NET_WRITE, STDOUT_FILENO, name, sizeof(name));
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ovl_err(1, "read error on '%s'", in);
		if (ovl_io_write_full(STDOUT_FILENO, buf, (size_t)n) != 0)
			ovl_err(1, "write error on '%s'", out);
	}
	if (ovl_io_issock(STDOUT_FILENO) && ovl_net_drain(STDOUT_FILENO, 60) != 0)
		ovl_err(1, "'%s' did not take the end of the stream", out);
	return 0;
}

static int
parquet_info(const char *path, const char *column)
{
	static const char *const enames[] = { "PLAIN", "", "PLAIN_DICTIONARY",
	    "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
	    "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY" };
	struct ovl_pq_io io;
	struct ovl_pq_file *f;
	struct ovl_pq_reader r;
	uint64_t rows = 0, vals = 0, nulls = 0, sum = 0, off, len;
	uint32_t pages[4] = { 0, 0, 0, 0 }, encs = 0, g, i;
	char err[512];
	FILE *fp = fopen(path, "rb");

	if (fp == NULL || ovl_pq_io_fd(&io, fileno(fp)) != 0 ||
	    (f = ovl_pq_open(&io, column, err, sizeof(err))) == NULL) {
		fprintf(stderr, "ovl-test-tool: '%s': %s\n", path, fp == NULL ?
		    strerror(errno) : err);
		return 1;
	}
	for (g = 0; g < ovl_pq_row_groups(f); g++) {
		const uint8_t *p;
		size_t n;
		int k;

		if (ovl_pq_reader_open(&r, f, g, 0) != 0) {
			fprintf(stderr, "ovl-test-tool: '%s': %s\n", path, r.err);
			return 1;
		}
		while ((k = ovl_pq_next(&r, &p, &n)) >= 0) {
			rows++;
			if (k == 0) {
				nulls++;
				continue;
			}
			vals++;
			sum = ovl_hash64(p, n, sum);
		}
		if (k == -2) {
			fprintf(stderr, "ovl-test-tool: '%s': %s\n", path, r.err);
			return 1;
		}
		for (i = 0; i < 4; i++)
			pages[i] += r.npages[i];
		encs |= r.encs;
		ovl_pq_reader_close(&r);
	}
	printf("rowgroups=%" PRIu32 " rows=%" PRIu64 " values=%" PRIu64
	    " nulls=%" PRIu64 " pages=%" PRIu32 " v1=%" PRIu32 " v2=%" PRIu32
	    " dict=%" PRIu32 " enc=", ovl_pq_row_groups(f), rows, vals, nulls,
	    pages[0] + pages[2] + pages[3], pages[0], pages[3], pages[2]);
	for (i = 0; i < sizeof(enames) / sizeof(enames[0]); i++)
		if (encs & (1u << i))
			printf("%s%s", enames[i], (encs >> (i + 1)) != 0 ? "," : "");
	printf(" sum=%016" PRIx64 "\n", sum);
	for (g = 0; g < ovl_pq_row_groups(f); g++) {
		ovl_pq_range(f, g, &off, &len);
		printf("rg=%" PRIu32 " off=%" PRIu64 " len=%" PRIu64 " rows=%"
		    PRIu64 "\n", g, off, len, ovl_pq_rows(f, g));
	}
	ovl_pq_close(f);
	fclose(fp);
	return 0;
}

int
main(int argc, char **argv)
{
	uint8_t *b;
	size_t n;
	struct poke k = { 0, 0, 0, 0, 0 };
	FILE *fp;

	if (argc == 4 && strcmp(argv[1], "net-cat") == 0)
		return net_cat(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "parquet") == 0)
		return parquet_info(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "minor") == 0) {
		uint64_t v;

		b = slurp(argv[2], &n);
		if (n < OVL_STREAM_HDR_LEN || ovl_num_u64(argv[3], &v) != 0 ||
		    v > 65535)
			return 2;
		b[10] = (uint8_t)(v & 0xff);
		b[11] = (uint8_t)(v >> 8);
		ovl_put32(b + 12, ovl_crc32c(0, b, 12));
		if ((fp = fopen(argv[2], "wb")) == NULL ||
		    fwrite(b, 1, n, fp) != n || fclose(fp) != 0)
			return 1;
		free(b);
		return 0;
	}
	if (argc == 6 && strcmp(argv[4], "kind") == 0) {
		k.kind = 1;
		argv[4] = (char *)"0";
	}
	if (argc == 6 && strcmp(argv[4], "flags") == 0) {
		k.kind = 2;
		argv[4] = (char *)"0";
	}
	if (argc == 3 && (strcmp(argv[1], "frames") == 0 ||
	    strcmp(argv[1], "dump") == 0)) {
		int rc;

		b = slurp(argv[2], &n);
		if (n < OVL_STREAM_HDR_LEN ||
		    ovl_stream_hdr_check(b, n, NULL) != OVL_F_OK) {
			fprintf(stderr, "ovl-test-tool: '%s': not an overlord "
			    "stream\n", argv[2]);
			free(b);
			return 1;
		}
		rc = walk(b, n, argv[1][0] == 'f' ? print_frame : dump_frame,
		    NULL);
		free(b);
		if (fflush(stdout) != 0)
			return 1;
		return rc;
	}
	if (argc != 6 || strcmp(argv[1], "poke") != 0 ||
	    ovl_num_u64(argv[3], &k.index) != 0 ||
	    ovl_num_u64(argv[4], &k.at) != 0 ||
	    ovl_num_u64(argv[5], &k.val) != 0 || k.val > UINT32_MAX ||
	    (k.kind && k.val > 255)) {
		fprintf(stderr, "usage: ovl-test-tool frames FILE\n"
		    "       ovl-test-tool dump FILE|-\n"
		    "       ovl-test-tool poke FILE INDEX PAYLOAD-OFFSET|kind|flags U32\n"
		    "       ovl-test-tool minor FILE N\n"
		    "       ovl-test-tool net-cat IN OUT\n"
		    "       ovl-test-tool parquet FILE COLUMN\n");
		return 2;
	}
	b = slurp(argv[2], &n);
	if (walk(b, n, poke_frame, &k) != 0)
		return 1;
	if (!k.done) {
		fprintf(stderr, "ovl-test-tool: no frame %" PRIu64 "\n", k.index);
		return 1;
	}
	if ((fp = fopen(argv[2], "wb")) == NULL || fwrite(b, 1, n, fp) != n ||
	    fclose(fp) != 0) {
		fprintf(stderr, "ovl-test-tool: cannot write '%s'\n", argv[2]);
		return 1;
	}
	free(b);
	return 0;
}
