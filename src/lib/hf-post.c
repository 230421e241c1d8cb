/*
 * hf-post: a tokenizer.json's post_processor, as the special tokens HF's
 * encode(add_special_tokens=True) puts around a single sequence (hf.h).
 */
#include "hf-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Append id to side (h->pre or h->suf) of *n ids: 0, or -1 with msg. */
static int
put(const struct ovl_hf *h, uint32_t *side, size_t *n, json_int_t id,
    const char *what, char *msg, size_t msglen)
{
	if (id < 0 || (uint64_t)id >= h->nids) {
		snprintf(msg, msglen, "post_processor: %s id %" JSON_INTEGER_FORMAT
		    " is not below the vocabulary size %" PRIu32, what, id,
		    h->nids);
		return -1;
	}
	if (*n == HF_TMPL_MAX) {
		snprintf(msg, msglen, "post_processor: more than %d special "
		    "tokens on one side of a sequence", HF_TMPL_MAX);
		return -1;
	}
	side[(*n)++] = (uint32_t)id;
	return 0;
}

/* BertProcessing and RobertaProcessing: "cls": [TEXT, ID], "sep" alike. */
static int
pair_token(json_t *pp, const char *key, json_int_t *id, char *msg,
    size_t msglen)
{
	json_t *v = json_object_get(pp, key);

	if (!json_is_array(v) || json_array_size(v) != 2 ||
	    !json_is_integer(json_array_get(v, 1))) {
		snprintf(msg, msglen, "post_processor: \"%s\" is not a [token, "
		    "id] pair", key);
		return -1;
	}
	*id = json_integer_value(json_array_get(v, 1));
	return 0;
}

/*
 * TemplateProcessing's "single": SpecialToken items before the sequence
 * "A" go to pre, after it to suf, each as the ids special_tokens gives.
 */
static int
template_load(struct ovl_hf *h, json_t *pp, uint32_t *pre, size_t *npre,
    uint32_t *suf, size_t *nsuf, char *msg, size_t msglen)
{
	json_t *single = json_object_get(pp, "single");
	json_t *specials = json_object_get(pp, "special_tokens");
	json_t *item, *st, *ids, *id;
	size_t i, k;
	int seen = 0;

	if (!json_is_array(single)) {
		snprintf(msg, msglen, "post_processor: TemplateProcessing "
		    "without a \"single\" template");
		return -1;
	}
	json_array_foreach(single, i, item) {
		if (json_object_get(item, "Sequence") != NULL) {
			if (seen++) {
				snprintf(msg, msglen, "post_processor: a "
				    "single template with two sequences");
				return -1;
			}
			continue;
		}
		st = json_object_get(json_object_get(item, "SpecialToken"),
		    "id");
		ids = json_object_get(json_object_get(specials,
		    json_string_value(st) ? json_string_value(st) : ""), "ids");
		if (!json_is_string(st) || !json_is_array(ids)) {
			snprintf(msg, msglen, "post_processor: template item "
			    "%zu is neither a sequence nor a special token of "
			    "special_tokens", i);
			return -1;
		}
		json_array_foreach(ids, k, id)
			if (!json_is_integer(id) || (seen ?
			    put(h, suf, nsuf, json_integer_value(id),
			    json_string_value(st), msg, msglen) :
			    put(h, pre, npre, json_integer_value(id),
			    json_string_value(st), msg, msglen)) != 0) {
				if (!json_is_integer(id))
					snprintf(msg, msglen, "post_processor: "
					    "an id of '%s' is not an integer",
					    json_string_value(st));
				return -1;
			}
	}
	if (!seen) {
		snprintf(msg, msglen, "post_processor: a single template "
		    "without the sequence");
		return -1;
	}
	return 0;
}

/* One processor, its tokens outside those of the processors before it. */
static int
post_one(struct ovl_hf *h, json_t *pp, int depth, char *msg, size_t msglen)
{
	const char *ty = json_string_value(json_object_get(pp, "type"));
	uint32_t pre[HF_TMPL_MAX], suf[HF_TMPL_MAX];
	size_t npre = 0, nsuf = 0, i;
	json_int_t cls, sep;
	json_t *v;

	if (ty == NULL) {
		snprintf(msg, msglen, "post_processor: no \"type\"");
		return -1;
	}
	if (strcmp(ty, "ByteLevel") == 0)
		return 0;
	if (strcmp(ty, "Sequence") == 0) {
		if (depth > 4 || !json_is_array(json_object_get(pp,
		    "processors"))) {
			snprintf(msg, msglen, "post_processor: a Sequence "
			    "without processors, or nested too deep");
			return -1;
		}
		json_array_foreach(json_object_get(pp, "processors"), i, v)
			if (post_one(h, v, depth + 1, msg, msglen) != 0)
				return -1;
		return 0;
	}
	if (strcmp(ty, "TemplateProcessing") == 0) {
		if (template_load(h, pp, pre, &npre, suf, &nsuf, msg,
		    msglen) != 0)
			return -1;
	} else if (strcmp(ty, "BertProcessing") == 0 ||
	    strcmp(ty, "RobertaProcessing") == 0) {
		if (pair_token(pp, "cls", &cls, msg, msglen) != 0 ||
		    pair_token(pp, "sep", &sep, msg, msglen) != 0 ||
		    put(h, pre, &npre, cls, "cls", msg, msglen) != 0 ||
		    put(h, suf, &nsuf, sep, "sep", msg, msglen) != 0)
			return -1;
	} else {
		snprintf(msg, msglen, "post_processor: type '%s' is not "
		    "supported", ty);
		return -1;
	}
	/* a later processor wraps what the earlier ones made */
	for (i = 0; i < h->npre; i++)
		if (put(h, pre, &npre, h->pre[i], "template", msg, msglen) != 0)
			return -1;
	for (i = 0; i < nsuf; i++)
		if (put(h, h->suf, &h->nsuf, suf[i], "template", msg,
		    msglen) != 0)
			return -1;
	memcpy(h->pre, pre, npre * sizeof(*pre));
	h->npre = npre;
	return 0;
}

int
ovl_hf__post_load(struct ovl_hf *h, json_t *pp, char *msg, size_t msglen)
{
	h->npre = h->nsuf = 0;
	if (pp == NULL || json_is_null(pp))
		return 0;
	return post_one(h, pp, 0, msg, msglen);
}
