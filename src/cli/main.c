/* main.c: `plimsoll`, the command-line client: the command table, its dispatch and the top-level
 * usage.
 * Owns: libcurl's global state for the life of the process.
 * Trusts: nothing; each subcommand parses its own arguments and rejects unknown flags with
 * exit 204 before anything is sent. */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"

static int show_usage(int argc, char **argv);
static int show_version(int argc, char **argv);
static int show_help(int argc, char **argv);

/* The command table: a new command is one row (its run and usage functions live in its own file).
 * Order is the order of `plimsoll --help`; rows without a summary or options (the top-level
 * flags) are dispatched but not listed. */
static const struct cli_command commands[] = {
    {"describe", "show the daemon's provider, tier, protocol, environments, resources, policy\n"
                 "             and evidence card", NULL, cli_cmd_describe, cli_usage_describe},
    {"run", "run one JavaScript snippet and check the answer's record and tier", NULL, cli_cmd_run, cli_usage_run},
    {"project", "run a directory's files with shell steps; bring artifacts back", NULL, cli_cmd_project,
     cli_usage_project},
    {"module", "run rows of parameters through a compiled model; exact doubles back as CSV or JSON", NULL,
     cli_cmd_module, cli_usage_module},
    {"repl", "open a session and run cells in it (JavaScript or Python), checking the chain", NULL, cli_cmd_repl,
     cli_usage_repl},
    {"mcp", "serve the Model Context Protocol on stdio for agent hosts", NULL, cli_cmd_mcp, cli_usage_mcp},
    {"help", NULL, "[COMMAND]", show_help, NULL},
    {"-h", NULL, NULL, show_usage, NULL},
    {"--help", NULL, NULL, show_usage, NULL},
    {"--version", NULL, NULL, show_version, NULL},
};

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

void cli_usage_main(FILE *f)
{
    fputs("usage: plimsoll <command> [options]\n\nCommands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const struct cli_command *c = &commands[i];
        if (c->summary)
            fprintf(f, "  %-10s %s\n", c->name, c->summary);
        else if (c->options)
            fprintf(f, "  %s %s\n", c->name, c->options);
    }
    fputs("\n"
          "Common options: --url URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL "),\n"
          "--token-file FILE (default: the token in $PLIMSOLL_TOKEN), --json. `plimsoll COMMAND --help`\n"
          "for more.\n"
          "\n"
          "Exit status of `run`, `project` and `module`:\n"
          "  0-198  the guest's exit code after a checked run (124: timed out)\n"
          "  199    checked run whose guest exit code is outside 0-198 (the card shows it)\n"
          "  200    refused before dispatch: no code ran\n"
          "  201    evidence mismatch: the answer's tier is below --min-isolation; code may have run\n"
          "  202    record mismatch (digests, fields, result kind) or answer not bound to our\n"
          "         request id; code may have run\n"
          "  203    transport or protocol error (no answer, malformed answer, oversize answer;\n"
          "         `describe`: the daemon serves another protocol)\n"
          "  204    usage error; nothing was sent\n"
          "  205    the daemon answered an error without a not-dispatched mark: code may have run\n"
          "  206    `project`: the run checked but an artifact could not be written into --out\n"
          "\n"
          "See docs/cli.md.\n",
          f);
}

/* -h, --help: the usage on stdout (whatever follows, as before the table). */
static int show_usage(int argc, char **argv)
{
    (void)argc, (void)argv;
    cli_usage_main(stdout);
    return 0;
}

static int show_version(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("plimsoll %s (protocol %d)\n", CLI_VERSION, CLI_PROTOCOL);
    return 0;
}

/* help [COMMAND]: argv[0] is "help". */
static int show_help(int argc, char **argv)
{
    if (argc == 1)
        return show_usage(argc, argv);
    const struct cli_command *c = argc == 2 ? find_command(argv[1]) : NULL;
    if (c && c->usage) {
        c->usage(stdout);
        return 0;
    }
    fprintf(stderr, "plimsoll help: unknown command `%s`\n", argv[1]);
    return CLI_EXIT_USAGE;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage_main(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    const struct cli_command *c = find_command(cmd);
    if (c)
        return c->run(argc - 1, argv + 1);
    if (cmd[0] == '-')
        fprintf(stderr, "plimsoll: unknown option `%s`\n(try `plimsoll --help`)\n", cmd);
    else
        fprintf(stderr, "plimsoll: unknown command `%s`\n(try `plimsoll --help`)\n", cmd);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("plimsoll: libcurl initialisation failed\n", stderr);
        return CLI_EXIT_TRANSPORT;
    }
    int status = dispatch(argc, argv);
    curl_global_cleanup();
    return status;
}
