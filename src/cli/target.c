/* target.c: where a command sends: one daemon (--url, --token-file) or a pool of them placed by
 * libplimsoll (--backends FILE; docs/cli.md). Owns the token or the pool and the choice the card
 * prints. */
#include <string.h>

#include "cli.h"

int cli_target_open(struct cli_target *t, const char *cmd)
{
    struct plm_err err = {0};
    if (t->where.backends && (t->where.url_flag || t->where.token_file))
        return cli_usage_error(cmd, "%s", "--backends names every daemon with its own token: not with --url or --token-file");
    if (t->where.backends) {
        plc_pool_init(&t->pool);
        if (plc_pool_load(&t->pool, t->where.backends, &err) < 0) {
            fprintf(stderr, "plimsoll %s: %s\n", cmd, err.msg);
            return CLI_EXIT_USAGE;
        }
        t->pooled = true;
        return 0;
    }
    if (cli_token_load(t->where.token_file, &t->token, &err) < 0) {
        fprintf(stderr, "plimsoll %s: %s\n", cmd, err.msg);
        return CLI_EXIT_USAGE;
    }
    t->conn = (struct cli_conn){.url = cli_base_url(t->where.url_flag), .token = t->token};
    return 0;
}

int cli_target_run(struct cli_target *t, enum plc_kind kind, const char *floor, bool grant, plc_send_fn send,
                   void *ctx, struct cli_run_call *call)
{
    if (!t->pooled)
        return send(&t->conn, floor, ctx, call);
    struct plc_requirement req = {.grant_profile = grant};
    int r = plc_run(&t->pool, kind, floor, &req, send, ctx, call, &t->choice);
    call->rep.choice = &t->choice;
    /* -1 with a request refusal: a floor that is no floor (judged by every caller before this). */
    return r < 0 && call->o.refusal == PLM_REFUSAL_REQUEST ? -1 : 0;
}

void cli_target_done(struct cli_target *t)
{
    cli_token_free(t->token);
    t->token = NULL;
    if (t->pooled)
        plc_pool_done(&t->pool);
    t->pooled = false;
}
