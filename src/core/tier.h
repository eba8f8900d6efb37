/* tier.h: isolation tiers, weakest to strongest, and the floor rule.
 * Invariant: unknown meets nothing; `none` is never a valid floor. */
#pragma once
#include <stdbool.h>

#include "err.h"

enum plm_tier {
    PLM_TIER_UNKNOWN = 0,
    PLM_TIER_NONE = 1,
    PLM_TIER_PROCESS = 2,
    PLM_TIER_CONTAINER = 3,
    PLM_TIER_KERNEL = 4,
    PLM_TIER_VM = 5,
};

/* Exact wire names; anything else (including "" and "unknown") is PLM_TIER_UNKNOWN. */
enum plm_tier tier_parse(const char *s);
const char *tier_name(enum plm_tier t);
/* True only when both lie in none..vm and actual >= floor. */
bool tier_meets(enum plm_tier actual, enum plm_tier floor);
/* A request floor: "" means no floor (*out = UNKNOWN); process..vm accepted; `none` and every
 * other value are PLM_E_INVALID / request. */
int tier_parse_floor(const char *s, enum plm_tier *out, struct plm_err *err);
/* The pre-dispatch check: PLM_E_ISOLATION / isolation when a floor is set and not met. */
int tier_check_floor(enum plm_tier actual, enum plm_tier floor, struct plm_err *err);
