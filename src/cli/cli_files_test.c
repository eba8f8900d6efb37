/* cli_files_test.c: the local parsing of `plimsoll project` (project_files.c: the directory walk,
 * --out, artifact paths) and of `plimsoll repl` (cell.c), and the grant name check. Each case
 * builds its own tree under a fresh mkdtemp directory and removes it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/limits.h"
#include "cli.h"
#include "unit.h"

static char root[64];

static void put(const char *rel, const char *data, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (!f) {
        CHECK(!"fopen");
        return;
    }
    fwrite(data, 1, len, f);
    fclose(f);
}

static void sub(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    CHECK(mkdir(p, 0755) == 0);
}

static void link_to(const char *target, const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    CHECK(symlink(target, p) == 0);
}

static void rm_rf(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

static void fresh(void)
{
    snprintf(root, sizeof root, "/tmp/plimsoll-cli-test.XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    sub("p");
}

static int read_p(struct cli_project_files *f, char *why, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/p", root);
    return cli_project_read_dir(p, f, why, n);
}

static void test_read_dir(void)
{
    char why[512];
    struct cli_project_files f;
    fresh();
    put("p/b.js", "b", 1);
    sub("p/a");
    put("p/a/z.txt", "zz", 2);
    link_to("../b.js", "p/a/link"); /* inside: sent as the file it names */
    CHECK(read_p(&f, why, sizeof why) == 0);
    CHECK(f.n == 3);
    if (f.n == 3) {
        CHECK_STR(f.paths[0], "a/link"); /* byte order, directories recursed in place */
        CHECK_STR(f.contents[0], "b");
        CHECK_STR(f.paths[1], "a/z.txt");
        CHECK_STR(f.paths[2], "b.js");
        CHECK(f.total == 4);
    }
    cli_project_files_done(&f);

    link_to("/etc/passwd", "p/escape"); /* outside: refused, named */
    CHECK(read_p(&f, why, sizeof why) < 0);
    CHECK(strstr(why, "`escape` points outside") != NULL);
    CHECK(f.n == 0 && f.paths == NULL);
    rm_rf();

    fresh();
    link_to("..", "p/up"); /* a directory link, even one leading out, is never followed */
    CHECK(read_p(&f, why, sizeof why) < 0);
    CHECK(strstr(why, "`up`") != NULL);
    rm_rf();

    fresh();
    sub("p/d");
    link_to(".", "p/d/self"); /* a loop inside the tree: refused, not walked */
    CHECK(read_p(&f, why, sizeof why) < 0);
    CHECK(strstr(why, "directory links are not followed") != NULL);
    rm_rf();

    fresh();
    put("p/bin", "a\0b", 3);
    CHECK(read_p(&f, why, sizeof why) < 0 && strstr(why, "not UTF-8 text") != NULL);
    put("p/bin", "\xff\xfe", 2);
    CHECK(read_p(&f, why, sizeof why) < 0 && strstr(why, "`bin`") != NULL);
    rm_rf();

    fresh();
    char p[256];
    snprintf(p, sizeof p, "%s/p/fifo", root);
    CHECK(mkfifo(p, 0600) == 0); /* refused without opening (which would block) */
    CHECK(read_p(&f, why, sizeof why) < 0 && strstr(why, "not a regular file") != NULL);
    rm_rf();

    fresh();
    for (int i = 0; i <= LIM_FILES_MAX; i++) {
        char name[32];
        snprintf(name, sizeof name, "p/f%03d", i);
        put(name, "x", 1);
    }
    CHECK(read_p(&f, why, sizeof why) < 0 && strstr(why, "more than 200 files") != NULL);
    rm_rf();

    fresh();
    char *big = malloc(LIM_FILES_TOTAL_MAX / 2 + 1);
    if (big) {
        memset(big, 'a', LIM_FILES_TOTAL_MAX / 2 + 1);
        put("p/one", big, LIM_FILES_TOTAL_MAX / 2);
        put("p/two", big, LIM_FILES_TOTAL_MAX / 2 + 1); /* one byte over the total */
        free(big);
    }
    CHECK(read_p(&f, why, sizeof why) < 0 && strstr(why, "4 MiB") != NULL);
    rm_rf();

    CHECK(cli_project_read_dir("/nonexistent/plimsoll", &f, why, sizeof why) < 0);
}

