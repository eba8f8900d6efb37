/* session.c: `plimsoll repl`: one session, cells read from standard input, the record chain
 * checked as a client must (sessions.md §5.2-§5.4), a card line per cell, the close summary
 * checked against what we saw.
 * Owns: the session id (kept in memory only, never printed), the chain (calls, last digest), the
 * messages we encode (the only things the request digests are recomputed from).
 * Trusts: nothing in an answer until its record checked; after an answer that could not be
 * checked nothing more is sent on the session (§5.3) except the close. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "../wire/convert.h"
#include "../wire/json_codec.h"
#include "cli.h"

#define SVC "/plimsoll.v1.SandboxService/"

struct repl {
    struct cli_conn conn;
    const char *language;
    const char *floor;
    enum plm_tier floor_tier;
    int32_t timeout_ms;
    char id[64], fp[PLM_HEX_SHA256], last[PLM_HEX_SHA256];
    uint64_t calls;
    bool broken; /* §5.3: an answer we could not check */
};

static bool only_blank_line(const char *s)
{
    return s[strspn(s, " \t\r")] == 0;
}

void cli_usage_repl(FILE *f)
{
    fputs("usage: plimsoll repl [--language javascript|python] [--min-isolation TIER] [--timeout SECONDS]\n"
          "                     [--owner NAME] [--url URL] [--token-file FILE]\n"
          "\n"
          "Opens a session, runs cells read from standard input in it, checks every answer's record\n"
          "and the session chain (fingerprint, sequence, previous digest), prints each cell's output\n"
          "and a card line on stderr, then closes the session and checks its summary.\n"
          "\n"
          "A cell is one or more lines; it ends at a blank line or at a line holding only %%, so a\n"
          "Python block (`def f(x):` and its indented body) is one cell. On a terminal, lines are\n"
          "edited with libedit and kept in this process's history (no history file is written);\n"
          "the prompt is `> `, and `... ` inside a cell. End with Ctrl-D (end of input).\n"
          "\n"
          "  --language LANG        javascript (default) or python\n"
          "  --min-isolation TIER   refuse unless the sandbox is at least TIER\n"
          "  --timeout SECONDS      each cell's time limit, 0 < SECONDS <= 300\n"
          "  --owner NAME           the session's owner label (per-owner caps, docs/sessions.md)\n"
          "  --url URL              daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE      bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "\n"
          "Exit status: 0 all checked; 200 the open was refused; 202 a record or the chain did not\n"
          "check; 203 transport error; 204 usage error; 205 server error that may have run.\n",
          f);
}


/* POSTs m; on a bound 200 decodes it as `d`. Returns the decoded message or NULL with *o saying
 * what happened, and the raw error body in *err_body (malloc'd) for detail parsing. */
static ProtobufCMessage *post(struct repl *r, const char *proc, const ProtobufCMessage *m,
                              const ProtobufCMessageDescriptor *d, struct cli_outcome *o, char **err_body)
{
    *err_body = NULL;
    memset(o, 0, sizeof *o);
    size_t len = 0;
    cleanup_free char *body = wire_json_encode(m, &len);
    char rid[33], path[96];
    struct plm_err err = {0};
    if (!body || cli_request_id(rid) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        snprintf(o->message, sizeof o->message, "out of memory or randomness");
        return NULL;
    }
    snprintf(path, sizeof path, SVC "%s", proc);
    struct cli_http_answer ans;
    ProtobufCMessage *out = NULL;
    if (cli_http_post(&r->conn, path, body, len, rid, &ans, &err) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        snprintf(o->message, sizeof o->message, "%s", err.msg);
        return NULL;
    }
    if (cli_classify_http(rid, &ans, o)) {
        out = wire_json_decode(d, ans.body, ans.body_len, &err);
        if (!out) {
            o->verdict = CLI_V_TRANSPORT;
            snprintf(o->message, sizeof o->message, "malformed response: %.400s", err.msg);
        }
    } else if (o->bound && ans.body) {
        *err_body = strdup(ans.body);
    }
    cli_http_answer_done(&ans);
    return out;
}

