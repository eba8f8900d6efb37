/* arena.h: a per-request bump allocator. Everything one request decodes lives in one arena and is
 * released at once by plm_arena_free, so no partial-failure path has to free piece by piece.
 * Owns: its chunks. Invariant: at most `limit` bytes are ever handed out; an allocation past
 * it fails (returns NULL) and sets over_limit, which callers report as an oversized message,
 * not as the machine running out of memory. Not thread-safe: one request, one thread. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct plm_arena;

struct plm_arena *plm_arena_new(size_t limit);
/* 16-byte aligned, uninitialised; NULL past the limit or out of memory. */
void *plm_arena_alloc(struct plm_arena *a, size_t n);
/* Bytes handed out so far (what the limit counts), and bytes obtained from malloc for chunks. */
size_t plm_arena_used(const struct plm_arena *a);
size_t plm_arena_reserved(const struct plm_arena *a);
bool plm_arena_over_limit(const struct plm_arena *a);
/* NULL-safe. */
void plm_arena_free(struct plm_arena *a);
