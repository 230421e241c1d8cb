/*
 * spm-dl: the C side of the SentencePiece shim (spm.h): it loads ovl-spm.so
 * (and so libsentencepiece and libstdc++) at the first model opened, and
 * forwards every call through the shim's table.
 */
#include "spm.h"

#include <stdio.h>

#include "dl.h"

static const struct ovl_spm_api *api;
static const struct ovl_dl_sym spm_syms[] = {
	{ "ovl_spm_api", (void *)&api }, { NULL, NULL }
};
static struct ovl_dl spm_lib = { NULL, "sentencepiece tokenizers",
    "libsentencepiece0", spm_syms, 0, "" };

struct ovl_spm *
ovl_spm_open(const char *path, char *err, size_t errlen)
{
	if (spm_lib.file == NULL)
		spm_lib.file = ovl_dl_own("ovl-spm.so", "OVL_SPM_SHIM");
	if (ovl_dl_load(&spm_lib) != 0) {
		snprintf(err, errlen, "%s: %s", path, spm_lib.err);
		return NULL;
	}
	if (api->abi != OVL_SPM_ABI) {
		snprintf(err, errlen, "%s: %s is of another overlord (its "
		    "interface %d, ours %d)", path, spm_lib.file, api->abi,
		    OVL_SPM_ABI);
		return NULL;
	}
	return api->open(path, err, errlen);
}

void
ovl_spm_free(struct ovl_spm *s)
{
	if (s != NULL)
		api->free(s);
}

const char *
ovl_spm_name(const struct ovl_spm *s)
{
	return api->name(s);
}

uint32_t
ovl_spm_vocab(const struct ovl_spm *s)
{
	return api->vocab(s);
}

int64_t
ovl_spm_eos(const struct ovl_spm *s)
{
	return api->eos(s);
}

int64_t
ovl_spm_piece_id(const struct ovl_spm *s, const char *piece)
{
	return api->piece_id(s, piece);
}

int
ovl_spm_encode(struct ovl_spm *s, const char *text, size_t n,
    uint32_t **out_ids, size_t *len, size_t *cap, char *err, size_t errlen)
{
	return api->encode(s, text, n, out_ids, len, cap, err, errlen);
}

char *
ovl_spm_decode(const struct ovl_spm *s, const uint32_t *ids, size_t n,
    size_t *outlen)
{
	return api->decode(s, ids, n, outlen);
}