/* §5.2: the record check, then the chain. */
static int check_chain(struct repl *r, const Plimsoll__V1__SessionRunRequest *sent, const Plimsoll__V1__RunRecord *m,
                       const Plimsoll__V1__RunResponse *resp, char *why, size_t n)
{
    struct plm_record rec;
    wire_record_view(m, &rec);
    struct wire_request_view v;
    struct plm_err err = {0};
    if (wire_session_request_view(sent, &v, &err) < 0)
        return snprintf(why, n, "out of memory"), -1;
    char dg[PLM_HEX_SHA256];
    rec_request_digest(&v.req, dg);
    wire_request_view_done(&v);
    if (strcmp(dg, rec.request_sha256))
        return snprintf(why, n, "request digest differs from the request sent"), -1;
    if (resp) {
        struct wire_result_view rv;
        if (rec.version != 2 || wire_result_view(resp, &rv, &err) < 0)
            return snprintf(why, n, "an answered call must carry a version 2 record"), -1;
        rec_result_digest(&rv.res, dg);
        wire_result_view_done(&rv);
        if (strcmp(dg, rec.result_sha256))
            return snprintf(why, n, "result digest differs from the result"), -1;
        if (strcmp(rec.provider, resp->sandbox ? resp->sandbox : "") ||
            strcmp(rec.isolation, resp->isolation ? resp->isolation : ""))
            return snprintf(why, n, "record evidence differs from the answer"), -1;
    } else if (rec.version != 3 || *rec.result_sha256 || !cli_connect_code_valid(rec.unanswered)) {
        return snprintf(why, n, "an unanswered call must carry a version 3 record with a Connect code"), -1;
    }
    rec_record_digest(&rec, dg);
    if (strcmp(dg, rec.record_sha256))
        return snprintf(why, n, "record digest does not recompute"), -1;
    if (r->floor_tier != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(rec.isolation), r->floor_tier))
        return snprintf(why, n, "the record's tier %s is below the floor %s", rec.isolation, r->floor), -1;
    if (strcmp(rec.session, r->fp) || rec.sequence != r->calls + 1 || strcmp(rec.previous_sha256, r->last))
        return snprintf(why, n, "chain broken: expected call %llu after %.12s",
                        (unsigned long long)r->calls + 1, r->last[0] ? r->last : "(none)"), -1;
    r->calls++;
    snprintf(r->last, sizeof r->last, "%s", rec.record_sha256);
    return 0;
}

/* An error answer: an UnansweredCall record is checked and chained; a refusal is reported. */
static int cell_error(struct repl *r, const Plimsoll__V1__SessionRunRequest *sent, const struct cli_outcome *o,
                      const char *body)
{
    cli_cleanup_json json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(j, "details"), i, d) {
        const char *type = json_string_value(json_object_get(d, "type"));
        const char *val = json_string_value(json_object_get(d, "value"));
        if (!type || !val || strcmp(type, "plimsoll.v1.UnansweredCall"))
            continue;
        uint8_t *raw = NULL;
        size_t n = 0;
        if (cli_b64_decode(val, strlen(val), &raw, &n) < 0)
            break;
        Plimsoll__V1__UnansweredCall *u = plimsoll__v1__unanswered_call__unpack(NULL, n, raw);
        free(raw);
        char why[160] = "undecodable";
        int rc = u && u->record ? check_chain(r, sent, u->record, NULL, why, sizeof why) : -1;
        if (u)
            plimsoll__v1__unanswered_call__free_unpacked(u, NULL);
        if (rc < 0) {
            fprintf(stderr, "[cell %llu] unanswered call whose record does not check: %s\n",
                    (unsigned long long)r->calls + 1, why);
            r->broken = true;
            return CLI_EXIT_RECORD;
        }
        fprintf(stderr, "[cell %llu] %s (may have run; chained as unanswered) · record %.12s\n",
                (unsigned long long)r->calls, o->code, r->last);
        return CLI_EXIT_SERVER;
    }
    if (o->verdict == CLI_V_REFUSED) {
        char rn[32];
        cli_reason_name(o->refusal, rn, sizeof rn);
        fprintf(stderr, "[refused: %s] %s: ", rn, o->code);
        cli_put_safe(stderr, o->message, "");
        fputc('\n', stderr);
        return CLI_EXIT_REFUSED;
    }
    r->broken = true; /* §5.3: nothing more is sent on this session */
    fprintf(stderr, "[cell %llu] %s, not checkable (%s); no further cells are sent: ", (unsigned long long)r->calls + 1,
            o->code[0] ? o->code : "error", cli_verdict_name(o->verdict));
    cli_put_safe(stderr, o->message, "");
    fputc('\n', stderr);
    return o->verdict == CLI_V_TRANSPORT ? CLI_EXIT_TRANSPORT : CLI_EXIT_SERVER;
}

