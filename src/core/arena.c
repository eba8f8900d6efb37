/* arena.c: chunks of 64 KiB carved front to back; a request larger than a quarter chunk gets a
 * chunk of its own, so the waste per allocation stays below 16 KiB + alignment and the memory
 * obtained is at most used + 25% + one chunk. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

#define CHUNK (64u * 1024)
#define ALIGN 16u

struct chunk {
    struct chunk *next;
    size_t cap, off;
    _Alignas(16) unsigned char data[];
};

struct plm_arena {
    struct chunk *head; /* the chunk being carved; big allocations are linked behind it */
    size_t limit, used, reserved;
    bool over_limit;
};

struct plm_arena *plm_arena_new(size_t limit)
{
    struct plm_arena *a = calloc(1, sizeof *a);
    if (a)
        a->limit = limit;
    return a;
}

static struct chunk *chunk_new(size_t cap)
{
    struct chunk *c = malloc(sizeof *c + cap);
    if (c) {
        c->next = NULL;
        c->cap = cap;
        c->off = 0;
    }
    return c;
}

void *plm_arena_alloc(struct plm_arena *a, size_t n)
{
    if (n == 0)
        n = 1;
    size_t rounded = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (rounded < n || rounded > a->limit - a->used) {
        a->over_limit = true;
        return NULL;
    }
    if (rounded > CHUNK / 4) { /* its own chunk, linked behind the current one */
        struct chunk *c = chunk_new(rounded);
        if (!c)
            return NULL;
        if (a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            a->head = c;
        }
        c->off = rounded;
        a->used += rounded;
        a->reserved += rounded;
        return c->data;
    }
    if (!a->head || a->head->cap - a->head->off < rounded) {
        struct chunk *c = chunk_new(CHUNK);
        if (!c)
            return NULL;
        c->next = a->head;
        a->head = c;
        a->reserved += CHUNK;
    }
    void *p = a->head->data + a->head->off;
    a->head->off += rounded;
    a->used += rounded;
    return p;
}

size_t plm_arena_used(const struct plm_arena *a) { return a->used; }
size_t plm_arena_reserved(const struct plm_arena *a) { return a->reserved; }
bool plm_arena_over_limit(const struct plm_arena *a) { return a->over_limit; }

void plm_arena_free(struct plm_arena *a)
{
    if (!a)
        return;
    for (struct chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}
