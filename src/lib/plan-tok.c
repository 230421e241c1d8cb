/*
 * plan-tok: a plan's tokenizer choices: files resolved against the plan's
 * directory, and loaded for ovl-mix --check (OVL_PLAN_TOKENIZERS); and
 * what becomes of documents longer than seq-len (long-docs).
 */
#include "plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "plan-int.h"
#include "tok.h"

/*
 * Resolve the FILE of "tiktoken:FILE[:PATTERN]", "hf:FILE" and
 * "sentencepiece:FILE" against the plan's directory.
 */
char *
ovl_plan__resolve_tokenizer(const char *dir, const char *spec)
{
	const char *f, *colon;
	char *file, *joined, *r;
	size_t n;

	static const char *const whole[] = { "hf:", "sentencepiece:" };
	size_t i;

	for (i = 0; i < 2; i++) {
		n = strlen(whole[i]);
		if (strncmp(spec, whole[i], n) != 0 || spec[n] == '/' ||
		    spec[n] == '\0' || dir == NULL || strcmp(dir, ".") == 0)
			continue;
		joined = ovl_plan__join_dir(dir, spec + n);
		r = ovl_xmalloc(n + strlen(joined) + 1);
		strcpy(r, whole[i]);
		strcat(r, joined);
		free(joined);
		return r;
	}
	if (strncmp(spec, "tiktoken:", 9) != 0)
		return ovl_xstrdup(spec);
	f = spec + 9;
	colon = strchr(f, ':');
	n = colon != NULL ? (size_t)(colon - f) : strlen(f);
	if (n == 0 || f[0] == '/' || dir == NULL || strcmp(dir, ".") == 0)
		return ovl_xstrdup(spec);
	file = ovl_xmalloc(n + 1);
	memcpy(file, f, n);
	file[n] = '\0';
	joined = ovl_plan__join_dir(dir, file);
	r = ovl_xmalloc(9 + strlen(joined) + (colon != NULL ? strlen(colon) :
	    0) + 1);
	strcpy(r, "tiktoken:");
	strcat(r, joined);
	if (colon != NULL)
		strcat(r, colon);
	free(file);
	free(joined);
	return r;
}

static int
same(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/*
 * Load a source's tokenizer with its end- and beginning-of-document
 * tokens and its post_processor's template, as ovl-source will: a missing
 * or bad file is a plan error at the source's line, and so is a tokenizer,
 * vocabulary or end of document other than the first source's, which
 * ovl-mix would refuse once every stage had started.
 */
int
ovl_plan__check_tokenizer(struct ctx *c, const struct ovl_plan_source *s,
    struct ovl_plan__tokref *ref)
{
	const struct ovl_plan *p = c->p;
	const char *spec = s->tokenizer ? s->tokenizer : p->tokenizer;
	const char *eod = s->eod_token ? s->eod_token : p->eod_token;
	const char *bos = s->bos_token ? s->bos_token : p->bos_token;
	const char *add = s->add_special ? s->add_special : p->add_special;
	struct ovl_tok *t;
	char err[512];
	int rc = 0;

	if (spec == NULL || strcmp(spec, "bytes") == 0)
		spec = "bytes";
	if (ref->spec != NULL && strcmp(ref->spec, spec) == 0 &&
	    same(eod, ref->eod) && same(bos, ref->bos) && same(add, ref->add))
		return 0;
	c->line = s->line;
	if ((t = ovl_tok_open(spec, err, sizeof(err))) == NULL)
		return ovl_plan__perr(c, "source %s: %s", s->name, err);
	ovl_tok_set_add_special(t, add == NULL || strcmp(add, "yes") == 0);
	if ((eod != NULL && ovl_tok_set_eod(t, eod, err, sizeof(err)) != 0) ||
	    (bos != NULL && ovl_tok_set_bos(t, bos, err, sizeof(err)) != 0) ||
	    ovl_tok_check_template(t, err, sizeof(err)) != 0)
		rc = ovl_plan__perr(c, "source %s: %s", s->name, err);
	else if (ovl_tok_eod(t) == OVL_TOK_NONE)
		rc = ovl_plan__perr(c, "source %s: tokenizer %s has no usual "
		    "end-of-document token: name one with eod-token=", s->name,
		    spec);
	else if (ovl_tok_probe(t, err, sizeof(err)) != 0)
		rc = ovl_plan__perr(c, "source %s: %s", s->name, err);
	else if (ref->first == NULL) {
		snprintf(ref->name, sizeof(ref->name), "%s", ovl_tok_name(t));
		ref->vocab = ovl_tok_vocab(t);
		ref->eod_id = ovl_tok_eod(t);
		ref->first = s->name;
		ref->line = s->line;
	} else if (strcmp(ref->name, ovl_tok_name(t)) != 0 ||
	    ref->vocab != ovl_tok_vocab(t) || ref->eod_id != ovl_tok_eod(t))
		rc = ovl_plan__perr(c, "source %s: tokenizer %s (vocab %" PRIu32
		    ", eod %" PRIu32 ") differs from source %s's at line %u: "
		    "%s (vocab %" PRIu32 ", eod %" PRIu32 "); the sources of a "
		    "plan share one vocabulary", s->name, ovl_tok_name(t),
		    ovl_tok_vocab(t), ovl_tok_eod(t), ref->first, ref->line,
		    ref->name, ref->vocab, ref->eod_id);
	ovl_tok_free(t);
	ref->spec = spec;
	ref->eod = eod;
	ref->bos = bos;
	ref->add = add;
	return rc;
}

enum ovl_long_docs
ovl_plan_long_docs(const struct ovl_plan *p, size_t i)
{
	const char *v = p->sources[i].long_docs != NULL ?
	    p->sources[i].long_docs : p->long_docs;
	size_t k;

	for (k = 0; v != NULL && ovl_plan_longdocs[k] != NULL; k++)
		if (strcmp(v, ovl_plan_longdocs[k]) == 0)
			return (enum ovl_long_docs)k;
	return OVL_LONG_SPLIT;
}

void
ovl_plan_shuffle_window(const struct ovl_plan *p, size_t i,
    struct ovl_docshuf_win *w)
{
	const char *v = p->sources[i].shuffle_window != NULL ?
	    p->sources[i].shuffle_window : p->shuffle_window;

	/* the parser checked every value */
	if (v == NULL || ovl_docshuf_parse(v, w) != 0) {
		w->kind = OVL_DOCSHUF_OFF;
		w->n = 0;
	}
}
