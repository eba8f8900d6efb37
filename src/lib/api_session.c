/* api_session.c: sessions through include/plimsoll.h, over session.c: the chain is checked by the
 * same code `plimsoll repl` uses; cell output and the card lines are captured in memory per call.
 * Owns: the session (freed by plimsoll_session_close). The client must outlive it: the session
 * talks over its backend's connection, the one it was placed on. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

struct plimsoll_session {
    struct cli_session s;
    struct plc_choice choice; /* choice.floor is the session's floor (s.floor points at it) */
    char language[16];
};

static plimsoll_status from_exit(int rc)
{
    switch (rc) {
    case 0: return PLIMSOLL_OK;
    case CLI_EXIT_REFUSED: return PLIMSOLL_REFUSED;
    case CLI_EXIT_RECORD:
    case CLI_EXIT_EVIDENCE: return PLIMSOLL_EVIDENCE_MISMATCH;
    case CLI_EXIT_TRANSPORT: return PLIMSOLL_TRANSPORT;
    case CLI_EXIT_USAGE: return PLIMSOLL_INVALID;
    default: return PLIMSOLL_ERROR;
    }
}

/* The streams one call writes to, kept in memory. */
struct capture {
    char *out, *err;
    size_t out_n, err_n;
};

static int capture_begin(plimsoll_session *ps, struct capture *c)
{
    memset(c, 0, sizeof *c);
    ps->s.out = open_memstream(&c->out, &c->out_n);
    ps->s.err = ps->s.out ? open_memstream(&c->err, &c->err_n) : NULL;
    if (!ps->s.err) {
        if (ps->s.out)
            fclose(ps->s.out); /* sets c->out, freed next */
        ps->s.out = NULL;
        free(c->out);
        return -1;
    }
    return 0;
}

static void capture_end(plimsoll_session *ps, struct capture *c, char **output, char **report)
{
    fclose(ps->s.out);
    fclose(ps->s.err);
    ps->s.out = ps->s.err = NULL;
    if (output)
        *output = c->out;
    else
        free(c->out);
    if (report)
        *report = c->err;
    else
        free(c->err);
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_session_open(plimsoll_client *c, const char *language,
                                                      const char *minimum_isolation, int32_t timeout_ms,
                                                      const plimsoll_requirement *pub, plimsoll_session **out,
                                                      plimsoll_result **opened)
{
    *out = NULL;
    if (opened)
        *opened = NULL;
    cleanup_free plimsoll_session *ps = calloc(1, sizeof *ps);
    plimsoll_result *r cleanup_result = api_result_new();
    if (!ps || !r || !language || strlen(language) >= sizeof ps->language)
        return PLIMSOLL_INVALID;
    snprintf(ps->language, sizeof ps->language, "%s", language);
    ps->s.language = ps->language;
    ps->s.timeout_ms = timeout_ms;
    struct api_prefer adapter;
    struct plc_requirement req;
    api_requirement(pub, &adapter, &req);
    struct capture cap;
    int rc = CLI_EXIT_USAGE;
    enum plm_tier tier = PLM_TIER_UNKNOWN;
    if (capture_begin(ps, &cap) == 0) {
        if (c->direct) {
            if (plc_merge_floor(minimum_isolation, req.min_isolation, ps->choice.floor, &tier) == 0) {
                ps->s.floor = ps->choice.floor;
                ps->s.floor_tier = tier;
                ps->s.conn = c->pool.b[0].conn;
                snprintf(ps->choice.backend, sizeof ps->choice.backend, "%s", c->pool.b[0].name);
                rc = cli_session_open(&ps->s, NULL);
            }
        } else {
            ps->s.floor = minimum_isolation ? minimum_isolation : "";
            rc = plc_session_open(&c->pool, &req, &ps->s, NULL, &ps->choice);
        }
        cleanup_free char *report = NULL;
        capture_end(ps, &cap, NULL, &report);
        snprintf(r->call.o.message, sizeof r->call.o.message, "%s", ps->s.opened.message[0] ? ps->s.opened.message
                                                                                             : (report ? report : ""));
    }
    r->choice = ps->choice;
    r->call.o.verdict = ps->s.opened.verdict;
    r->call.o.refusal = ps->s.opened.refusal;
    r->status = from_exit(rc);
    if (r->status == PLIMSOLL_REFUSED)
        cli_reason_name(r->call.o.refusal, r->reason, sizeof r->reason);
    plimsoll_status st = r->status;
    if (opened)
        *opened = take_ptr(&r);
    if (st == PLIMSOLL_OK)
        *out = take_ptr(&ps);
    return st;
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_session_cell(plimsoll_session *s, const char *code, char **output,
                                                      char **report)
{
    if (output)
        *output = NULL;
    if (report)
        *report = NULL;
    if (!code || !cli_utf8_valid((const uint8_t *)code, strlen(code)))
        return PLIMSOLL_INVALID;
    if (s->s.broken)
        return PLIMSOLL_EVIDENCE_MISMATCH; /* an answer did not check: nothing more is sent */
    struct capture cap;
    if (capture_begin(s, &cap) < 0)
        return PLIMSOLL_INVALID;
    int rc = cli_session_cell(&s->s, code);
    capture_end(s, &cap, output, report);
    return from_exit(rc);
}

PLIMSOLL_EXPORT const char *plimsoll_session_backend(const plimsoll_session *s) { return s->choice.backend; }

PLIMSOLL_EXPORT plimsoll_status plimsoll_session_close(plimsoll_session *s, char **report)
{
    if (report)
        *report = NULL;
    if (!s)
        return PLIMSOLL_INVALID;
    struct capture cap;
    plimsoll_status st = PLIMSOLL_INVALID;
    if (capture_begin(s, &cap) == 0) {
        st = from_exit(cli_session_close(&s->s));
        capture_end(s, &cap, NULL, report);
    }
    free(s);
    return st;
}
