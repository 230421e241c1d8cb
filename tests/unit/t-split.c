/*
 * split: the weights' syntax, the shares the assignment gives, and what
 * the identity is made of (split.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "split.h"
#include "unit.h"

static void
test_parse(void)
{
	struct ovl_split sp;
	const char *why;
	char buf[64];

	CHECK(ovl_split_parse("969,30,1", &sp, &why) == 0);
	CHECK(sp.n == 3 && sp.total == 1000 && sp.w[1] == 30);
	ovl_split_format(&sp, buf, sizeof(buf));
	CHECK(strcmp(buf, "969,30,1") == 0);
	CHECK(ovl_split_parse("9,1", &sp, &why) == 0 && sp.n == 2);
	CHECK(ovl_split_parse("0,1", &sp, &why) == 0);
	CHECK(ovl_split_parse("5", &sp, &why) == -1);
	CHECK(ovl_split_parse("1,1,1,1", &sp, &why) == -1);
	CHECK(ovl_split_parse("0,0", &sp, &why) == -1);
	CHECK(ovl_split_parse("1,,1", &sp, &why) == -1);
	CHECK(ovl_split_parse("1,-1", &sp, &why) == -1);
	CHECK(ovl_split_parse("1.5,1", &sp, &why) == -1);
	CHECK(ovl_split_parse("1,1,", &sp, &why) == -1);
	CHECK(ovl_split_parse("4294967297,1", &sp, &why) == -1);
}

static void
test_shares(void)
{
	struct ovl_split sp;
	const char *why;
	unsigned n[3] = { 0, 0, 0 }, i, again = 1, zero = 1;
	uint64_t pos;

	CHECK(ovl_split_parse("80,15,5", &sp, &why) == 0);
	for (pos = 0; pos < 100000; pos++) {
		i = ovl_split_of(&sp, 7, "a/b.jsonl", 0, pos * 37);
		n[i]++;
		again &= ovl_split_of(&sp, 7, "a/b.jsonl", 0, pos * 37) == i;
	}
	CHECK(again);
	/* within 1% of the weights (about 8 sigma for the smallest) */
	CHECK(n[0] > 79000 && n[0] < 81000);
	CHECK(n[1] > 14000 && n[1] < 16000);
	CHECK(n[2] > 4000 && n[2] < 6000);
	/* a weight 0 takes nothing */
	CHECK(ovl_split_parse("1,0,1", &sp, &why) == 0);
	for (pos = 0; pos < 10000; pos++)
		zero &= ovl_split_of(&sp, 1, "x", 0, pos) != 1;
	CHECK(zero);
}

static void
test_identity(void)
{
	struct ovl_split sp;
	const char *why;
	unsigned d_seed = 0, d_name = 0, d_part = 0;
	uint64_t pos;

	CHECK(ovl_split_parse("1,1", &sp, &why) == 0);
	for (pos = 0; pos < 1000; pos++) {
		unsigned a = ovl_split_of(&sp, 1, "f", 0, pos);

		d_seed += ovl_split_of(&sp, 2, "f", 0, pos) != a;
		d_name += ovl_split_of(&sp, 1, "g", 0, pos) != a;
		d_part += ovl_split_of(&sp, 1, "f", 1, pos) != a;
	}
	/* each part of the identity draws anew: about half move */
	CHECK(d_seed > 400 && d_seed < 600);
	CHECK(d_name > 400 && d_name < 600);
	CHECK(d_part > 400 && d_part < 600);
	CHECK(strcmp(ovl_split_relname("/p/d/a.jsonl", "/p"), "d/a.jsonl") == 0);
	CHECK(strcmp(ovl_split_relname("/p/d/a.jsonl", "/p/"), "d/a.jsonl") == 0);
	CHECK(strcmp(ovl_split_relname("/pq/a.jsonl", "/p"), "/pq/a.jsonl") == 0);
	CHECK(strcmp(ovl_split_relname("./d/a.jsonl", "."), "d/a.jsonl") == 0);
	CHECK(strcmp(ovl_split_relname("./d/a.jsonl", NULL), "d/a.jsonl") == 0);
	CHECK(strcmp(ovl_split_relname("https://h/a", "."), "https://h/a") == 0);
}

static void
test_path(void)
{
	char *p;

	p = ovl_split_path("out/packed", 0);
	CHECK(strcmp(p, "out/packed") == 0);
	free(p);
	p = ovl_split_path("out/packed", 1);
	CHECK(strcmp(p, "out/packed.validation") == 0);
	free(p);
	p = ovl_split_path("ck", 2);
	CHECK(strcmp(p, "ck.test") == 0);
	free(p);
	CHECK(ovl_split_path(NULL, 1) == NULL);
}

int
main(void)
{
	RUN(test_parse);
	RUN(test_shares);
	RUN(test_identity);
	RUN(test_path);
	UNIT_DONE();
}
