/* tier.c: tier names, ordering and the floor check. */
#include "tier.h"

#include <string.h>

static const char *const tier_names[] = {"unknown", "none", "process", "container", "kernel", "vm"};

enum plm_tier tier_parse(const char *s)
{
    if (!s)
        return PLM_TIER_UNKNOWN;
    for (int t = PLM_TIER_NONE; t <= PLM_TIER_VM; t++)
        if (strcmp(s, tier_names[t]) == 0)
            return (enum plm_tier)t;
    return PLM_TIER_UNKNOWN;
}

const char *tier_name(enum plm_tier t)
{
    if (t < PLM_TIER_UNKNOWN || t > PLM_TIER_VM)
        return "unknown";
    return tier_names[t];
}

bool tier_meets(enum plm_tier actual, enum plm_tier floor)
{
    if (actual < PLM_TIER_NONE || actual > PLM_TIER_VM)
        return false;
    if (floor < PLM_TIER_NONE || floor > PLM_TIER_VM)
        return false;
    return actual >= floor;
}

int tier_parse_floor(const char *s, enum plm_tier *out, struct plm_err *err)
{
    *out = PLM_TIER_UNKNOWN;
    if (!s || !*s)
        return 0;
    enum plm_tier t = tier_parse(s);
    /* `none` as a floor would admit everything while looking like a statement: refuse it. */
    if (t == PLM_TIER_UNKNOWN || t == PLM_TIER_NONE)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                           "minimum_isolation must be empty or one of process, container, kernel, vm");
    *out = t;
    return 0;
}

int tier_check_floor(enum plm_tier actual, enum plm_tier floor, struct plm_err *err)
{
    if (floor == PLM_TIER_UNKNOWN)
        return 0;
    if (tier_meets(actual, floor))
        return 0;
    return plm_refuse(err, PLM_E_ISOLATION, PLM_REFUSAL_ISOLATION,
                       "provider isolation %s is below requested minimum %s", tier_name(actual),
                       tier_name(floor));
}
