/* describe.h: the kept Describe answer (describe.c; rpc_describe in rpc.h uses it when
 * rpc_env.describe_cache is set). Thread-safe. Owns: the kept bytes. */
#pragma once

struct describe_cache;

struct describe_cache *describe_cache_new(void); /* NULL out of memory (Describe then encodes every call) */
void describe_cache_free(struct describe_cache *dc);
