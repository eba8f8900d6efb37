/* client.h: the daemon side's frame buffers (client_frames.c), shared by client.c. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CT_TEXT "text/plain; charset=utf-8"
#define CT_BODY "application/octet-stream"

struct obuf {
    struct obuf *next;
    uint8_t *p;
    size_t len, off;
    int pass_fd;       /* sent in SCM_RIGHTS with the frame's first byte; not owned; -1 none */
    uint64_t reply_to; /* a REPLY's connection, 0 for other frames */
};

/* One non-blocking send of a short answer, then close: never waits on a guest. */
void gio_refuse(int fd, int status, const char *text);
void obuf_free_list(struct obuf *b);
void obuf_push(struct obuf **head, struct obuf **tail, struct obuf *b);
/* A frame of `payload` bytes with its header written; NULL when out of memory. */
struct obuf *frame_buf(uint16_t type, uint64_t seq, size_t payload);
/* A REPLY frame; a status the HTTP exchange cannot end with, or a reply the frame cannot
 * carry, becomes 502, and a Content-Type that could break the head becomes octet-stream. */
struct obuf *reply_frame(uint64_t id, int status, const char *ctype, const uint8_t *body, size_t len);
