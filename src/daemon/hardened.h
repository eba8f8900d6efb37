/* hardened.h: PLIMSOLL_HARDENED=1, the production policy of wire.md §17. Every requirement is
 * checked and every unmet one is named in one startup error, so an operator fixes them in one
 * pass; requirements this build cannot meet at all say so rather than being skipped. */
#pragma once
#include "../core/err.h"
#include "config.h"

/* 0 when c meets the policy as configured; -1 with err naming each unmet requirement.
 * get reads the raw environment (for SANDBOX_DOCKER_RUNTIME and the like). On success the
 * caller must still hold the provider to a proven tier of at least kernel: c->min_isolation
 * is raised to kernel here when it was lower, so main's existing startup check enforces it. */
int hardened_check(const char *(*get)(const char *), struct plm_config *c, struct plm_err *err);