static int run_cell(struct repl *r, const char *code)
{
    Plimsoll__V1__CellRun cell = PLIMSOLL__V1__CELL_RUN__INIT;
    cell.language = (char *)r->language;
    cell.code = (char *)code;
    Plimsoll__V1__SessionRunRequest req = PLIMSOLL__V1__SESSION_RUN_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.minimum_isolation = (char *)r->floor;
    req.timeout_ms = r->timeout_ms;
    req.session_id = r->id;
    req.payload_case = PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_CELL;
    req.cell = &cell;
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__SessionRunResponse *resp = (void *)post(
        r, "SessionRun", &req.base, &plimsoll__v1__session_run_response__descriptor, &o, &err_body);
    if (!resp)
        return cell_error(r, &req, &o, err_body);
    char why[160];
    const Plimsoll__V1__RunResponse *run = resp->run;
    if (!run || !run->record || run->result_case != PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL ||
        check_chain(r, &req, run->record, run, why, sizeof why) < 0) {
        if (!run || !run->record || run->result_case != PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL)
            snprintf(why, sizeof why, "the answer carries no cell result and record");
        fprintf(stderr, "[cell %llu] record mismatch, output withheld: %s\n", (unsigned long long)r->calls + 1, why);
        r->broken = true;
        return CLI_EXIT_RECORD;
    }
    const Plimsoll__V1__CellResult *c = run->cell;
    if (c->stdout.len) /* an empty bytes field may have no buffer, which fwrite must not see */
        fwrite(c->stdout.data, 1, c->stdout.len, stdout);
    fflush(stdout);
    if (c->stderr.len)
        fwrite(c->stderr.data, 1, c->stderr.len, stderr);
    fprintf(stderr, "[cell %llu] exit %d%s%s%s · %s/%s · record %.12s · chain ok\n", (unsigned long long)r->calls,
            c->exit_code, c->timed_out ? " (timed out)" : "", c->interpreter_started ? " · fresh interpreter" : "",
            c->interpreter_ended ? " · interpreter ended" : "", run->sandbox, run->isolation, r->last);
    if (resp->ended) {
        fprintf(stderr, "[session ended: %s]\n", protobuf_c_enum_descriptor_get_value(&plimsoll__v1__session_end__descriptor,
                                                                                   (int)resp->ended)
                                                     ? protobuf_c_enum_descriptor_get_value(
                                                           &plimsoll__v1__session_end__descriptor, (int)resp->ended)->name
                                                     : "?");
        r->broken = true;
    }
    return 0;
}

/* One input line without its '\n' (malloc'd), or NULL at end of input. On a terminal it comes
 * from libedit, with line editing and this process's history (kept in memory only: cells may
 * carry secrets, so no history file is written). */
static char *read_line(bool tty, bool continuation, size_t *len)
{
    char *line = NULL;
    if (tty) {
        line = readline(continuation ? "... " : "> ");
        if (line && *line && !only_blank_line(line))
            add_history(line);
        *len = line ? strlen(line) : 0;
        return line;
    }
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\n')
        line[--n] = 0;
    *len = (size_t)n;
    return line;
}

/* Reads the next cell (cell.c's rule: it ends at a blank line, a %% line or the end of input).
 * NULL at the end of input. A cell beyond the code limit is named and skipped. */
static char *next_cell(bool tty, struct cli_cell *cell)
{
    for (;;) {
        size_t len = 0;
        char *line = read_line(tty, cell->len > 0, &len);
        enum cli_cell_feed f = line ? cli_cell_feed(cell, line, len) : CLI_CELL_DONE;
        free(line);
        if (f == CLI_CELL_MORE)
            continue;
        bool dropped = cell->too_big;
        char *code = cli_cell_take(cell);
        if (dropped)
            fprintf(stderr, "plimsoll repl: cell skipped: larger than %u KiB (the daemon's code limit)\n",
                    LIM_CODE_MAX / 1024);
        if (code || !line)
            return code;
    }
}

static int open_session(struct repl *r, const char *owner)
{
    Plimsoll__V1__OpenSessionRequest req = PLIMSOLL__V1__OPEN_SESSION_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.minimum_isolation = (char *)r->floor;
    char *langs[1] = {(char *)r->language};
    req.languages = langs;
    req.n_languages = 1;
    req.owner = (char *)(owner ? owner : "");
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__OpenSessionResponse *resp =
        (void *)post(r, "OpenSession", &req.base, &plimsoll__v1__open_session_response__descriptor, &o, &err_body);
    if (!resp) {
        fprintf(stderr, "plimsoll repl: the open failed (%s): ", cli_verdict_name(o.verdict));
        cli_put_safe(stderr, o.message, "");
        fputc('\n', stderr);
        return o.verdict == CLI_V_REFUSED ? CLI_EXIT_REFUSED : o.verdict == CLI_V_TRANSPORT ? CLI_EXIT_TRANSPORT : CLI_EXIT_SERVER;
    }
    char fp[PLM_HEX_SHA256];
    rec_session_fingerprint(resp->session_id ? resp->session_id : "", fp);
    bool id_ok = resp->session_id && strlen(resp->session_id) == 32 && strspn(resp->session_id, "0123456789abcdef") == 32;
    if (!id_ok || strcmp(fp, resp->session ? resp->session : "") ||
        (r->floor_tier != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(resp->isolation), r->floor_tier))) {
        fprintf(stderr, "plimsoll repl: the open's answer does not check (id, fingerprint or tier)\n");
        return CLI_EXIT_RECORD;
    }
    snprintf(r->id, sizeof r->id, "%s", resp->session_id);
    snprintf(r->fp, sizeof r->fp, "%s", fp);
    fprintf(stderr, "[session %.12s] %s/%s, idle %u ms, expires at %lld ms\n", r->fp, resp->sandbox, resp->isolation,
            resp->idle_timeout_ms, (long long)resp->expires_unix_ms);
    return 0;
}

