/*
 * pcre: PCRE2's 8-bit functions, loaded at the first pattern compiled
 * (lib/dl.h): a process with the bytes tokenizer and no
 * --match/--drop never maps libpcre2. Callers call through ovl_pcre.
 */
#ifndef OVL_PCRE_H
#define OVL_PCRE_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stddef.h>

struct ovl_pcre {
	__typeof__(pcre2_compile)		*compile;
	__typeof__(pcre2_code_free)		*code_free;
	__typeof__(pcre2_get_error_message)	*get_error_message;
	__typeof__(pcre2_get_ovector_pointer)	*get_ovector_pointer;
	__typeof__(pcre2_jit_compile)		*jit_compile;
	__typeof__(pcre2_jit_match)		*jit_match;
	__typeof__(pcre2_jit_stack_assign)	*jit_stack_assign;
	__typeof__(pcre2_jit_stack_create)	*jit_stack_create;
	__typeof__(pcre2_jit_stack_free)	*jit_stack_free;
	__typeof__(pcre2_match)			*match;
	__typeof__(pcre2_match_context_create)	*match_context_create;
	__typeof__(pcre2_match_context_free)	*match_context_free;
	__typeof__(pcre2_match_data_create)	*match_data_create;
	__typeof__(pcre2_match_data_free)	*match_data_free;
	__typeof__(pcre2_pattern_info)		*pattern_info;
};
/* Every pointer NULL until ovl_pcre_load succeeded. */
extern struct ovl_pcre ovl_pcre;

/* Load libpcre2-8 (once, any thread): 0, or -1 with a message in err. */
int	ovl_pcre_load(char *err, size_t errlen);

#endif
