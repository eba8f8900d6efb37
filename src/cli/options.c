/* options.c: the command-line rules every subcommand shares, so that --url means one thing and
 * a repeated option is refused the same way in `run`, `project`, `module`, `describe`, `repl` and
 * `mcp`. Owns nothing; optarg and argv stay the caller's. */
#include <getopt.h>

#include "cli.h"

int cli_opt_once(const char *cmd, const struct option *opts, int c, const char **slot)
{
    if (*slot) {
        /* argv cannot name it: with `--opt value` the last word read is the value. */
        const char *name = "?";
        for (; opts && opts->name; opts++)
            if (opts->val == c) {
                name = opts->name;
                break;
            }
        return cli_usage_error(cmd, "--%s given twice", name);
    }
    *slot = optarg;
    return 0;
}

int cli_opt_where(const char *cmd, int c, char **argv, struct cli_where *w)
{
    static const struct option where[] = {CLI_WHERE_OPTIONS, {NULL, 0, NULL, 0}};
    switch (c) {
    case 'u': return cli_opt_once(cmd, where, c, &w->url_flag);
    case 'k': return cli_opt_once(cmd, where, c, &w->token_file);
    case 'b': return cli_opt_once(cmd, where, c, &w->backends);
    case ':': return cli_usage_error(cmd, "option `%s` needs a value", argv[optind - 1]);
    default: return cli_usage_error(cmd, "unknown option `%s`", argv[optind - 1]);
    }
}
