/* gatereq.c: what a handler uses on a gate_req (gate.h): header lookups over the checked head
 * and the answer it builds. The head was checked by httphead_check, so every line ends CRLF,
 * every field has a name and a colon, and there is no control byte but HTAB in a value. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gate.h"

bool gate_req_peer_gone(const struct gate_req *rq)
{
    if (rq->peer_fd < 0)
        return false;
    /* POLLRDHUP: the client's FIN, even behind pipelined bytes not read yet; POLLHUP/POLLERR: a
     * reset or both directions closed. A request's bytes are all read before its handler runs,
     * so an ended stream means the client is gone, not that it is still sending. */
    struct pollfd p = {.fd = rq->peer_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

unsigned gate_req_header(const struct gate_req *rq, const char *name, const char **val, size_t *vlen)
{
    size_t name_len = strlen(name);
    unsigned n = 0;
    const char *end = rq->head + rq->head_len;
    const char *p = memchr(rq->head, '\n', rq->head_len); /* the request line's end */
    for (p = p ? p + 1 : end; p + 2 <= end && !(p[0] == '\r' && p[1] == '\n');) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        if (colon && (size_t)(colon - p) == name_len && strncasecmp(p, name, name_len) == 0) {
            const char *v = colon + 1, *ve = nl - 1; /* before the CR */
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            n++;
            if (val)
                *val = v;
            if (vlen)
                *vlen = (size_t)(ve - v);
        }
        p = nl + 1;
    }
    return n;
}

const char *gate_req_header_str(const struct gate_req *rq, const char *name, char *buf, size_t cap, unsigned *n)
{
    const char *v = NULL;
    size_t vl = 0;
    unsigned k = gate_req_header(rq, name, &v, &vl);
    if (n)
        *n = k;
    if (k != 1 || vl >= cap)
        return NULL;
    memcpy(buf, v, vl);
    buf[vl] = 0;
    return buf;
}

void gate_resp_header(struct gate_resp *rs, const char *name, const char *value)
{
    size_t room = sizeof rs->hdr - rs->hdr_len;
    int n = snprintf(rs->hdr + rs->hdr_len, room, "%s: %s\r\n", name, value);
    if (n > 0 && (size_t)n < room)
        rs->hdr_len += (size_t)n;
    else
        rs->hdr[rs->hdr_len] = 0; /* our own headers are short; one that does not fit is left out */
}

void gate_resp_set(struct gate_resp *rs, unsigned status, const char *ctype, char *body, size_t len, bool owned)
{
    if (rs->body_owned)
        free(rs->body);
    rs->status = status;
    rs->body = body;
    rs->len = len;
    rs->body_owned = owned;
    if (ctype)
        gate_resp_header(rs, "Content-Type", ctype);
}

void gate_resp_text(struct gate_resp *rs, unsigned status, const char *static_text)
{
    gate_resp_set(rs, status, "text/plain; charset=utf-8", (char *)static_text, strlen(static_text), false);
}
