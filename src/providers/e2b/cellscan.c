/* cellscan.c: the end-of-cell marker scanner (cellscan.h).
 * Trusts: nothing it is fed. The marker's first byte (0x1e) occurs nowhere else in the marker,
 * so on a mismatch the held-back bytes are output and only the current byte can start a new
 * match: one pass, no backtracking, at most the marker's length held back. */
#include "cellscan.h"

#include <stdlib.h>
#include <string.h>

int e2b_cellscan_init(struct e2b_cellscan *c, const char *nonce, bool with_status, size_t keep)
{
    memset(c, 0, sizeof *c);
    if (!nonce || strlen(nonce) != E2B_CELL_NONCE_HEX)
        return -1;
    for (size_t i = 0; i < E2B_CELL_NONCE_HEX; i++)
        if (!((nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f')))
            return -1;
    memcpy(c->want, E2B_CELL_MARK_PREFIX, sizeof E2B_CELL_MARK_PREFIX - 1);
    memcpy(c->want + sizeof E2B_CELL_MARK_PREFIX - 1, nonce, E2B_CELL_NONCE_HEX);
    c->want_len = sizeof E2B_CELL_MARK_PREFIX - 1 + E2B_CELL_NONCE_HEX;
    c->with_status = with_status;
    c->keep = keep;
    c->state = CELLSCAN_OUTPUT;
    return 0;
}

static int emit(struct e2b_cellscan *c, const uint8_t *p, size_t n)
{
    c->seen += n;
    size_t room = c->out.len < c->keep ? c->keep - c->out.len : 0;
    size_t take = n < room ? n : room;
    if (take < n)
        c->truncated = true;
    if (!take)
        return 0;
    uint8_t *nd = realloc(c->out.data, c->out.len + take);
    if (!nd)
        return -1;
    memcpy(nd + c->out.len, p, take);
    c->out.data = nd;
    c->out.len += take;
    return 0;
}

static int bad(struct e2b_cellscan *c)
{
    c->state = CELLSCAN_BAD;
    return -1;
}

/* One byte of the tail after prefix + nonce: stdout " <digits>\n", stderr "\n". */
static int status_byte(struct e2b_cellscan *c, uint8_t b)
{
    if (!c->with_status)
        return b == '\n' ? 1 : bad(c);
    if (c->status_len == 0) { /* the separating space */
        if (b != ' ')
            return bad(c);
        c->status_text[c->status_len++] = ' ';
        return 0;
    }
    if (b == '\n') {
        const char *t = c->status_text + 1;
        size_t n = c->status_len - 1;
        bool neg = n && t[0] == '-';
        if (n == (size_t)neg)
            return bad(c);
        int32_t v = 0;
        for (size_t i = neg; i < n; i++)
            v = v * 10 + (t[i] - '0'); /* at most 6 digits: no overflow */
        c->status = neg ? -v : v;
        return 1;
    }
    bool ok = (b >= '0' && b <= '9') || (b == '-' && c->status_len == 1);
    if (!ok || c->status_len >= E2B_CELL_STATUS_MAX + 1)
        return bad(c);
    c->status_text[c->status_len++] = (char)b;
    return 0;
}

int e2b_cellscan_feed(struct e2b_cellscan *c, const uint8_t *p, size_t n, size_t *used)
{
    *used = 0;
    if (c->state == CELLSCAN_DONE)
        return 1;
    if (c->state == CELLSCAN_BAD)
        return -1;
    size_t i = 0;
    while (i < n) {
        if (c->state == CELLSCAN_STATUS) {
            int r = status_byte(c, p[i++]);
            if (r < 0) {
                *used = i;
                return -1;
            }
            if (r == 1) {
                c->state = CELLSCAN_DONE;
                *used = i;
                return 1;
            }
            continue;
        }
        if (c->matched == 0) { /* output up to the next possible marker start, in one piece */
            const uint8_t *m = memchr(p + i, 0x1e, n - i);
            size_t run = m ? (size_t)(m - (p + i)) : n - i;
            if (run && emit(c, p + i, run) < 0) {
                *used = i;
                return bad(c);
            }
            i += run;
            if (!m)
                break;
            c->matched = 1;
            i++;
            continue;
        }
        if (p[i] == (uint8_t)c->want[c->matched]) {
            i++;
            if (++c->matched == c->want_len)
                c->state = CELLSCAN_STATUS;
            continue;
        }
        /* not this cell's marker: what was held back is output; p[i] is looked at afresh */
        size_t held = c->matched;
        c->matched = 0;
        if (emit(c, (const uint8_t *)c->want, held) < 0) {
            *used = i;
            return bad(c);
        }
    }
    *used = n;
    return 0;
}

void e2b_cellscan_take(struct e2b_cellscan *c, struct plm_bytes *out)
{
    *out = c->out;
    c->out = (struct plm_bytes){0};
}

void e2b_cellscan_done(struct e2b_cellscan *c)
{
    plm_bytes_done(&c->out);
}
