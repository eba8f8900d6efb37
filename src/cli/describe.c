/* describe.c: `plimsoll describe`: what the daemon says it is, with its evidence card.
 * Owns: the command line of `describe` and the decoded DescribeResponse.
 * Trusts: nothing in the answer beyond printing it (escaped); the answer must still be bound to
 * our request id, be a 200 and be application/json, as for Run.
 * Invariant: a protocol other than ours is never silent: a warning and exit 203. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../wire/json_codec.h"
#include "cli.h"

void cli_usage_describe(FILE *f)
{
    fputs("usage: plimsoll describe [--url URL] [--token-file FILE | --backends FILE] [--json]\n"
          "\n"
          "Asks the daemon what it runs: provider, tier, protocol, payload environments, resources,\n"
          "policy and the evidence card behind the tier (each startup check with pass or FAIL).\n"
          "\n"
          "  --url URL          daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE  bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "  --backends FILE    describe every daemon of a backends file (docs/cli.md), each under\n"
          "                     a `== backend NAME ==` line (--json: one object keyed by name)\n"
          "  --json             print the DescribeResponse as proto3 JSON on stdout\n"
          "  -h, --help         this text\n"
          "\n"
          "Exit status: 0; 203 when the daemon serves another protocol than 3 (a warning is\n"
          "printed) or on a transport error; 202 answer not bound; 200/205 error answers (see\n"
          "docs/cli.md); 204 usage error.\n",
          f);
}


static void print_failure(const struct cli_outcome *o)
{
    char reason[32];
    fputs("plimsoll describe: ", stderr);
    switch (o->verdict) {
    case CLI_V_REFUSED:
        cli_reason_name(o->refusal, reason, sizeof reason);
        fprintf(stderr, "refused before dispatch: %s: %s: ", reason, o->code);
        cli_put_safe(stderr, o->message, "");
        break;
    case CLI_V_ERROR:
        fprintf(stderr, "error: %s: ", o->code);
        cli_put_safe(stderr, o->message, "");
        if (o->detail_disregarded)
            fputs(" (not bound to this request; its not-dispatched mark was disregarded)", stderr);
        break;
    default:
        cli_put_safe(stderr, o->message, "");
        break;
    }
    fputc('\n', stderr);
}

/* Every backend of a pool: its Describe, or why it has none. The worst status wins. */
static int describe_pool(struct plc_pool *p, bool json_out)
{
    int status = 0;
    cli_cleanup_json json_t *all = json_out ? json_object() : NULL;
    if (json_out && !all)
        return CLI_EXIT_TRANSPORT;
    for (size_t i = 0; i < p->n; i++) {
        struct cli_outcome o;
        cli_cleanup_pb Plimsoll__V1__DescribeResponse *d = cli_describe_call(&p->b[i].conn, &o);
        if (!json_out) {
            printf("== backend %s (%s) ==\n", p->b[i].name, p->b[i].url);
            fflush(stdout);
        }
        int s = 0;
        if (!d) {
            fprintf(stderr, "backend %s: ", p->b[i].name);
            print_failure(&o);
            s = cli_exit_status(&o, NULL);
        } else if (d->protocol != CLI_PROTOCOL) {
            fprintf(stderr, "backend %s: serves protocol %u; this client speaks %d\n", p->b[i].name, d->protocol,
                    CLI_PROTOCOL);
            s = CLI_EXIT_TRANSPORT;
        }
        if (d && json_out) {
            size_t n = 0;
            cleanup_free char *text = wire_json_encode(&d->base, &n);
            json_t *one = text ? json_loadb(text, n, 0, NULL) : NULL;
            if (!one || json_object_set_new(all, p->b[i].name, one) < 0)
                return CLI_EXIT_TRANSPORT;
        } else if (d) {
            cli_describe_print(stdout, d);
        } else if (json_out && json_object_set_new(all, p->b[i].name, json_null()) < 0) {
            return CLI_EXIT_TRANSPORT;
        }
        if (s && !status)
            status = s;
    }
    if (json_out) {
        json_dumpf(all, stdout, JSON_COMPACT);
        fputc('\n', stdout);
    }
    fflush(stdout);
    return status;
}

int cli_cmd_describe(int argc, char **argv)
{
    struct cli_where w = {0};
    bool json_out = false;
    static const struct option opts[] = {
        CLI_WHERE_OPTIONS,
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c, r;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json_out = true; break;
        case 'h': cli_usage_describe(stdout); return 0;
        default:
            if ((r = cli_opt_where("describe", c, argv, &w)))
                return r;
        }
    }
    if (optind < argc)
        return cli_usage_error("describe", "unexpected argument `%s`", argv[optind]);

    if (w.backends) {
        struct cli_target t = {.where = w};
        r = cli_target_open(&t, "describe");
        if (r == 0)
            r = describe_pool(&t.pool, json_out);
        cli_target_done(&t);
        return r;
    }
    struct plm_err err = {0};
    char *token = NULL;
    if (cli_token_load(w.token_file, &token, &err) < 0) {
        fprintf(stderr, "plimsoll describe: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    struct cli_conn conn = {.url = cli_base_url(w.url_flag), .token = token};
    struct cli_outcome o;
    cli_cleanup_pb Plimsoll__V1__DescribeResponse *d = cli_describe_call(&conn, &o);
    cli_token_free(token);
    if (!d) {
        print_failure(&o);
        return cli_exit_status(&o, NULL);
    }

    if (json_out) {
        size_t n = 0;
        cleanup_free char *text = wire_json_encode(&d->base, &n);
        if (!text) {
            fprintf(stderr, "plimsoll describe: out of memory\n");
            return CLI_EXIT_TRANSPORT;
        }
        fwrite(text, 1, n, stdout);
        fputc('\n', stdout);
    } else {
        cli_describe_print(stdout, d);
    }
    fflush(stdout);
    if (d->protocol != CLI_PROTOCOL) {
        /* The Python client raises ProtocolMismatchError here (wire.md §10): every Run would be
         * refused `unimplemented`, so say it now. */
        fprintf(stderr, "plimsoll describe: warning: the daemon serves protocol %u; this client speaks %d, so "
                        "its runs will be refused\n", d->protocol, CLI_PROTOCOL);
        return CLI_EXIT_TRANSPORT;
    }
    return 0;
}
