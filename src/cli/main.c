/* main.c: `plimsoll`, the command-line client: subcommand dispatch and the top-level usage.
 * Owns: libcurl's global state for the life of the process.
 * Trusts: nothing; each subcommand parses its own arguments and rejects unknown flags with
 * exit 204 before anything is sent. */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"

void cli_usage_main(FILE *f)
{
    fputs("usage: plimsoll <command> [options]\n"
          "\n"
          "Commands:\n"
          "  describe   show the daemon's provider, tier, protocol, environments, resources,\n"
          "             policy and evidence card\n"
          "  run        run one JavaScript snippet and check the answer's record and tier\n"
          "  mcp        serve the Model Context Protocol on stdio for agent hosts\n"
          "  help [COMMAND]\n"
          "\n"
          "Common options: --url URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL "),\n"
          "--token-file FILE (default $PLIMSOLL_TOKEN), --json. `plimsoll COMMAND --help` for more.\n"
          "\n"
          "Exit status of `run`:\n"
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
          "\n"
          "See docs/cli.md.\n",
          f);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage_main(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        cli_usage_main(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("plimsoll %s (protocol %d)\n", CLI_VERSION, CLI_PROTOCOL);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc == 2) {
            cli_usage_main(stdout);
            return 0;
        }
        if (argc == 3 && strcmp(argv[2], "run") == 0) {
            cli_usage_run(stdout);
            return 0;
        }
        if (argc == 3 && strcmp(argv[2], "mcp") == 0) {
            cli_usage_mcp(stdout);
            return 0;
        }
        if (argc == 3 && strcmp(argv[2], "describe") == 0) {
            cli_usage_describe(stdout);
            return 0;
        }
        fprintf(stderr, "plimsoll help: unknown command `%s`\n", argv[2]);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "describe") == 0)
        return cli_cmd_describe(argc - 1, argv + 1);
    if (strcmp(cmd, "repl") == 0)
        return cli_cmd_repl(argc - 1, argv + 1);
    if (strcmp(cmd, "mcp") == 0)
        return cli_cmd_mcp(argc - 1, argv + 1);
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
