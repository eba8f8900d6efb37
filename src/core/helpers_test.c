/* helpers_test.c: the shared helpers (base64, the capped buffer, whole reads and writes, the
 * arena): RFC 4648 vectors, both alphabets, padding rules, caps at and past the limit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "base64.h"
#include "buf.h"
#include "io.h"
#include "request.h"
#include "unit.h"

static int dec(const char *in, enum b64_mix mix, char *out, size_t *n, size_t *bad)
{
    int rc = b64_decode(in, strlen(in), mix, (uint8_t *)out, n, bad);
    if (rc == 0)
        out[*n] = 0;
    return rc;
}

int main(void)
{
    static const char *vec[][2] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
                                   {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
    char out[64];
    size_t n, bad;
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        size_t len = b64_encode((const uint8_t *)vec[i][0], strlen(vec[i][0]), out, B64_STD, true);
        out[len] = 0;
        CHECK_STR(out, vec[i][1]);
        CHECK(len == b64_encoded_len(strlen(vec[i][0]), true));
        CHECK(dec(vec[i][1], B64_ONE_ALPHABET, out, &n, &bad) == 0 && strcmp(out, vec[i][0]) == 0);
    }
    size_t len = b64_encode((const uint8_t *)"\xfb\xff", 2, out, B64_URL, false);
    out[len] = 0;
    CHECK_STR(out, "-_8");
    CHECK(dec("-_8", B64_ONE_ALPHABET, out, &n, &bad) == 0 && n == 2 && (uint8_t)out[0] == 0xfb);
    CHECK(dec("+_8=", B64_ONE_ALPHABET, out, &n, &bad) < 0 && bad == 0); /* mixed alphabets */
    CHECK(dec("+_8=", B64_ANY_ALPHABET, out, &n, &bad) == 0 && n == 2);
    CHECK(dec("Zm9", B64_ONE_ALPHABET, out, &n, &bad) == 0 && strcmp(out, "fo") == 0); /* unpadded */
    CHECK(dec("Zg=", B64_ONE_ALPHABET, out, &n, &bad) < 0 && bad == SIZE_MAX);
    CHECK(dec("Z", B64_ONE_ALPHABET, out, &n, &bad) < 0 && bad == SIZE_MAX);
    CHECK(dec("Zm 9", B64_ONE_ALPHABET, out, &n, &bad) < 0 && bad == 2);

    struct plm_buf b = {.max = 8};
    CHECK(plm_buf_add(&b, "12345678", 8) && b.len == 8 && b.p[8] == 0);
    CHECK(!plm_buf_add(&b, "9", 1) && b.failed);
    CHECK(plm_buf_take(&b, &n) == NULL && n == 0 && b.max == 8);
    CHECK(plm_buf_reserve(&b, 5) && b.cap == 6); /* the first reservation is exact */
    CHECK(plm_buf_add(&b, "ab", 2) && plm_buf_add(&b, "cde", 3) && b.cap == 6);
    char *t = plm_buf_take(&b, &n);
    CHECK(t && n == 5 && strcmp(t, "abcde") == 0);
    free(t);

    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(plm_write_all(p[1], "hello world", 11, 0) == 0);
    close(p[1]);
    char *all = NULL;
    CHECK(plm_read_all(p[0], 11, &all, &n) == 0 && n == 11 && strcmp(all, "hello world") == 0);
    free(all);
    close(p[0]);
    CHECK(pipe(p) == 0);
    CHECK(plm_write_all(p[1], "hello world", 11, 0) == 0);
    close(p[1]);
    CHECK(plm_read_all(p[0], 10, &all, &n) == -EFBIG);
    close(p[0]);

    struct plm_arena *a = plm_arena_new(100000);
    void *x = plm_arena_alloc(a, 30000), *y = plm_arena_alloc(a, 10);
    CHECK(x && y && ((uintptr_t)y & 15) == 0);
    CHECK(plm_arena_alloc(a, 80000) == NULL && plm_arena_over_limit(a));
    CHECK(plm_arena_used(a) <= 100000);
    plm_arena_free(a);

    struct plm_result r = {.tier = PLM_TIER_PROCESS};
    CHECK(plm_result_stamp(&r, "quickjs", "quickjs:sha256:ab", NULL) == 0);
    CHECK_STR(r.sandbox, "quickjs");
    CHECK_STR(r.isolation, tier_name(PLM_TIER_PROCESS));
    CHECK_STR(r.environment, "quickjs:sha256:ab");
    CHECK_STR(r.software_identity, ""); /* NULL is stated as the empty identity */
    plm_result_done(&r);
    r = (struct plm_result){.tier = PLM_TIER_VM};
    CHECK(plm_result_stamp(&r, "e2b", "e2b-template:t", "") == 0 && r.software_identity &&
          !r.software_identity[0] && strcmp(r.isolation, "vm") == 0);
    /* a second stamp replaces every field (nothing leaks, nothing of the first stays) */
    r.tier = PLM_TIER_CONTAINER;
    CHECK(plm_result_stamp(&r, "docker", "docker-image:sha256:cd", "sw-2") == 0);
    CHECK_STR(r.sandbox, "docker");
    CHECK_STR(r.isolation, "container");
    CHECK_STR(r.environment, "docker-image:sha256:cd");
    CHECK_STR(r.software_identity, "sw-2");
    plm_result_done(&r);
    /* a provider that states no tier fails closed: the answer says unknown, which meets no floor */
    r = (struct plm_result){0};
    CHECK(plm_result_stamp(&r, "quickjs", "quickjs:sha256:ab", NULL) == 0);
    CHECK_STR(r.isolation, "unknown");
    CHECK(!tier_meets(tier_parse(r.isolation), PLM_TIER_PROCESS));
    plm_result_done(&r);
    return unit_done();
}
