/*
 * plan-paths: a source's path= patterns made its files, as ovl-source
 * will list them: local globs against the plan's directory (their brace
 * groups bounded), URLs as URLs, s3:// globs listed.
 */
#include "plan.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "err.h"
#include "plan-int.h"
#include "remote.h"

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Paths a pattern's brace groups may expand to, at most. */
#define BRACE_MAX 4096

/*
 * An upper bound on the alternatives of pat's {a,b,...} groups (the
 * product of every group's count, nested ones included), stopping above
 * BRACE_MAX: glob(3) would build every one of them, 2^24 for 24 groups.
 */
static unsigned long
brace_count(const char *pat)
{
	unsigned long total = 1;
	const char *p, *q;
	int depth;

	for (p = pat; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0') {
			p++;
			continue;
		}
		if (*p != '{')
			continue;
		unsigned long alts = 1;

		depth = 0;
		for (q = p + 1; *q != '\0'; q++) {
			if (*q == '\\' && q[1] != '\0')
				q++;
			else if (*q == '{')
				depth++;
			else if (*q == '}' && depth-- == 0)
				break;
			else if (*q == ',' && depth == 0)
				alts++;
		}
		if (*q == '\0')
			continue;	/* no group: a literal brace */
		total *= alts;
		if (total > BRACE_MAX)
			return total;
	}
	return total;
}

/* A URL pattern: its files, as ovl-source will list them. */
static int
remote_paths(struct ctx *c, struct ovl_plan_source *s, const char *pattern)
{
	char **v, err[600];
	size_t n, k;

	if (ovl_chunks_expand_remote(pattern, &v, &n, err, sizeof(err)) != 0)
		return ovl_plan__perr(c, "source '%s': %s", s->name, err);
	s->paths = ovl_xrealloc(s->paths, (s->npaths + n) * sizeof(char *));
	for (k = 0; k < n; k++)
		s->paths[s->npaths++] = v[k];
	free(v);
	return 0;
}

int
ovl_plan__resolve_paths(struct ctx *c, struct ovl_plan_source *s)
{
	glob_t g;
	size_t i, k;
	char *pat;
	int rc;

	c->line = s->line;
	for (i = 0; i < s->npatterns; i++) {
		if (brace_count(s->patterns[i]) > BRACE_MAX)
			return ovl_plan__perr(c, "source '%s': '%s' has more than %d "
			    "brace alternatives", s->name, s->patterns[i],
			    BRACE_MAX);
		if (ovl_remote_is(s->patterns[i])) {
			if (remote_paths(c, s, s->patterns[i]) != 0)
				return -1;
			continue;
		}
		pat = ovl_plan__join_dir(c->p->dir, s->patterns[i]);
		memset(&g, 0, sizeof(g));
		rc = glob(pat, GLOB_NOSORT | GLOB_BRACE | GLOB_TILDE_CHECK,
		    NULL, &g);
		if (rc == GLOB_NOMATCH) {
			ovl_plan__perr(c, "source '%s': no file matches '%s'", s->name,
			    pat);
			free(pat);
			globfree(&g);
			return -1;
		}
		if (rc != 0) {
			ovl_plan__perr(c, "source '%s': cannot expand '%s'%s", s->name,
			    pat, rc == GLOB_ABORTED ? ": read error" : "");
			free(pat);
			globfree(&g);
			return -1;
		}
		free(pat);
		qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_str);
		s->paths = ovl_xrealloc(s->paths,
		    (s->npaths + g.gl_pathc) * sizeof(char *));
		for (k = 0; k < g.gl_pathc; k++) {
			const char *m = g.gl_pathv[k];

			if (m[0] == '-') {
				char *r = ovl_xmalloc(strlen(m) + 3);
				strcpy(r, "./");
				strcat(r, m);
				s->paths[s->npaths++] = r;
			} else
				s->paths[s->npaths++] = ovl_xstrdup(m);
		}
		globfree(&g);
	}
	return 0;
}
