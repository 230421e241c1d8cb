/*
 * libFuzzer target: the plan parser (ovl-plan(5)), from memory, without
 * touching files (OVL_PLAN_NOGLOB): an error with file:line or a plan,
 * never a crash, whatever the text.
 */
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char err[1024];
	struct ovl_plan *p = ovl_plan_parse((const char *)data, n, "fuzz.plan",
	    "/nonexistent", OVL_PLAN_NOGLOB, err, sizeof(err));

	ovl_plan_free(p);
	return 0;
}
