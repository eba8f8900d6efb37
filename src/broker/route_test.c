/* route_test.c: route patterns and the raw-target match (providers.md §8 items 51-54, 60). */
#include <string.h>

#include "route.h"
#include "unit.h"

static bool parse_ok(const char *spec)
{
    struct brk_route r;
    struct plm_err err = {0};
    int rc = brk_route_parse(spec, strlen(spec), true, &r, &err);
    brk_route_done(&r);
    return rc == 0;
}

static const char *parse_msg(const char *spec)
{
    static struct plm_err err;
    struct brk_route r;
    memset(&err, 0, sizeof err);
    brk_route_parse(spec, strlen(spec), true, &r, &err);
    brk_route_done(&r);
    return err.msg;
}

/* The sample allowlist of item 52. */
static struct brk_route sample[3];

static long find(const char *method, const char *target)
{
    return brk_route_find(sample, 3, method, strlen(method), target, strlen(target));
}

int main(void)
{
    /* item 51: refused routes */
    CHECK(!parse_ok("TRACE /v1/x"));
    CHECK(!parse_ok(" GET /v1/x"));
    CHECK(!parse_ok("GET relative"));
    CHECK(!parse_ok("GET /v1//x"));
    CHECK(!parse_ok("GET /v1/../admin"));
    CHECK(!parse_ok("GET /v1/a*b"));
    CHECK(!parse_ok("GET /v1/%61"));
    CHECK(!parse_ok("GET /v1/x?admin=1"));
    CHECK(!parse_ok("GET /v1\\admin"));
    CHECK(!parse_ok("GET /v1/has space"));
    CHECK(!parse_ok("GET /v1/caf\xc3\xa9"));
    CHECK(!parse_ok("GET /v1/x;jsessionid=1"));
    CHECK(!parse_ok("GET /v1/.../x"));
    CHECK(!parse_ok("GET /v1/./x"));
    CHECK(!parse_ok("GET /v1/x/"));
    CHECK(!parse_ok("GET /v1/x#frag"));
    CHECK(!parse_ok("GET /v1/[x]"));
    CHECK(!parse_ok("GET /v1/it's"));
    CHECK(!parse_ok("GET /v1/a\nb"));
    CHECK(!parse_ok("GET"));
    CHECK(!parse_ok("GET  /v1/x"));
    CHECK(!parse_ok("GET /v1/x "));
    CHECK(!parse_ok(""));
    /* accepted */
    CHECK(parse_ok("get /v1/things/*"));
    CHECK(parse_ok("PATCH /v1/a-b_c.d~e/$&+,:=@/*"));
    CHECK(parse_ok("DELETE /"));
    CHECK(parse_ok("GET /*/*"));
    CHECK_STR(parse_msg("TRACE /v1/x"), "method \"TRACE\" must be one of GET, PUT, POST, DELETE or PATCH");
    CHECK_STR(parse_msg("GET /v1/a*b"), "path a \"*\" must fill a whole segment");
    CHECK_STR(parse_msg("GET relative"), "path must start with \"/\"");
    CHECK_STR(parse_msg("GET /v1/%61"), "path must not contain percent-encoding (\"%\")");

    struct brk_route r;
    struct plm_err err = {0};
    CHECK(brk_route_parse("get /v1/things/*", 16, true, &r, &err) == 0);
    CHECK(r.method == BRK_M_GET && r.segments == 3 && r.wildcard);
    CHECK_STR(r.path, "/v1/things/*");
    brk_route_done(&r);
    CHECK(brk_route_parse("GET /health/*", 13, false, &r, &err) < 0);
    CHECK_STR(err.msg, "path must be concrete (no \"*\")");

    /* item 52: the sample allowlist */
    const char *specs[] = {"PUT /v1/lights/*/on", "GET /v1/lights", "GET /v1/lights/*"};
    for (int i = 0; i < 3; i++)
        CHECK(brk_route_parse(specs[i], strlen(specs[i]), true, &sample[i], &err) == 0);
    CHECK(find("PUT", "/v1/lights/abc/on") == 0);
    CHECK(find("get", "/v1/lights") == 1);
    CHECK(find("gEt", "/v1/lights/abc") == 2);
    CHECK(find("POST", "/v1/lights/abc/on") < 0); /* wrong method */
    CHECK(find("GET", "/v1/doors") < 0);          /* unlisted */
    CHECK(find("PUT", "/v1/lights/on") < 0);      /* wildcard needs a segment */
    CHECK(find("PUT", "/v1/lights//on") < 0);     /* empty segment */
    CHECK(find("PUT", "/v1/lights/a/b/on") < 0);  /* too many segments */
    CHECK(find("PUT", "/v1/lights/../on") < 0);
    CHECK(find("PUT", "/v1/lights/./on") < 0);
    CHECK(find("GET", "/v1/lights/..") < 0);
    CHECK(find("GET", "/v1/lights/\\") < 0);
    CHECK(find("GET", "/v1/lights/a\nb") < 0);
    CHECK(find("GET", "/v1/lights/..;") < 0);
    CHECK(find("GET", "/v1/lights/abc;x=1") < 0);
    CHECK(find("GET", "/v1/lights/...") < 0);
    CHECK(find("GET", "/v1/lights/") < 0); /* trailing slash: empty segment */
    CHECK(find("GET ", "/v1/lights") < 0); /* method with whitespace */
    CHECK(find("TRACE", "/v1/lights") < 0);
    CHECK(find("", "/v1/lights") < 0);
    CHECK(find("GET", "") < 0);
    CHECK(find("GET", "v1/lights") < 0);
    CHECK(find("GET", "http://evil/v1/lights") < 0); /* absolute-form */
    CHECK(find("GET", "/V1/lights") < 0);            /* paths are case-sensitive */

    /* item 53: encoded bypasses, query and fragment */
    CHECK(find("GET", "/v1/lights/a%2fb") < 0);
    CHECK(find("GET", "/v1/lights/%2e%2e") < 0);
    CHECK(find("GET", "/v1/lights/%2E%2E") < 0);
    CHECK(find("GET", "%2fv1/lights") < 0);
    CHECK(find("GET", "/v1/lights/%zz") < 0);
    CHECK(find("GET", "/v1/lights/abc?x=1") < 0);
    CHECK(find("GET", "/v1/lights/abc#f") < 0);
    CHECK(find("GET", "/v1/lights?") < 0);

    /* item 60: the ten targets (against a route that would otherwise match) */
    const char *ten[] = {"/v1/lights/a?b",         "/v1/lights/a#b", "/v1/lights/%78",  "/v1/lights/%2e%2e",
                         "/v1/lights/..",          "/v1//lights",    "/v1/lights/a\\b", "/v1/lights/a b",
                         "/v1/lights/caf\xc3\xa9", "/v1/lights/[x]"};
    for (int i = 0; i < 10; i++)
        CHECK(find("GET", ten[i]) < 0);

    /* a target over the cap is refused even if it would match */
    static char longt[BRK_TARGET_MAX + 16];
    memcpy(longt, "/v1/lights/", 11);
    memset(longt + 11, 'a', BRK_TARGET_MAX);
    CHECK(find("GET", longt) < 0);
    longt[BRK_TARGET_MAX] = '\0';
    CHECK(find("GET", longt) == 2);

    /* item 54: an empty allowlist denies everything */
    CHECK(brk_route_find(NULL, 0, "GET", 3, "/v1/lights", 10) < 0);

    /* the root */
    struct brk_route root;
    CHECK(brk_route_parse("GET /", 5, true, &root, &err) == 0);
    CHECK(brk_route_find(&root, 1, "GET", 3, "/", 1) == 0);
    CHECK(brk_route_find(&root, 1, "GET", 3, "/x", 2) < 0);
    brk_route_done(&root);
    struct brk_route star;
    CHECK(brk_route_parse("GET /*", 6, true, &star, &err) == 0);
    CHECK(brk_route_find(&star, 1, "GET", 3, "/", 1) < 0); /* "*" never matches empty */
    CHECK(brk_route_find(&star, 1, "GET", 3, "/x", 2) == 0);
    CHECK(brk_route_find(&star, 1, "GET", 3, "/*", 2) < 0); /* a literal "*" is not canonical */
    brk_route_done(&star);

    for (int i = 0; i < 3; i++)
        brk_route_done(&sample[i]);
    return unit_done();
}
