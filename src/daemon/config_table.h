/* config_table.h: the reference variables this build lacks and the provider-scoped ones
 * (config_table.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* After the provider is parsed: a set variable of a missing feature, or one the configured
 * provider does not read, fills err naming it. */
int config_table_check(const char *(*get)(const char *), const struct plm_config *c, struct plm_err *err);
/* One line of plimsolld -h: name, default, help. */
#define CFG_HELP_FMT "  %-32s default %-28s %s\n"
/* Prints the missing features' variables for -h. */
void config_table_help(FILE *out);
/* The first n bytes of name are a variable of the missing-features table. */
bool config_table_known(const char *name, size_t n);
/* SANDBOX_TOTAL_MEMORY_MB against what one run of provider `name` reserves (its Describe memory). */
int config_memory_budget(uint32_t total_mb, uint32_t run_mb, const char *name, struct plm_err *err);
