/* unit.h: the minimal TAP harness every C unit test uses. Exit 0 when all passed, 1 otherwise,
 * 77 (skip) only through UNIT_SKIP for a prerequisite that is provably absent. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_n, unit_failed;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        unit_n++;                                                                       \
        if (cond) {                                                                     \
            printf("ok %d - %s\n", unit_n, #cond);                                      \
        } else {                                                                        \
            unit_failed++;                                                              \
            printf("not ok %d - %s (%s:%d)\n", unit_n, #cond, __FILE__, __LINE__);      \
        }                                                                               \
    } while (0)

#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *unit_a_ = (a), *unit_b_ = (b);                                      \
        unit_n++;                                                                       \
        if (unit_a_ && unit_b_ && strcmp(unit_a_, unit_b_) == 0) {                      \
            printf("ok %d - %s == %s\n", unit_n, #a, #b);                               \
        } else {                                                                        \
            unit_failed++;                                                              \
            printf("not ok %d - %s == %s: \"%s\" vs \"%s\" (%s:%d)\n", unit_n, #a, #b,  \
                   unit_a_ ? unit_a_ : "(null)", unit_b_ ? unit_b_ : "(null)", __FILE__, \
                   __LINE__);                                                           \
        }                                                                               \
    } while (0)

#define UNIT_SKIP(why)                                                                  \
    do {                                                                                \
        printf("1..0 # SKIP %s\n", why);                                                \
        exit(77);                                                                       \
    } while (0)

static inline int unit_done(void)
{
    printf("1..%d\n", unit_n);
    if (unit_n == 0) {
        printf("# no checks ran\n");
        return 1;
    }
    return unit_failed ? 1 : 0;
}
