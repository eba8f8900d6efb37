/* client_frames.c: the daemon side's outgoing frame buffers and its one answer of its own to a
 * guest (client.h). Owns: each buffer until it is freed by its list; nothing else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"

/* One non-blocking send of a short answer, then close: never waits on a guest. */
void gio_refuse(int fd, int status, const char *text)
{
    char buf[256];
    int n =
        snprintf(buf, sizeof buf,
                 "HTTP/1.1 %d %s\r\nContent-Type: " CT_TEXT "\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 status, status == 503 ? "Service Unavailable" : "Error", strlen(text), text);
    if (n > 0 && (size_t)n < sizeof buf && send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the guest is gone or not reading: closing is the answer */
    }
    close(fd);
}

void obuf_free_list(struct obuf *b)
{
    while (b) {
        struct obuf *n = b->next;
        free(b->p);
        free(b);
        b = n;
    }
}

void obuf_push(struct obuf **head, struct obuf **tail, struct obuf *b)
{
    b->next = NULL;
    if (*tail)
        (*tail)->next = b;
    else
        *head = b;
    *tail = b;
}

struct obuf *frame_buf(uint16_t type, uint64_t seq, size_t payload)
{
    struct obuf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->p = malloc(F16_HDR_LEN + payload);
    if (!b->p) {
        free(b);
        return NULL;
    }
    struct f16_hdr h = {.len = (uint32_t)payload, .type = type, .flags = 0, .seq = seq};
    f16_hdr_encode(b->p, &h);
    b->len = F16_HDR_LEN + payload;
    b->pass_fd = -1;
    return b;
}

struct obuf *reply_frame(uint64_t id, int status, const char *ctype, const uint8_t *body, size_t len)
{
    static const char bad[] = "host api unavailable\n";
    if (status < 200 || status > 599 || len > GIO_REPLY_MAX || (len && !body)) {
        status = 502;
        ctype = CT_TEXT;
        body = (const uint8_t *)bad;
        len = sizeof bad - 1;
    }
    size_t cl = ctype ? strlen(ctype) : 0;
    bool ok = cl > 0 && cl <= GIO_CTYPE_MAX;
    for (size_t i = 0; ok && i < cl; i++)
        ok = (unsigned char)ctype[i] >= 0x20 && (unsigned char)ctype[i] <= 0x7e;
    if (!ok) {
        ctype = CT_BODY;
        cl = sizeof CT_BODY - 1;
    }
    struct gio_reply r = {
        .status = status, .ctype = (const uint8_t *)ctype, .ctype_len = cl, .body = body, .body_len = len};
    size_t n = gio_reply_size(cl, len);
    struct obuf *b = frame_buf(GIO_T_REPLY, id, n);
    if (b)
        b->reply_to = id;
    if (b && gio_reply_encode(b->p + F16_HDR_LEN, n, &r) != n) {
        obuf_free_list(b);
        return NULL;
    }
    return b;
}

