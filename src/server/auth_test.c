/* auth_test.c: the three modes, bearer parsing, scopes and the clients file's strictness. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "unit.h"

static const char *write_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/plm-auth-test-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void hex_sha(const char *tok, char out[65])
{
    unsigned char d[32];
    SHA256((const unsigned char *)tok, strlen(tok), d);
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

int main(void)
{
    struct plm_err err = {0};
    struct principal p;
    struct auth *a = auth_new(NULL, NULL, &err);
    CHECK(a && auth_mode(a) == AUTH_OPEN);
    CHECK(auth_authenticate(a, NULL, 0, &p, &err) == 0 && p.may_run && p.id[0] == 0);
    auth_free(a);

    CHECK(auth_new(NULL, "short", &err) == NULL && strstr(err.msg, "PLIMSOLL_TOKEN"));
    const char *tok = "0123456789abcdef0123456789abcdef-token";
    a = auth_new(NULL, tok, &err);
    CHECK(a && auth_mode(a) == AUTH_TOKEN);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "Bearer %s", tok);
    CHECK(auth_authenticate(a, hdr, 1, &p, &err) == 0 && strcmp(p.id, "static") == 0);
    snprintf(hdr, sizeof hdr, "bEaReR   %s  ", tok);
    CHECK(auth_authenticate(a, hdr, 1, &p, &err) == 0);
    CHECK(auth_authenticate(a, hdr, 2, &p, &err) < 0); /* two Authorization headers */
    CHECK(auth_authenticate(a, NULL, 0, &p, &err) < 0 && err.kind == PLM_E_UNAUTHENTICATED &&
          err.refusal == PLM_REFUSAL_PERMISSION && strcmp(err.msg, "missing bearer token") == 0);
    CHECK(auth_authenticate(a, "Bearer", 1, &p, &err) < 0);
    CHECK(auth_authenticate(a, "Basic abc", 1, &p, &err) < 0);
    snprintf(hdr, sizeof hdr, "Bearer %s extra", tok);
    CHECK(auth_authenticate(a, hdr, 1, &p, &err) < 0 && strcmp(err.msg, "missing bearer token") == 0);
    CHECK(auth_authenticate(a, "Bearer wrong-token", 1, &p, &err) < 0 && strcmp(err.msg, "invalid or expired token") == 0);
    auth_free(a);

    char h1[65], h2[65], text[512];
    hex_sha("alice-token", h1);
    hex_sha("bob-token", h2);
    snprintf(text, sizeof text,
             "{\"clients\":[{\"id\":\"alice\",\"token_sha256\":\"%s\",\"scopes\":[\"code:run\"]},"
             "{\"id\":\"bob\",\"token_sha256\":\"%s\",\"scopes\":[\"read\"]}]}", h1, h2);
    a = auth_new(write_file(text), "ignored-because-clients-file-wins-xxxxxxxx", &err);
    CHECK(a && auth_mode(a) == AUTH_CLIENTS && auth_client_count(a) == 2);
    CHECK(auth_authenticate(a, "Bearer alice-token", 1, &p, &err) == 0 && !strcmp(p.id, "alice") && p.may_run);
    CHECK(auth_require_run_scope(&p, &err) == 0);
    CHECK(auth_authenticate(a, "Bearer bob-token", 1, &p, &err) == 0 && !p.may_run);
    CHECK(auth_require_run_scope(&p, &err) < 0 && err.kind == PLM_E_PERMISSION &&
          strcmp(err.msg, "token lacks required scope \"code:run\"") == 0);
    CHECK(auth_authenticate(a, "Bearer carol-token", 1, &p, &err) < 0);
    auth_free(a);

    const char *bad[] = {
        "{\"clients\":[]}",
        "{\"clients\":[{\"id\":\"*\",\"token_sha256\":\"%s\",\"scopes\":[\"code:run\"]}]}",
        "{\"clients\":[{\"id\":\" a\",\"token_sha256\":\"%s\",\"scopes\":[\"code:run\"]}]}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[]}]}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"code run\"]}]}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\",\"x\"]}]}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"],\"extra\":1}]}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]}],\"more\":1}",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]}]} trailing",
        "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"ABC\",\"scopes\":[\"x\"]}]}%s",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char t[512];
        const char *at = strstr(bad[i], "%s");
        /* splice the digest in by hand: the table is data, not a format string */
        if (at)
            snprintf(t, sizeof t, "%.*s%s%s", (int)(at - bad[i]), bad[i], h1, at + 2);
        else
            snprintf(t, sizeof t, "%s", bad[i]);
        struct auth *x = auth_new(write_file(t), NULL, &err);
        CHECK(x == NULL && strstr(err.msg, "PLIMSOLL_CLIENTS_FILE"));
        auth_free(x);
    }
    snprintf(text, sizeof text,
             "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]},"
             "{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]}]}", h1, h2);
    CHECK(auth_new(write_file(text), NULL, &err) == NULL && strstr(err.msg, "duplicate id"));
    snprintf(text, sizeof text,
             "{\"clients\":[{\"id\":\"a\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]},"
             "{\"id\":\"b\",\"token_sha256\":\"%s\",\"scopes\":[\"x\"]}]}", h1, h1);
    CHECK(auth_new(write_file(text), NULL, &err) == NULL && strstr(err.msg, "duplicate token_sha256"));
    unlink(write_file(""));
    return unit_done();
}
