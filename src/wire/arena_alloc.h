/* arena_alloc.h: a protobuf-c allocator over a request's arena (core/arena.h). free is a no-op:
 * the arena releases everything at once. */
#pragma once
#include <protobuf-c/protobuf-c.h>

#include "../core/arena.h"

static inline void *wire_arena_alloc_cb(void *data, size_t n) { return plm_arena_alloc(data, n); }
static inline void wire_arena_free_cb(void *data, void *p)
{
    (void)data;
    (void)p;
}
static inline ProtobufCAllocator wire_arena_allocator(struct plm_arena *a)
{
    return (ProtobufCAllocator){.alloc = wire_arena_alloc_cb, .free = wire_arena_free_cb, .allocator_data = a};
}
