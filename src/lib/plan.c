#include "plan.h"
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "balance.h"
#include "cli.h"
#include "buf.h"
#include "crc32c.h"
#include "err.h"
#include "num.h"
#include "rng.h"
#include "plan-int.h"

#define PLAN_MAX_FILE	(16u << 20)

int
ovl_plan__perr(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	size_t at = 0;
	int n;

	if (c->errlen == 0)
		return -1;
	/* a later error goes on a line of its own, as the tool prints one */
	if (c->nerr++ > 0) {
		at = strlen(c->err);
		n = snprintf(c->err + at, c->errlen - at, "\n%s: ",
		    ovl_err_prog());
		if (n < 0 || (size_t)n >= c->errlen - at)
			return -1;
		at += (size_t)n;
	}
	if (c->line > 0)
		n = snprintf(c->err + at, c->errlen - at, "%s:%u: ", c->name,
		    c->line);
	else
		n = snprintf(c->err + at, c->errlen - at, "%s: ", c->name);
	if (n < 0 || (size_t)n >= c->errlen - at)
		return -1;
	va_start(ap, fmt);
	vsnprintf(c->err + at + n, c->errlen - at - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- lexing ---------------------------------------------------------- */

static int
is_space(int ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' ||
	    ch == '\v';
}

/*
 * Split the logical line at *pp into words. Returns 1 with words in c->w,
 * 0 at end of text, -1 on error. c->line is the line of the first word.
 */
static int
lex_line(struct ctx *c, const char **pp, const char *end, unsigned *phys)
{
	const char *p = *pp;
	size_t *offs = NULL;
	size_t i, capo = 0;
	int inword = 0, eq = -1, rc;

	c->nw = 0;
	c->text.len = 0;
	c->line = *phys;
	for (;;) {
		if (p >= end || *p == '\n') {
			if (inword) {
				ovl_buf_append(&c->text, "", 1);
				inword = 0;
			}
			if (p < end)
				p++;
			(*phys)++;
			if (c->nw > 0 || p >= end)
				break;
			c->line = *phys;
			continue;
		}
		if (*p == '\0') {
			c->line = *phys;
			free(offs);
			return ovl_plan__perr(c, "NUL byte in the plan");
		}
		if (*p == '\\' && (p + 1 < end && (p[1] == '\n' ||
		    (p[1] == '\r' && p + 2 < end && p[2] == '\n')))) {
			/* continuation: the line goes on */
			p += p[1] == '\n' ? 2 : 3;
			(*phys)++;
			if (inword) {
				ovl_buf_append(&c->text, "", 1);
				inword = 0;
			}
			continue;
		}
		if (is_space((unsigned char)*p)) {
			if (inword) {
				ovl_buf_append(&c->text, "", 1);
				inword = 0;
			}
			p++;
			continue;
		}
		if (!inword && *p == '#') {
			while (p < end && *p != '\n')
				p++;
			continue;
		}
		if (!inword) {
			if (c->nw == capo) {
				capo = capo ? capo * 2 : 16;
				offs = ovl_xrealloc(offs, capo * sizeof(*offs));
			}
			if (c->nw == c->capw) {
				c->capw = c->capw ? c->capw * 2 : 16;
				c->w = ovl_xrealloc(c->w, c->capw * sizeof(*c->w));
			}
			offs[c->nw] = c->text.len;
			c->w[c->nw].eq = -1;
			c->nw++;
			inword = 1;
			eq = -1;
		}
		if (c->text.len > OVL_PLAN_MAX_LINE) {
			free(offs);
			return ovl_plan__perr(c, "line longer than %u bytes",
			    OVL_PLAN_MAX_LINE);
		}
		if (*p == '"') {
			unsigned qline = *phys;

			p++;
			for (;;) {
				if (p >= end || *p == '\n') {
					c->line = qline;
					free(offs);
					return ovl_plan__perr(c, "unterminated quote");
				}
				if (*p == '"')
					break;
				if (*p == '\0') {
					free(offs);
					return ovl_plan__perr(c, "NUL byte in the plan");
				}
				if (*p == '\\') {
					p++;
					if (p >= end || *p == '\n') {
						c->line = qline;
						free(offs);
						return ovl_plan__perr(c,
						    "unterminated quote");
					}
				}
				ovl_buf_append(&c->text, p, 1);
				p++;
			}
			p++;
			continue;
		}
		if (*p == '\\') {
			p++;
			if (p >= end) {
				free(offs);
				return ovl_plan__perr(c, "backslash at end of file");
			}
			if (*p == '\0') {
				free(offs);
				return ovl_plan__perr(c, "NUL byte in the plan");
			}
			ovl_buf_append(&c->text, p, 1);
			p++;
			continue;
		}
		if (*p == '=' && eq < 0) {
			eq = (int)(c->text.len - offs[c->nw - 1]);
			c->w[c->nw - 1].eq = eq;
		}
		ovl_buf_append(&c->text, p, 1);
		p++;
	}
	*pp = p;
	for (i = 0; i < c->nw; i++)
		c->w[i].s = (char *)c->text.p + offs[i];
	rc = c->nw > 0 ? 1 : 0;
	free(offs);
	return rc;
}

/* ---- values ------------------------------------------------------------ */

int
ovl_plan__get_size(struct ctx *c, const char *key, const char *v, uint64_t *out)
{
	if (ovl_num_size(v, out) != 0)
		return ovl_plan__perr(c, "bad %s '%s': expected a count such as 4096 or 2M",
		    key, v);
	return 0;
}

int
ovl_plan__get_u32(struct ctx *c, const char *key, const char *v, uint32_t min,
    uint32_t *out)
{
	uint64_t x;

	if (ovl_num_size(v, &x) != 0 || x > UINT32_MAX)
		return ovl_plan__perr(c, "bad %s '%s': expected a whole number", key, v);
	if (x < min)
		return ovl_plan__perr(c, "bad %s '%s': must be at least %u", key, v, min);
	*out = (uint32_t)x;
	return 0;
}

int
ovl_plan__get_choice(struct ctx *c, const char *key, const char *v,
    const char *const *list, char **out)
{
	char *msg;
	int rc;

	if (ovl_cli_choice(list, v) < 0) {
		msg = ovl_cli_choices(list, ", ", ", ");
		rc = ovl_plan__perr(c, "bad %s '%s': expected one of %s", key, v,
		    msg);
		free(msg);
		return rc;
	}
	if (out != NULL) {
		free(*out);
		*out = ovl_xstrdup(v);
	}
	return 0;
}

/* Duplicate-directive check for directives that may appear once. */
int
ovl_plan__once(struct ctx *c, int slot, const char *what)
{
	if (c->seen[slot] != 0)
		return ovl_plan__perr(c, "duplicate '%s' (first at line %u)", what,
		    c->seen[slot]);
	c->seen[slot] = c->line;
	return 0;
}

/*
 * Tidy a joined path for people: drop "." components and fold "D/.."
 * where D is a real directory (not a symbolic link, so the meaning stays).
 */
static char *
tidy_path(char *path)
{
	char *out = ovl_xmalloc(strlen(path) + 3), *seg, *save = NULL;
	size_t *starts = NULL, nst = 0, len = 0;
	int abs = path[0] == '/';
	struct stat st;

	starts = ovl_xmalloc((strlen(path) / 2 + 2) * sizeof(size_t));
	if (abs)
		out[len++] = '/';
	out[len] = '\0';
	for (seg = strtok_r(path, "/", &save); seg != NULL;
	    seg = strtok_r(NULL, "/", &save)) {
		if (strcmp(seg, ".") == 0)
			continue;
		if (strcmp(seg, "..") == 0 && nst > 0 &&
		    strcmp(out + starts[nst - 1], "..") != 0 &&
		    lstat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
			len = starts[--nst];
			if (len > (size_t)abs)
				len--;	/* the '/' before it */
			out[len] = '\0';
			continue;
		}
		if (len > (size_t)abs)
			out[len++] = '/';
		starts[nst++] = len;
		strcpy(out + len, seg);
		len += strlen(seg);
	}
	if (len == 0)
		strcpy(out, ".");
	free(starts);
	free(path);
	return out;
}

char *
ovl_plan__join_dir(const char *dir, const char *path)
{
	size_t n;
	char *r;

	if (path[0] != '/' && path[0] != '~' && dir != NULL &&
	    strcmp(dir, ".") != 0) {
		n = strlen(dir);
		r = ovl_xmalloc(n + strlen(path) + 2);
		memcpy(r, dir, n);
		r[n] = '/';
		strcpy(r + n + 1, path);
		r = tidy_path(r);
		if (r[0] == '-') {
			char *q = ovl_xmalloc(strlen(r) + 3);
			strcpy(q, "./");
			strcat(q, r);
			free(r);
			r = q;
		}
		return r;
	}
	if (path[0] == '-') {
		r = ovl_xmalloc(strlen(path) + 3);
		strcpy(r, "./");
		strcat(r, path);
		return r;
	}
	return ovl_xstrdup(path);
}

static int
valid_name(const char *s)
{
	size_t i;

	if (s[0] == '\0' || s[0] == '-')
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return i <= OVL_PLAN_MAX_NAME;
}

int
ovl_plan__is_kv(const struct word *w)
{
	return w->eq >= 0;
}

/* Split a key=value word in place: returns the value. */
char *
ovl_plan__kv(struct word *w)
{
	w->s[w->eq] = '\0';
	return w->s + w->eq + 1;
}

/* ---- directives -------------------------------------------------------- */


static int
do_source(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	struct ovl_plan_source *s;
	size_t i;

	if (c->nw < 2 || ovl_plan__is_kv(&c->w[1]))
		return ovl_plan__perr(c, "source: expected a name: source NAME path=...");
	if (!valid_name(c->w[1].s))
		return ovl_plan__perr(c, "bad source name '%s': letters, digits, _ and - "
		    "(not first), at most %d bytes", c->w[1].s,
		    OVL_PLAN_MAX_NAME);
	for (i = 0; i < p->nsources; i++)
		if (strcmp(p->sources[i].name, c->w[1].s) == 0)
			return ovl_plan__perr(c, "duplicate source '%s' (first at line %u)",
			    c->w[1].s, p->sources[i].line);
	if (p->nsources == OVL_PLAN_MAX_SOURCES)
		return ovl_plan__perr(c, "more than %d sources", OVL_PLAN_MAX_SOURCES);
	p->sources = ovl_xrealloc(p->sources,
	    (p->nsources + 1) * sizeof(*p->sources));
	s = &p->sources[p->nsources];
	memset(s, 0, sizeof(*s));
	s->name = ovl_xstrdup(c->w[1].s);
	s->index = (uint32_t)p->nsources;
	s->line = c->line;
	s->partitions = 1;
	s->on_exhaust = OVL_EXHAUST_STOP;
	s->shuffle = -1;	/* not yet decided */
	p->nsources++;
	if (ovl_plan__source_keys(c, s) != 0)
		return -1;
	if (s->npatterns == 0)
		return ovl_plan__perr(c, "source '%s' has no path=", s->name);
	if (s->on_exhaust == OVL_EXHAUST_REPEAT && s->epochs != 0)
		return ovl_plan__perr(c, "source '%s': epochs= and on-exhaust=repeat "
		    "contradict each other", s->name);
	if (s->min_tokens != 0 && s->max_tokens != 0 &&
	    s->min_tokens > s->max_tokens)
		return ovl_plan__perr(c, "source '%s': min-tokens= is above max-tokens=",
		    s->name);
	return 0;
}

static int
do_weights(struct ctx *c)
{
	struct wline *l;
	size_t i, j;
	double d;
	char *k, *v;
	int ramp_seen = 0;

	c->wl = ovl_xrealloc(c->wl, (c->nwl + 1) * sizeof(*c->wl));
	l = &c->wl[c->nwl++];
	memset(l, 0, sizeof(*l));
	l->line = c->line;
	for (i = 1; i < c->nw; i++) {
		if (!ovl_plan__is_kv(&c->w[i]))
			return ovl_plan__perr(c, "weights: expected NAME=WEIGHT, got '%s'",
			    c->w[i].s);
		v = ovl_plan__kv(&c->w[i]);
		k = c->w[i].s;
		if (strcmp(k, "at") == 0) {
			if (l->has_at)
				return ovl_plan__perr(c, "duplicate at=");
			l->has_at = 1;
			if (ovl_plan__get_size(c, "at", v, &l->at) != 0)
				return -1;
			continue;
		}
		if (strcmp(k, "ramp") == 0) {
			if (ramp_seen++)
				return ovl_plan__perr(c, "duplicate ramp=");
			if (strcmp(v, "linear") == 0)
				l->ramp = 1;
			else if (strcmp(v, "step") == 0)
				l->ramp = 0;
			else
				return ovl_plan__perr(c, "bad ramp '%s': expected linear "
				    "or step", v);
			continue;
		}
		for (j = 0; j < l->n; j++)
			if (strcmp(l->names[j], k) == 0)
				return ovl_plan__perr(c, "weights: '%s' named twice", k);
		if (ovl_num_double(v, &d) != 0)
			return ovl_plan__perr(c, "bad weight '%s' for '%s': expected a "
			    "number", v, k);
		if (d < 0 || signbit(d))
			return ovl_plan__perr(c, "negative weight %s for '%s'", v, k);
		l->names = ovl_xrealloc(l->names, (l->n + 1) * sizeof(char *));
		l->vals = ovl_xrealloc(l->vals, (l->n + 1) * sizeof(double));
		l->names[l->n] = ovl_xstrdup(k);
		l->vals[l->n] = d;
		l->n++;
	}
	if (l->n == 0)
		return ovl_plan__perr(c, "weights: no NAME=WEIGHT given");
	return 0;
}

static int
do_seq_len(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	uint64_t at = 0;
	uint32_t len = 0;
	int has_at = 0, has_len = 0;
	size_t i;
	char *v;

	for (i = 1; i < c->nw; i++) {
		if (ovl_plan__is_kv(&c->w[i])) {
			v = ovl_plan__kv(&c->w[i]);
			if (strcmp(c->w[i].s, "at") != 0)
				return ovl_plan__perr(c, "seq-len: unknown option '%s='",
				    c->w[i].s);
			if (has_at++)
				return ovl_plan__perr(c, "duplicate at=");
			if (ovl_plan__get_size(c, "at", v, &at) != 0)
				return -1;
		} else {
			if (has_len++)
				return ovl_plan__perr(c, "seq-len: more than one length");
			if (ovl_plan__get_u32(c, "seq-len", c->w[i].s, 1, &len) != 0)
				return -1;
			if (len > OVL_PLAN_MAX_SEQ_LEN)
				return ovl_plan__perr(c, "bad seq-len '%s': at most "
				    "%u", c->w[i].s, OVL_PLAN_MAX_SEQ_LEN);
		}
	}
	if (!has_len)
		return ovl_plan__perr(c, "seq-len: expected a length: seq-len [at=T] N");
	if (p->nseq == 0 && at != 0)
		return ovl_plan__perr(c, "the first seq-len must start at 0, not at=%llu",
		    (unsigned long long)at);
	if (p->nseq > 0 && at <= p->seq_at[p->nseq - 1])
		return ovl_plan__perr(c, "seq-len at=%llu is not after the previous "
		    "point (at=%llu)", (unsigned long long)at,
		    (unsigned long long)p->seq_at[p->nseq - 1]);
	if (p->nseq == OVL_PLAN_MAX_POINTS)
		return ovl_plan__perr(c, "more than %d seq-len points",
		    OVL_PLAN_MAX_POINTS);
	p->seq_at = ovl_xrealloc(p->seq_at, (p->nseq + 1) * sizeof(uint64_t));
	p->seq_len = ovl_xrealloc(p->seq_len, (p->nseq + 1) * sizeof(uint32_t));
	p->seq_at[p->nseq] = at;
	p->seq_len[p->nseq] = len;
	p->nseq++;
	return 0;
}

/* cost=A,B or cost=model plus layers= hidden= heads= ffn= vocab=. */
static int
cost_value(struct ctx *c, const char *v)
{
	struct ovl_plan *p = c->p;
	char buf[128], *comma;

	if (p->cost_set != 0)
		return ovl_plan__perr(c, "duplicate cost");
	if (strcmp(v, "model") == 0) {
		p->cost_set = 2;
		return 0;
	}
	if (strlen(v) >= sizeof(buf) || (comma = strchr(strcpy(buf, v), ','))
	    == NULL)
		return ovl_plan__perr(c, "bad cost '%s': expected A,B or model", v);
	*comma = '\0';
	if (ovl_num_double(buf, &p->cost_a) != 0 ||
	    ovl_num_double(comma + 1, &p->cost_b) != 0)
		return ovl_plan__perr(c, "bad cost '%s': expected A,B or model", v);
	if (p->cost_a < 0 || p->cost_b < 0 || (p->cost_a == 0 &&
	    p->cost_b == 0))
		return ovl_plan__perr(c, "bad cost '%s': coefficients must be >= 0, "
		    "not both 0", v);
	p->cost_set = 1;
	return 0;
}

static int
model_key(struct ctx *c, const char *k, const char *v, int *handled)
{
	struct ovl_plan *p = c->p;
	uint64_t *slot = NULL;

	*handled = 1;
	if (strcmp(k, "layers") == 0)
		slot = &p->model_layers;
	else if (strcmp(k, "hidden") == 0)
		slot = &p->model_hidden;
	else if (strcmp(k, "heads") == 0)
		slot = &p->model_heads;
	else if (strcmp(k, "ffn") == 0)
		slot = &p->model_ffn;
	else if (strcmp(k, "vocab") == 0)
		slot = &p->model_vocab;
	if (slot == NULL) {
		*handled = 0;
		return 0;
	}
	if (*slot != 0)
		return ovl_plan__perr(c, "duplicate %s=", k);
	if (ovl_plan__get_size(c, k, v, slot) != 0)
		return -1;
	if (*slot == 0)
		return ovl_plan__perr(c, "bad %s '%s': must be at least 1", k, v);
	return 0;
}

/* balance METHOD [cost=...] [model keys]; cost A,B | cost model [keys]. */
static int
do_balance_cost(struct ctx *c, int is_cost)
{
	struct ovl_plan *p = c->p;
	size_t i;
	int handled, have_method = 0;
	char *k, *v;

	for (i = 1; i < c->nw; i++) {
		if (!ovl_plan__is_kv(&c->w[i])) {
			if (have_method++)
				return ovl_plan__perr(c, "%s: unexpected '%s'",
				    is_cost ? "cost" : "balance", c->w[i].s);
			if (is_cost) {
				if (cost_value(c, c->w[i].s) != 0)
					return -1;
			} else if (ovl_plan__get_choice(c, "balance", c->w[i].s,
			    ovl_balance_names, &p->balance) != 0)
				return -1;
			continue;
		}
		v = ovl_plan__kv(&c->w[i]);
		k = c->w[i].s;
		if (!is_cost && strcmp(k, "cost") == 0) {
			if (cost_value(c, v) != 0)
				return -1;
			continue;
		}
		if (model_key(c, k, v, &handled) != 0)
			return -1;
		if (!handled)
			return ovl_plan__perr(c, "%s: unknown option '%s='",
			    is_cost ? "cost" : "balance", k);
	}
	if (!have_method && is_cost)
		return ovl_plan__perr(c, "cost: expected A,B or model");
	if (!have_method) {
		char *names = ovl_cli_choices(ovl_balance_names, ", ", " or ");
		int rc = ovl_plan__perr(c, "balance: expected a method (%s)",
		    names);

		free(names);
		return rc;
	}
	return 0;
}

/* A directive with exactly one plain argument. */
const char *
ovl_plan__single_arg(struct ctx *c, const char *what)
{
	if (c->nw != 2 || ovl_plan__is_kv(&c->w[1])) {
		ovl_plan__perr(c, "%s: expected one value: %s VALUE", what, what);
		return NULL;
	}
	return c->w[1].s;
}

enum {
	/* once() slots; plan-keys.c's single-value directives use 16 on */
	S_BALANCE, S_COST, S_CKPT, S_STOP, S_OUTPUT, S_HOSTS
};

static int
directive(struct ctx *c)
{
	const char *d = c->w[0].s;
	int rc;

	if (ovl_plan__is_kv(&c->w[0]))
		return ovl_plan__perr(c, "expected a directive, got '%s'", d);
	if (strcmp(d, "source") == 0)
		return do_source(c);
	if (strcmp(d, "weights") == 0)
		return do_weights(c);
	if (strcmp(d, "seq-len") == 0)
		return do_seq_len(c);
	if (ovl_plan__simple(c, d, &rc))
		return rc;
	if (strcmp(d, "balance") == 0) {
		if (ovl_plan__once(c, S_BALANCE, d) != 0)
			return -1;
		return do_balance_cost(c, 0);
	}
	if (strcmp(d, "cost") == 0) {
		if (ovl_plan__once(c, S_COST, d) != 0)
			return -1;
		return do_balance_cost(c, 1);
	}
	if (strcmp(d, "checkpoint") == 0) {
		if (ovl_plan__once(c, S_CKPT, d) != 0)
			return -1;
		return ovl_plan__checkpoint(c);
	}
	if (strcmp(d, "stop") == 0) {
		if (ovl_plan__once(c, S_STOP, d) != 0)
			return -1;
		return ovl_plan__stop(c);
	}
	if (strcmp(d, "output") == 0) {
		if (ovl_plan__once(c, S_OUTPUT, d) != 0)
			return -1;
		return ovl_plan__output(c);
	}
	if (strcmp(d, "hosts") == 0) {
		if (ovl_plan__once(c, S_HOSTS, d) != 0)
			return -1;
		return ovl_plan__hosts(c);
	}
	return ovl_plan__perr(c, "unknown directive '%s'", d);
}

/* ---- the whole plan ------------------------------------------------------ */

static void
free_wlines(struct ctx *c)
{
	size_t i, j;

	for (i = 0; i < c->nwl; i++) {
		for (j = 0; j < c->wl[i].n; j++)
			free(c->wl[i].names[j]);
		free(c->wl[i].names);
		free(c->wl[i].vals);
	}
	free(c->wl);
	c->wl = NULL;
	c->nwl = 0;
}

static int
build_weights(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	struct ovl_plan_point *pt;
	size_t i, j, n = p->nsources;
	double sum, big;
	int idx;

	if (c->nwl == 0) {
		p->points = ovl_xcalloc(1, sizeof(*p->points));
		p->npoints = 1;
		pt = &p->points[0];
		pt->raw = ovl_xcalloc(n, sizeof(double));
		pt->w = ovl_xcalloc(n, sizeof(double));
		for (j = 0; j < n; j++) {
			pt->raw[j] = 1;
			pt->w[j] = 1.0 / (double)n;
		}
		return 0;
	}
	if (c->nwl > OVL_PLAN_MAX_POINTS) {
		c->line = c->wl[OVL_PLAN_MAX_POINTS].line;
		return ovl_plan__perr(c, "more than %d weights points",
		    OVL_PLAN_MAX_POINTS);
	}
	p->points = ovl_xcalloc(c->nwl, sizeof(*p->points));
	for (i = 0; i < c->nwl; i++) {
		struct wline *l = &c->wl[i];

		c->line = l->line;
		pt = &p->points[p->npoints++];
		pt->raw = ovl_xcalloc(n, sizeof(double));
		pt->w = ovl_xcalloc(n, sizeof(double));
		pt->at = l->at;
		pt->ramp = l->ramp;
		pt->line = l->line;
		if (i == 0 && l->at != 0)
			return ovl_plan__perr(c, "the first weights must start at 0, "
			    "not at=%llu", (unsigned long long)l->at);
		if (i == 0 && l->ramp)
			return ovl_plan__perr(c, "ramp=linear needs a previous weights "
			    "point");
		if (i > 0 && !l->has_at)
			return ovl_plan__perr(c, "weights after the first need at=");
		if (i > 0 && l->at <= p->points[i - 1].at)
			return ovl_plan__perr(c, "weights at=%llu is not after the "
			    "previous point (at=%llu)",
			    (unsigned long long)l->at,
			    (unsigned long long)p->points[i - 1].at);
		sum = 0;
		big = 0;
		for (j = 0; j < l->n; j++) {
			idx = ovl_plan_find(p, l->names[j],
			    strlen(l->names[j]));
			if (idx < 0)
				return ovl_plan__perr(c, "weights: no source named '%s'",
				    l->names[j]);
			pt->raw[idx] = l->vals[j];
			if (l->vals[j] > big)
				big = l->vals[j];
		}
		if (!(big > 0))
			return ovl_plan__perr(c, "weights: all weights are zero");
		if (!isfinite(big))
			return ovl_plan__perr(c, "weights: a weight is not a finite number");
		for (j = 0; j < n; j++)
			sum += pt->raw[j];
		if (isfinite(sum)) {
			for (j = 0; j < n; j++)
				pt->w[j] = pt->raw[j] / sum;
		} else {
			/* Weights near DBL_MAX: shares relative to the largest. */
			sum = 0;
			for (j = 0; j < n; j++)
				sum += pt->raw[j] / big;
			for (j = 0; j < n; j++)
				pt->w[j] = pt->raw[j] / big / sum;
		}
	}
	return 0;
}

static uint64_t
derive_seed(uint64_t seed, const char *name)
{
	struct ovl_rng r;

	ovl_rng_seed2(&r, seed, ovl_crc32c(0, name, strlen(name)));
	return ovl_rng_next(&r);
}

static int
finish(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	struct ovl_plan_source *s;
	char *t;
	size_t i;

	c->line = 0;
	if (p->nsources == 0)
		return ovl_plan__perr(c, "no source declared");
	if (build_weights(c) != 0)
		return -1;
	c->line = 0;
	if (p->nseq == 0) {
		p->seq_at = ovl_xcalloc(1, sizeof(uint64_t));
		p->seq_len = ovl_xcalloc(1, sizeof(uint32_t));
		p->seq_len[0] = OVL_PLAN_SEQ_LEN_DEFAULT;
		p->nseq = 1;
	}
	if (p->ranks == 0)
		p->ranks = 1;
	if (p->micro_batches == 0)
		p->micro_batches = 1;
	if (p->cost_set == 2 && (p->model_layers == 0 || p->model_hidden == 0)) {
		c->line = c->seen[S_COST] ? c->seen[S_COST] : c->seen[S_BALANCE];
		return ovl_plan__perr(c, "cost=model needs layers= and hidden=");
	}
	if (p->cost_set != 2 && (p->model_layers | p->model_hidden |
	    p->model_heads | p->model_ffn | p->model_vocab) != 0) {
		c->line = c->seen[S_COST] ? c->seen[S_COST] : c->seen[S_BALANCE];
		return ovl_plan__perr(c, "layers=, hidden=, heads=, ffn= and vocab= "
		    "need cost=model");
	}
	if (ovl_plan__check_cp(c) != 0)
		return -1;
	if (p->image_encoder_cost != NULL) {
		double ea, eb;
		char eerr[128];

		if (ovl_image_enc_parse(p->image_encoder_cost, &ea, &eb, eerr,
		    sizeof(eerr)) != 0)
			return ovl_plan__perr(c, "image-encoder-cost: %s", eerr);
	}
	if (p->tokenizer != NULL) {
		t = ovl_plan__resolve_tokenizer(p->dir, p->tokenizer);
		free(p->tokenizer);
		p->tokenizer = t;
	}
	for (i = 0; i < p->nsources; i++) {
		s = &p->sources[i];
		if (s->tokenizer != NULL) {
			t = ovl_plan__resolve_tokenizer(p->dir, s->tokenizer);
			free(s->tokenizer);
			s->tokenizer = t;
		}
		if (s->shuffle < 0) {
			s->shuffle = p->has_seed;
			if (p->has_seed)
				s->shuffle_seed = derive_seed(p->seed, s->name);
		}
		/* each source's files and tokenizer: every error said */
		if (!(c->flags & OVL_PLAN_NOGLOB))
			(void)ovl_plan__resolve_paths(c, s);
	}
	(void)ovl_plan__check_per_rank(c, c->seen[S_OUTPUT]);
	if (ovl_plan__split(c) != 0)
		return -1;
	if (c->flags & OVL_PLAN_TOKENIZERS) {
		struct ovl_plan__tokref ref = { 0 };

		for (i = 0; i < p->nsources; i++)
			(void)ovl_plan__check_tokenizer(c, &p->sources[i], &ref);
	}
	return c->nerr > 0 ? -1 : 0;
}

struct ovl_plan *
ovl_plan_parse(const char *text, size_t len, const char *name, const char *dir,
    int flags, char *err, size_t errlen)
{
	struct ctx c;
	struct ovl_plan *p;
	const char *q = text, *end = text + len;
	unsigned phys = 1;
	int rc;

	memset(&c, 0, sizeof(c));
	p = ovl_xcalloc(1, sizeof(*p));
	p->path = ovl_xstrdup(name);
	p->dir = ovl_xstrdup(dir != NULL ? dir : ".");
	p->uniform = -1;
	p->cp_pad = -1;
	p->cp_balance = -1;
	p->ckpt_verify_all = -1;
	p->out_overwrite = -1;
	c.p = p;
	c.name = name;
	c.err = err;
	c.errlen = errlen;
	c.flags = flags;
	if (errlen > 0)
		err[0] = '\0';
	/* every line's error is reported; a lexing error ends the reading */
	while (q < end) {
		rc = lex_line(&c, &q, end, &phys);
		if (rc <= 0)
			break;
		(void)directive(&c);
	}
	if (c.nerr == 0)
		(void)finish(&c);
	rc = c.nerr > 0 ? -1 : 0;
	free_wlines(&c);
	free(c.w);
	ovl_buf_free(&c.text);
	if (rc < 0) {
		ovl_plan_free(p);
		return NULL;
	}
	return p;
}

struct ovl_plan *
ovl_plan_loadf(const char *path, int flags, char *err, size_t errlen)
{
	struct ovl_buf b = { NULL, 0, 0 };
	struct ovl_plan *p;
	struct stat st;
	char *dir;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open '%s': %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "'%s' is a directory", path);
		close(fd);
		return NULL;
	}
	for (;;) {
		ovl_buf_reserve(&b, 65536);
		n = read(fd, b.p + b.len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "cannot read '%s': %s", path,
			    strerror(errno));
			close(fd);
			ovl_buf_free(&b);
			return NULL;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		if (b.len > PLAN_MAX_FILE) {
			snprintf(err, errlen, "%s: plan larger than %u bytes",
			    path, PLAN_MAX_FILE);
			close(fd);
			ovl_buf_free(&b);
			return NULL;
		}
	}
	close(fd);
	dir = ovl_path_dir(path);
	p = ovl_plan_parse(b.p != NULL ? (const char *)b.p : "", b.len, path,
	    dir, flags, err, errlen);
	free(dir);
	ovl_buf_free(&b);
	return p;
}

