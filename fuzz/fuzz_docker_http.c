/* fuzz_docker_http.c: the request parser of a grant's docker socket (src/guestio/http.c, run in
 * the confined guestio helper), which reads whatever the guest writes to /run/host-api.sock. The input is the
 * bytes a guest sends; the head is found, parsed in place, and what the parser accepted is checked
 * against the invariants the transport relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/guestio/frame.h"
#include "../src/guestio/guestio.h"
#include "../src/guestio/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > GIO_HEAD_CAP)
        size = GIO_HEAD_CAP;
    size_t end = gio_http_head_end(data, size);
    if (end == 0)
        return 0;
    if (end > size)
        abort();
    /* A copy of exactly the head, so ASan catches any read past it. */
    uint8_t *head = malloc(end);
    if (!head)
        return 0;
    memcpy(head, data, end);
    struct gio_http_req r;
    memset(&r, 0, sizeof r);
    /* the guard's credential header, as guard mode asks for it */
    int st = gio_http_parse(head, end, "X-Plimsoll-E2B-Guard", &r);
    if (st == 0 && r.cred && ((const uint8_t *)r.cred < head || (const uint8_t *)r.cred >= head + end ||
                              (r.cred_count == 0)))
        abort();
    if (st == 0) {
        /* Accepted: a non-empty method token, a NUL-terminated target inside the buffer with no
         * control bytes (the broker sees it verbatim), and a length only when one was sent. */
        if (!r.method[0] || memchr(r.method, 0, sizeof r.method) == NULL || !r.target)
            abort();
        if ((const uint8_t *)r.target < head || (const uint8_t *)r.target >= head + end)
            abort();
        size_t tl = strnlen(r.target, (size_t)(head + end - (const uint8_t *)r.target));
        if ((const uint8_t *)r.target + tl >= head + end)
            abort();
        for (size_t i = 0; i < tl; i++)
            if ((unsigned char)r.target[i] < 0x20 || (unsigned char)r.target[i] == 0x7f)
                abort();
        if (!r.has_length && r.content_length != 0)
            abort();
        /* whatever the parser accepts, the CALL frame can carry */
        if (!gio_call_size(strlen(r.method), tl, 0))
            abort();
    } else if (st != 400 && st != 411 && st != 431 && st != 505) {
        abort();
    }
    free(head);
    char out[256];
    (void)gio_http_head(out, sizeof out, 100 + (int)(size % 500), "application/json", size);
    return 0;
}
