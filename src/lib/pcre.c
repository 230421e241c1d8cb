/*
 * pcre: PCRE2 loaded at first use (see pcre.h).
 */
#include "pcre.h"

#include <stdio.h>

#include "dl.h"

struct ovl_pcre ovl_pcre;

#define SYM(f)	{ "pcre2_" #f "_8", &ovl_pcre.f }
static const struct ovl_dl_sym pcre_syms[] = {
	SYM(compile), SYM(code_free), SYM(get_error_message),
	SYM(get_ovector_pointer), SYM(jit_compile), SYM(jit_match),
	SYM(jit_stack_assign), SYM(jit_stack_create), SYM(jit_stack_free),
	SYM(match), SYM(match_context_create), SYM(match_context_free),
	SYM(match_data_create), SYM(match_data_free), SYM(pattern_info),
	{ NULL, NULL }
};
#undef SYM
static struct ovl_dl pcre_lib = { OVL_SONAME_PCRE2,
    "tokenizers with a pre-tokenizer pattern and --match/--drop",
    "libpcre2-8-0", pcre_syms, 0, "" };

int
ovl_pcre_load(char *err, size_t errlen)
{
	if (ovl_dl_load(&pcre_lib) == 0)
		return 0;
	snprintf(err, errlen, "%s", pcre_lib.err);
	return -1;
}