struct ovl_plan *
ovl_plan_load(const char *path, char *err, size_t errlen)
{
	return ovl_plan_loadf(path, 0, err, errlen);
}

static void
free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
ovl_plan_free(struct ovl_plan *p)
{
	struct ovl_plan_source *s;
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nsources; i++) {
		s = &p->sources[i];
		free(s->name);
		free_strv(s->patterns, s->npatterns);
		free_strv(s->paths, s->npaths);
		free(s->format);
		free(s->field);
		free(s->doc_per);
		free(s->member_ext);
		free(s->tokenizer);
		free(s->eod_token);
		free(s->bos_token);
		free(s->add_special);
		free(s->long_docs);
		free(s->shuffle_window);
		free(s->image_cost);
		free(s->image_token);
		free(s->images);
		free(s->field_type);
		free(s->special);
		free(s->match);
		free(s->drop);
		free(s->throttle);
		free(s->on_error);
		free(s->hosts);
	}
	free(p->sources);
	for (i = 0; i < p->npoints; i++) {
		free(p->points[i].raw);
		free(p->points[i].w);
	}
	free(p->points);
	free(p->seq_at);
	free(p->seq_len);
	free(p->path);
	free(p->dir);
	free(p->tokenizer);
	free(p->eod_token);
	free(p->bos_token);
	free(p->add_special);
	free(p->image_encoder_cost);
	free(p->long_docs);
	free(p->shuffle_window);
	free(p->split);
	free(p->balance);
	free(p->pack);
	free(p->ckpt_dir);
	free(p->out_format);
	free(p->out_path);
	free(p->out_manifest);
	free(p->out_per_rank);
	free(p->hosts_loaders);
	free(p->hosts_mixer);
	free(p->hosts_trainers);
	free(p->transport);
	free(p);
}

int
ovl_plan_find(const struct ovl_plan *p, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < p->nsources; i++)
		if (strlen(p->sources[i].name) == len &&
		    memcmp(p->sources[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

const char *
ovl_plan_exhaust_name(enum ovl_exhaust e)
{
	switch (e) {
	case OVL_EXHAUST_DROP:
		return "drop";
	case OVL_EXHAUST_REPEAT:
		return "repeat";
	default:
		return "stop";
	}
}

