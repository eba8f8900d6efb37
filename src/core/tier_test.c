/* tier_test.c: tier names, ordering, the floor parse and the floor check. */
#include "tier.h"
#include "unit.h"

int main(void)
{
    CHECK(tier_parse("process") == PLM_TIER_PROCESS);
    CHECK(tier_parse("vm") == PLM_TIER_VM);
    CHECK(tier_parse("VM") == PLM_TIER_UNKNOWN);
    CHECK(tier_parse("vm ") == PLM_TIER_UNKNOWN);
    CHECK(tier_parse("unknown") == PLM_TIER_UNKNOWN);
    CHECK(tier_parse("") == PLM_TIER_UNKNOWN);
    CHECK(tier_parse(NULL) == PLM_TIER_UNKNOWN);
    CHECK_STR(tier_name(PLM_TIER_KERNEL), "kernel");
    CHECK_STR(tier_name((enum plm_tier)99), "unknown");

    CHECK(tier_meets(PLM_TIER_VM, PLM_TIER_PROCESS));
    CHECK(tier_meets(PLM_TIER_CONTAINER, PLM_TIER_CONTAINER));
    CHECK(!tier_meets(PLM_TIER_PROCESS, PLM_TIER_CONTAINER));
    CHECK(!tier_meets(PLM_TIER_UNKNOWN, PLM_TIER_NONE));
    CHECK(!tier_meets(PLM_TIER_VM, PLM_TIER_UNKNOWN));

    struct plm_err err = {0};
    enum plm_tier f;
    CHECK(tier_parse_floor("", &f, &err) == 0 && f == PLM_TIER_UNKNOWN);
    CHECK(tier_parse_floor("kernel", &f, &err) == 0 && f == PLM_TIER_KERNEL);
    CHECK(tier_parse_floor("none", &f, &err) < 0 && err.kind == PLM_E_INVALID && err.refusal == PLM_REFUSAL_REQUEST);
    CHECK(tier_parse_floor("VM ", &f, &err) < 0 && err.refusal == PLM_REFUSAL_REQUEST);
    CHECK(tier_parse_floor("unknown", &f, &err) < 0);

    CHECK(tier_check_floor(PLM_TIER_NONE, PLM_TIER_UNKNOWN, &err) == 0);
    CHECK(tier_check_floor(PLM_TIER_PROCESS, PLM_TIER_VM, &err) < 0 && err.kind == PLM_E_ISOLATION &&
          err.refusal == PLM_REFUSAL_ISOLATION);
    CHECK_STR(err.msg, "provider isolation process is below requested minimum vm");
    CHECK(tier_check_floor(PLM_TIER_UNKNOWN, PLM_TIER_PROCESS, &err) < 0);
    CHECK_STR(plm_refusal_name(PLM_REFUSAL_ISOLATION), "isolation");
    CHECK_STR(plm_refusal_name(PLM_REFUSAL_NONE), "unknown");
    return unit_done();
}