static int close_session(struct repl *r)
{
    Plimsoll__V1__CloseSessionRequest req = PLIMSOLL__V1__CLOSE_SESSION_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.session_id = r->id;
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__CloseSessionResponse *resp =
        (void *)post(r, "CloseSession", &req.base, &plimsoll__v1__close_session_response__descriptor, &o, &err_body);
    if (!resp) {
        fprintf(stderr, "plimsoll repl: close failed: %s\n", o.code[0] ? o.code : cli_verdict_name(o.verdict));
        return CLI_EXIT_SERVER;
    }
    const char *last = resp->last_record_sha256 ? resp->last_record_sha256 : "";
    if (strcmp(resp->session ? resp->session : "", r->fp) || resp->calls != r->calls || strcmp(last, r->last)) {
        fprintf(stderr, "plimsoll repl: the close summary does not match the chain we saw (%llu calls, server says %llu)\n",
                (unsigned long long)r->calls, (unsigned long long)resp->calls);
        return CLI_EXIT_RECORD;
    }
    const ProtobufCEnumValue *ev =
        protobuf_c_enum_descriptor_get_value(&plimsoll__v1__session_end__descriptor, (int)resp->ended);
    fprintf(stderr, "[session %.12s closed: %s] %llu calls, last record %.12s, chain ok\n", r->fp, ev ? ev->name : "?",
            (unsigned long long)resp->calls, r->last[0] ? r->last : "(none)");
    return 0;
}

int cli_cmd_repl(int argc, char **argv)
{
    struct repl r = {.language = "javascript", .floor = "", .floor_tier = PLM_TIER_UNKNOWN};
    const char *url_flag = NULL, *token_file = NULL, *owner = NULL, *timeout_arg = NULL;
    static const struct option opts[] = {
        {"language", required_argument, NULL, 'l'}, {"min-isolation", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},  {"owner", required_argument, NULL, 'o'},
        {"url", required_argument, NULL, 'u'},      {"token-file", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': r.language = optarg; break;
        case 'i': r.floor = optarg; break;
        case 't': timeout_arg = optarg; break;
        case 'o': owner = optarg; break;
        case 'u': url_flag = optarg; break;
        case 'k': token_file = optarg; break;
        case 'h': cli_usage_repl(stdout); return 0;
        case ':': return cli_usage_error("repl", "option `%s` needs a value", argv[optind - 1]);
        default: return cli_usage_error("repl", "unknown option `%s`", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("repl", "unexpected argument `%s`", argv[optind]);
    if (strcmp(r.language, "javascript") && strcmp(r.language, "python"))
        return cli_usage_error("repl", "--language `%s`: javascript or python", r.language);
    struct plm_err err = {0};
    if (tier_parse_floor(r.floor, &r.floor_tier, &err) < 0)
        return cli_usage_error("repl", "--min-isolation `%s`: must be process, container, kernel or vm", r.floor);
    if (timeout_arg) {
        char *end;
        double s = strtod(timeout_arg, &end);
        if (*end || !(s > 0 && s <= 300))
            return cli_usage_error("repl", "--timeout `%s`: seconds, 0 < S <= 300", timeout_arg);
        r.timeout_ms = (int32_t)(s * 1000);
    }
    char *token = NULL;
    if (cli_token_load(token_file, &token, &err) < 0) {
        fprintf(stderr, "plimsoll repl: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    r.conn = (struct cli_conn){.url = cli_base_url(url_flag), .token = token};
    int rc = open_session(&r, owner);
    if (rc == 0) {
        bool tty = isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
        if (tty)
            stifle_history(1000);
        struct cli_cell cell = {0};
        char *code;
        while (!r.broken && (code = next_cell(tty, &cell))) {
            if (!cli_utf8_valid((const uint8_t *)code, strlen(code))) {
                fputs("plimsoll repl: cell skipped: not valid UTF-8\n", stderr);
            } else {
                int x = run_cell(&r, code);
                if (x == CLI_EXIT_RECORD || x == CLI_EXIT_TRANSPORT)
                    rc = x;
            }
            free(code);
        }
        cli_cell_done(&cell);
        int x = close_session(&r);
        if (rc == 0)
            rc = x;
    }
    cli_token_free(token);
    return rc;
}
