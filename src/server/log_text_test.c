/* log_text_test.c: logfmt lines (log_text.c): order, quoting, and outside strings that try to end
 * the line or forge a pair. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "log_text.h"
#include "unit.h"

static char *line(json_t *o)
{
    char *s = log_text_line(o);
    json_decref(o);
    return s;
}

int main(void)
{
    char *s = line(json_pack("{s:s, s:s, s:s, s:I, s:b, s:n}", "ts", "2026-12-03T15:00:00.000000Z", "level", "info",
                             "event", "listening", "port", (json_int_t)8746, "ok", 1, "none"));
    CHECK_STR(s, "ts=2026-12-03T15:00:00.000000Z level=info event=listening port=8746 ok=true none=null");
    free(s);

    /* a caller-chosen string with a newline, a quote, a backslash, '=' and a space */
    s = line(json_pack("{s:s, s:s}", "event", "run", "caller", "x\nts=forged level=error \"\\ =\x01\x7f"));
    CHECK_STR(s, "event=run caller=\"x\\nts=forged level=error \\\"\\\\ =\\x01\\x7f\"");
    CHECK(s && !strchr(s, '\n'));
    free(s);

    s = line(json_pack("{s:s, s:s, s:f}", "empty", "", "utf8", "caf\xc3\xa9", "r", 0.5));
    CHECK_STR(s, "empty=\"\" utf8=caf\xc3\xa9 r=0.5");
    free(s);

    s = line(json_pack("{s:{s:i}, s:[i,i]}", "obj", "a", 1, "arr", 1, 2));
    CHECK_STR(s, "obj=\"{\\\"a\\\":1}\" arr=[1,2]");
    free(s);

    /* past the cap: no line at all rather than a cut one */
    char *big = malloc(LOG_TEXT_MAX + 16);
    memset(big, 'a', LOG_TEXT_MAX + 15);
    big[LOG_TEXT_MAX + 15] = 0;
    s = line(json_pack("{s:s}", "detail", big));
    CHECK(s == NULL);
    free(big);
    return unit_done();
}