static void test_out_and_artifacts(void)
{
    char why[256], p[256];
    bool created = false;
    fresh();
    snprintf(p, sizeof p, "%s/out", root);
    int fd = cli_out_prepare(p, &created, why, sizeof why);
    CHECK(fd >= 0 && created);
    CHECK(cli_artifact_write(fd, "d/e/x.bin", (const uint8_t *)"\0\1\xff", 3, why, sizeof why) == 0);
    struct stat st;
    snprintf(p, sizeof p, "%s/out/d/e/x.bin", root);
    CHECK(stat(p, &st) == 0 && st.st_size == 3);
    /* never overwritten, never through a symlink, never outside */
    CHECK(cli_artifact_write(fd, "d/e/x.bin", (const uint8_t *)"y", 1, why, sizeof why) < 0);
    CHECK(strstr(why, "already exists") != NULL);
    CHECK(stat(p, &st) == 0 && st.st_size == 3);
    link_to("/tmp", "out/esc");
    CHECK(cli_artifact_write(fd, "esc/x", (const uint8_t *)"y", 1, why, sizeof why) < 0);
    link_to("/nonexistent-plimsoll", "out/dangling");
    CHECK(cli_artifact_write(fd, "dangling", (const uint8_t *)"y", 1, why, sizeof why) < 0);
    CHECK(access("/nonexistent-plimsoll", F_OK) < 0);
    CHECK(cli_artifact_write(fd, "../x", (const uint8_t *)"y", 1, why, sizeof why) < 0);
    CHECK(cli_artifact_write(fd, "/tmp/x", (const uint8_t *)"y", 1, why, sizeof why) < 0);
    CHECK(cli_artifact_write(fd, "", NULL, 0, why, sizeof why) < 0);
    CHECK(cli_artifact_write(fd, "empty", NULL, 0, why, sizeof why) == 0);
    close(fd);
    /* an existing, non-empty --out is refused before anything is sent */
    snprintf(p, sizeof p, "%s/out", root);
    CHECK(cli_out_prepare(p, &created, why, sizeof why) < 0 && strstr(why, "not empty") != NULL);
    snprintf(p, sizeof p, "%s/p", root); /* existing and empty: accepted, not created */
    fd = cli_out_prepare(p, &created, why, sizeof why);
    CHECK(fd >= 0 && !created);
    if (fd >= 0)
        close(fd);
    snprintf(p, sizeof p, "%s/no/such", root);
    CHECK(cli_out_prepare(p, &created, why, sizeof why) < 0);
    rm_rf();

    CHECK(cli_artifact_path_safe("a"));
    CHECK(cli_artifact_path_safe("dist/app.js"));
    CHECK(cli_artifact_path_safe("..a/b.."));
    CHECK(!cli_artifact_path_safe(NULL));
    CHECK(!cli_artifact_path_safe("a//b"));
    CHECK(!cli_artifact_path_safe("a/"));
    CHECK(!cli_artifact_path_safe("./a"));
    CHECK(!cli_artifact_path_safe("a/../../b"));
    CHECK(!cli_artifact_path_safe(".."));
    char longp[LIM_PATH_MAX + 2];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    CHECK(!cli_artifact_path_safe(longp));
    longp[LIM_PATH_MAX] = 0;
    CHECK(cli_artifact_path_safe(longp));
}

static void test_cells(void)
{
    struct cli_cell c = {0};
    const char *lines[] = {"", "%%", "def f(x):", "    return x + 1", "", "  %%  ", "print(f(1))", "%%", "a", "b"};
    enum cli_cell_feed want[] = {CLI_CELL_MORE, CLI_CELL_MORE, CLI_CELL_MORE, CLI_CELL_MORE, CLI_CELL_DONE,
                                 CLI_CELL_MORE, CLI_CELL_MORE, CLI_CELL_DONE, CLI_CELL_MORE, CLI_CELL_MORE};
    char *got[4] = {0};
    size_t n = 0;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        enum cli_cell_feed f = cli_cell_feed(&c, lines[i], strlen(lines[i]));
        CHECK(f == want[i]);
        if (f == CLI_CELL_DONE && n < 4)
            got[n++] = cli_cell_take(&c);
    }
    got[n++] = cli_cell_take(&c); /* end of input */
    CHECK(n == 3);
    CHECK_STR(got[0], "def f(x):\n    return x + 1");
    CHECK_STR(got[1], "print(f(1))");
    CHECK_STR(got[2], "a\nb");
    for (size_t i = 0; i < n; i++)
        free(got[i]);
    CHECK(cli_cell_take(&c) == NULL);
    /* a cell beyond the code limit is dropped whole, and the next one starts clean */
    char *line = malloc(64 * 1024);
    if (line) {
        memset(line, 'x', 64 * 1024);
        for (int i = 0; i < 5; i++)
            cli_cell_feed(&c, line, 64 * 1024);
        free(line);
    }
    CHECK(c.too_big);
    CHECK(cli_cell_feed(&c, "", 0) == CLI_CELL_DONE);
    CHECK(cli_cell_take(&c) == NULL && !c.too_big);
    CHECK(cli_cell_feed(&c, "a\0b", 3) == CLI_CELL_MORE && c.has_nul); /* dropped whole */
    cli_cell_feed(&c, "more", 4);
    CHECK(cli_cell_feed(&c, "", 0) == CLI_CELL_DONE);
    CHECK(cli_cell_take(&c) == NULL && !c.has_nul);
    cli_cell_feed(&c, "ok", 2);
    CHECK(cli_cell_feed(&c, "%%", 2) == CLI_CELL_DONE);
    char *ok = cli_cell_take(&c);
    CHECK_STR(ok, "ok");
    free(ok);
    cli_cell_done(&c);
}

static void test_grant_names(void)
{
    CHECK(cli_grant_name_valid("crm-read_1.v2"));
    CHECK(!cli_grant_name_valid(""));
    CHECK(!cli_grant_name_valid(NULL));
    CHECK(!cli_grant_name_valid("a b"));
    CHECK(!cli_grant_name_valid("a/b"));
    char n[LIM_GRANT_PROFILE_MAX + 2];
    memset(n, 'a', sizeof n - 1);
    n[sizeof n - 1] = 0;
    CHECK(!cli_grant_name_valid(n));
    n[LIM_GRANT_PROFILE_MAX] = 0;
    CHECK(cli_grant_name_valid(n));
}

int main(void)
{
    test_read_dir();
    test_out_and_artifacts();
    test_cells();
    test_grant_names();
    return unit_done();
}
