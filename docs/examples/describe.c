/* describe.c: libplimsoll in a few lines (docs/library.md). Describes the daemon at URL, runs one
 * snippet there, and asks for a floor above what it states to show a refusal, which is a different
 * outcome from an evidence mismatch: a refusal proves nothing ran.
 *
 *   cc describe.c $(pkg-config --cflags --libs plimsoll) -o describe
 *   ./describe http://127.0.0.1:8746 [TOKEN_FILE]
 */
#include <plimsoll.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [TOKEN_FILE]\n", argv[0]);
        return 2;
    }
    char err[512], *token = NULL;
    if (argc == 3 && plimsoll_token_load(argv[2], &token, err, sizeof err) < 0) {
        fprintf(stderr, "token: %s\n", err);
        return 2;
    }
    plimsoll_client *c = plimsoll_client_new(argv[1], token, NULL, err, sizeof err);
    plimsoll_token_free(token); /* the client keeps its own copy */
    if (!c) {
        fprintf(stderr, "client: %s\n", err);
        return 2;
    }

    plimsoll_info *info = NULL;
    plimsoll_result *res = NULL;
    if (plimsoll_describe(c, 0, &info, &res) != PLIMSOLL_OK) {
        fprintf(stderr, "describe: %s\n", plimsoll_result_message(res));
        plimsoll_result_free(res);
        plimsoll_client_free(c);
        return 1;
    }
    plimsoll_result_free(res);
    printf("provider %s isolation %s protocol %u sessions %s\n", plimsoll_info_provider(info),
           plimsoll_info_isolation(info), plimsoll_info_protocol(info),
           plimsoll_info_supports(info, "session") ? "yes" : "no");
    plimsoll_info_free(info);

    plimsoll_snippet s = {.code = "console.log(6 * 7)", .minimum_isolation = "process"};
    plimsoll_status st = plimsoll_run_snippet(c, &s, NULL, &res);
    size_t n = 0;
    const uint8_t *out = plimsoll_result_stdout(res, &n);
    printf("run: %s, stdout %.*s", plimsoll_status_name(st), (int)n, out ? (const char *)out : "");
    printf("record %.12s\n", plimsoll_result_record_sha256(res) ? plimsoll_result_record_sha256(res) : "-");
    plimsoll_result_free(res);

    s.minimum_isolation = "vm";
    st = plimsoll_run_snippet(c, &s, NULL, &res);
    printf("vm floor: %s (%s)\n", plimsoll_status_name(st),
           plimsoll_result_refusal(res) ? plimsoll_result_refusal(res) : plimsoll_result_message(res));
    plimsoll_result_free(res);
    plimsoll_client_free(c);
    return 0;
}
