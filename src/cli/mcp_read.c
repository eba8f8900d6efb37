/* mcp_read.c: bounded line reads from the MCP host's stdin.
 * Owns: the line buffer.
 * Trusts: nothing: the host is a peer and its bytes are untrusted. No line grows the buffer past
 * MCP_LINE_MAX; an overlong line is skipped to its newline, never truncated into a message.
 * Invariant: memory is bounded by MCP_LINE_MAX plus one read chunk whatever the input. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"

#define CHUNK (64u * 1024)

void mcp_reader_init(struct mcp_reader *r, int fd)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
}

void mcp_reader_done(struct mcp_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

/* Drops the first n bytes of the buffer (a line already returned, or skipped bytes). */
static void consume(struct mcp_reader *r, size_t n)
{
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
}

static int fill(struct mcp_reader *r)
{
    if (r->cap - r->len < CHUNK) {
        size_t cap = r->len + CHUNK;
        char *b = realloc(r->buf, cap + 1);
        if (!b)
            return -1;
        r->buf = b;
        r->cap = cap;
    }
    for (;;) {
        ssize_t n = read(r->fd, r->buf + r->len, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            r->eof = true;
        r->len += (size_t)n;
        return 0;
    }
}

enum mcp_line mcp_read_line(struct mcp_reader *r, const char **line, size_t *len)
{
    if (r->returned) {
        consume(r, r->returned);
        r->returned = 0;
    }
    for (;;) {
        char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
        if (r->discarding) {
            if (nl) {
                consume(r, (size_t)(nl - r->buf) + 1);
                r->discarding = false;
                continue;
            }
            r->len = 0;
        } else if (nl) {
            size_t n = (size_t)(nl - r->buf);
            if (n > MCP_LINE_MAX) {
                consume(r, n + 1);
                return MCP_LINE_TOO_LONG;
            }
            *nl = '\0';
            *line = r->buf;
            *len = n;
            r->returned = n + 1;
            return MCP_LINE_OK;
        } else if (r->len > MCP_LINE_MAX) {
            /* No newline within the limit: this line can never be a message. */
            r->len = 0;
            r->discarding = true;
            return MCP_LINE_TOO_LONG;
        }
        if (r->eof) {
            if (r->discarding || r->len == 0)
                return MCP_LINE_EOF;
            r->buf[r->len] = '\0';
            *line = r->buf;
            *len = r->len;
            r->returned = r->len;
            return MCP_LINE_OK;
        }
        if (fill(r) < 0)
            return MCP_LINE_ERROR;
    }
}
