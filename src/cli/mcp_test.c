/* mcp_test.c: the MCP session without a daemon: bounded line reads over a pipe, and the JSON-RPC
 * rules (what is answered, with which id and code, and what is not). */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"
#include "unit.h"

struct feed {
    int fd;
    const char *data;
    size_t len;
};

static void *writer(void *arg)
{
    struct feed *f = arg;
    size_t off = 0;
    while (off < f->len) {
        ssize_t n = write(f->fd, f->data + off, f->len - off > 7000 ? 7000 : f->len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    close(f->fd);
    return NULL;
}

static void test_reader(void)
{
    size_t big = MCP_LINE_MAX + 100;
    size_t total = big + 64;
    char *data = malloc(total);
    CHECK(data != NULL);
    if (!data)
        return;
    size_t n = 0;
    n += (size_t)sprintf(data + n, "one\n\ntwo\r\n");
    memset(data + n, 'x', big);
    n += big;
    n += (size_t)sprintf(data + n, "\nthree\nlast");
    int p[2];
    CHECK(pipe(p) == 0);
    struct feed f = {p[1], data, n};
    pthread_t t;
    pthread_create(&t, NULL, writer, &f);
    struct mcp_reader r;
    mcp_reader_init(&r, p[0]);
    const char *line;
    size_t len;
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_OK && len == 3 && memcmp(line, "one", 3) == 0);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_OK && len == 0);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_OK && len == 4 && memcmp(line, "two\r", 4) == 0);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_TOO_LONG);
    CHECK(r.cap <= MCP_LINE_MAX + 2 * 65536); /* never buffered the whole overlong line */
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_OK && len == 5 && strcmp(line, "three") == 0);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_OK && len == 4 && strcmp(line, "last") == 0);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_EOF);
    CHECK(mcp_read_line(&r, &line, &len) == MCP_LINE_EOF);
    mcp_reader_done(&r);
    pthread_join(t, NULL);
    close(p[0]);
    free(data);
}

static json_t *handle(struct mcp_server *s, const char *text)
{
    json_t *m = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    if (!m)
        return NULL;
    json_t *a = mcp_handle(s, m);
    json_decref(m);
    return a;
}

static int error_code(const json_t *a)
{
    return (int)json_integer_value(json_object_get(json_object_get(a, "error"), "code"));
}

static void test_session(void)
{
    /* An address that nothing can reach is never used: only argument errors are called. */
    struct mcp_server s = {.url = "http://127.0.0.1:1"};
    json_t *a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    CHECK(error_code(a) == -32600);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2024-11-05\"}}");
    CHECK_STR(json_string_value(json_object_get(json_object_get(a, "result"), "protocolVersion")), "2024-11-05");
    CHECK_STR(json_string_value(json_object_get(a, "id")), "i");
    CHECK(s.initialized);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"3000-01-01\"}}");
    CHECK_STR(json_string_value(json_object_get(json_object_get(a, "result"), "protocolVersion")), "2025-11-25");
    json_decref(a);
    CHECK(handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") == NULL);
    CHECK(handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\"}") == NULL); /* a notification */
    CHECK(handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}") == NULL);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    CHECK(json_array_size(json_object_get(json_object_get(a, "result"), "tools")) == 2);
    json_decref(a);
    a = handle(&s, "[1]");
    CHECK(error_code(a) == -32600 && json_is_null(json_object_get(a, "id")));
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
    CHECK(error_code(a) == -32600 && json_is_null(json_object_get(a, "id")));
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}");
    CHECK(error_code(a) == -32600);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":7}");
    CHECK(error_code(a) == -32600 && json_integer_value(json_object_get(a, "id")) == 4);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"x\",\"params\":3}");
    CHECK(error_code(a) == -32602);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/list\"}");
    CHECK(error_code(a) == -32601);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
    CHECK(error_code(a) == -32602);
    json_decref(a);
    a = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_javascript\","
                   "\"arguments\":[]}}");
    CHECK(error_code(a) == -32602);
    json_decref(a);
    const char *bad[] = {
        "{}", "{\"code\":1}", "{\"code\":\"1\",\"timeout\":-1}", "{\"code\":\"1\",\"timeout\":300.0001}",
        "{\"code\":\"1\",\"min_isolation\":\"none\"}", "{\"code\":\"1\",\"min_isolation\":\"\"}",
        "{\"code\":\"1\",\"min_isolation\":5}", "{\"code\":\"1\",\"x\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[256];
        snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
                                  "\"run_javascript\",\"arguments\":%s}}", bad[i]);
        a = handle(&s, msg);
        json_t *res = json_object_get(a, "result");
        const char *text = json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
        CHECK(json_is_true(json_object_get(res, "isError")) && text && strstr(text, "no code ran"));
        json_decref(a);
    }
}

/* Every tool refuses a key it does not take and names it (plain keys only) with the keys it takes. */
static void test_stray_arguments(void)
{
    static const char *const known[] = {"code", "timeout", NULL};
    json_t *args = json_loads("{\"code\":\"1\",\"timeout\":2}", 0, NULL);
    CHECK(mcp_only_arguments(args, known) == NULL);
    json_decref(args);
    const char *cases[][2] = {
        {"{\"code\":\"1\",\"timout\":2}", "unknown argument `timout` (expected code, timeout)"},
        {"{\"a b\":1}", "unknown argument (expected code, timeout)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        args = json_loads(cases[i][0], 0, NULL);
        json_t *res = mcp_only_arguments(args, known);
        const char *text = json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
        CHECK(res && json_is_true(json_object_get(res, "isError")) && text && strstr(text, cases[i][1]) &&
              strstr(text, "no code ran"));
        json_decref(res);
        json_decref(args);
    }
}

int main(void)
{
    test_reader();
    test_session();
    test_stray_arguments();
    return unit_done();
}
