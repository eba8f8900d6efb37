/* fuzz_mcp.c: libFuzzer target for `plimsoll mcp`'s input side: the bounded line reader
 * (src/cli/mcp_read.c) and the JSON-RPC session rules (src/cli/mcp.c) over host bytes.
 * The tools are replaced by fixed answers here (they would call the daemon); their argument
 * checks are covered by cli_mcp and the black-box test. Traps when an answer is not a JSON-RPC
 * 2.0 object with exactly one of result/error, or when it would not be one line. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/cli/mcp.h"

const char *cli_base_url(const char *flag) { return flag ? flag : "http://127.0.0.1:1"; }
json_t *mcp_tools_list(const struct mcp_server *s)
{
    (void)s;
    return json_pack("{s:[]}", "tools");
}
void mcp_sessions_close_all(struct mcp_server *s) { (void)s; }
/* --backends is never given here: the pool is never loaded (the backends file parser is
 * libplimsoll's, src/lib/backends.c, covered by lib_placement). */
void plc_pool_init(struct plc_pool *p) { (void)p; }
int plc_pool_load(struct plc_pool *p, const char *path, struct plm_err *err)
{
    (void)p, (void)path, (void)err;
    return -1;
}
void plc_pool_done(struct plc_pool *p) { (void)p; }
json_t *mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, int *rpc_code,
                       const char **rpc_msg)
{
    (void)s;
    (void)args;
    if (strcmp(name, "run_javascript") == 0)
        return json_pack("{s:[], s:b}", "content", "isError", 1);
    *rpc_code = -32602;
    *rpc_msg = "unknown tool";
    return NULL;
}

static void check_answer(json_t *a)
{
    if (!json_is_object(a) || !json_is_string(json_object_get(a, "jsonrpc")))
        abort();
    if (!!json_object_get(a, "result") == !!json_object_get(a, "error"))
        abort();
    char *text = json_dumps(a, JSON_COMPACT);
    if (!text || strchr(text, '\n'))
        abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("mcp", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    lseek(fd, 0, SEEK_SET);
    struct mcp_server s = {.url = "http://127.0.0.1:1"};
    struct mcp_reader r;
    mcp_reader_init(&r, fd);
    for (;;) {
        const char *line;
        size_t len;
        enum mcp_line got = mcp_read_line(&r, &line, &len);
        if (got == MCP_LINE_EOF || got == MCP_LINE_ERROR)
            break;
        if (got != MCP_LINE_OK)
            continue;
        json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        if (!msg)
            continue;
        json_t *a = mcp_handle(&s, msg);
        if (a)
            check_answer(a);
        json_decref(a);
        json_decref(msg);
    }
    mcp_reader_done(&r);
    close(fd);
    return 0;
}
