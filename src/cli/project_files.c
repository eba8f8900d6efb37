/* project_files.c: the local file side of `plimsoll project`: a directory read into project files
 * (bounded by the wire's limits) and the artifacts of a checked answer written into --out.
 * Owns: the file list it reads (paths and contents, malloc'd), the descriptors it opens.
 * Trusts: neither the directory (symlinks, special files, sizes are judged) nor an artifact path
 * (judged again here, though the daemon only returns paths we asked for).
 * Invariant: nothing outside DIR is ever read, nothing outside --out is ever written, and no
 * existing file is overwritten (--out must be new or empty; each file is created O_EXCL). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/io.h"
#include "../core/limits.h"
#include "cli.h"

DEFINE_CLEANUP(DIR, closedir)

#define WALK_DEPTH_MAX 64 /* directories nested below DIR */

struct walk {
    struct cli_project_files *out;
    const char *root_real; /* realpath of DIR */
    char *why;
    size_t why_n;
};

static int fail(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->why_n, fmt, ap);
    va_end(ap);
    return -1;
}

void cli_project_files_done(struct cli_project_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->paths[i]);
        free(f->contents[i]);
    }
    free(f->paths);
    free(f->contents);
    memset(f, 0, sizeof *f);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the open regular file fd as the next project file `rel`. */
static int add_file(struct walk *w, int fd, const char *rel)
{
    struct cli_project_files *f = w->out;
    if (f->n >= LIM_FILES_MAX)
        return fail(w, "more than %d files (the wire's limit); `%s` is one too many", LIM_FILES_MAX, rel);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return fail(w, "`%s` is not a regular file", rel);
    size_t room = LIM_FILES_TOTAL_MAX - f->total;
    cleanup_free char *data = NULL;
    size_t len = 0;
    int r = plm_read_all(fd, room, &data, &len);
    if (r == -EFBIG)
        return fail(w, "the files exceed %u MiB in total (the wire's limit) at `%s`", LIM_FILES_TOTAL_MAX >> 20, rel);
    if (r < 0)
        return fail(w, "`%s`: %s", rel, strerror(-r));
    if (strlen(data) != len || !cli_utf8_valid((const uint8_t *)data, len))
        return fail(w, "`%s` is not UTF-8 text without NUL bytes (the wire carries file contents as text)", rel);
    cleanup_free char *p = strdup(rel);
    char **np = realloc(f->paths, (f->n + 1) * sizeof *np);
    if (np)
        f->paths = np;
    char **nc = np ? realloc(f->contents, (f->n + 1) * sizeof *nc) : NULL;
    if (nc)
        f->contents = nc;
    if (!p || !np || !nc)
        return fail(w, "out of memory");
    f->paths[f->n] = take_ptr(&p);
    f->contents[f->n] = take_ptr(&data);
    f->n++;
    f->total += len;
    return 0;
}

/* A symlink is followed only when its target, fully resolved, is a regular file inside DIR. */
static int add_symlink(struct walk *w, int dirfd, const char *name, const char *rel)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d/", dirfd);
    cleanup_free char *via = NULL;
    if (asprintf(&via, "%s%s", link, name) < 0)
        return fail(w, "out of memory");
    cleanup_free char *target = realpath(via, NULL);
    if (!target)
        return fail(w, "symlink `%s` does not resolve: %s", rel, strerror(errno));
    size_t rl = strlen(w->root_real);
    bool inside = strncmp(target, w->root_real, rl) == 0 && (target[rl] == '/' || (rl == 1 && target[0] == '/'));
    if (!inside)
        return fail(w, "symlink `%s` points outside the directory (to %s); refusing to send it", rel, target);
    cleanup_close int fd = open(target, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return fail(w, "symlink `%s`: %s", rel, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(w, "symlink `%s` does not point to a regular file (directory links are not followed)", rel);
    return add_file(w, fd, rel);
}

static int walk_dir(struct walk *w, int dirfd, const char *prefix, int depth);

static int walk_entry(struct walk *w, int dirfd, const char *name, const char *prefix, int depth)
{
    cleanup_free char *rel = NULL;
    if (asprintf(&rel, "%s%s", prefix, name) < 0)
        return fail(w, "out of memory");
    if (strlen(rel) > LIM_PATH_MAX)
        return fail(w, "path `%.60s…` is longer than %d bytes (the wire's limit)", rel, LIM_PATH_MAX);
    if (!cli_utf8_valid((const uint8_t *)rel, strlen(rel)))
        return fail(w, "a file name under `%s` is not UTF-8", *prefix ? prefix : ".");
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(w, "`%s`: %s", rel, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return add_symlink(w, dirfd, name, rel);
    if (S_ISDIR(st.st_mode)) {
        if (depth >= WALK_DEPTH_MAX)
            return fail(w, "`%s` is nested more than %d directories deep", rel, WALK_DEPTH_MAX);
        cleanup_close int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            return fail(w, "`%s`: %s", rel, strerror(errno));
        cleanup_free char *p2 = NULL;
        if (asprintf(&p2, "%s/", rel) < 0)
            return fail(w, "out of memory");
        return walk_dir(w, sub, p2, depth + 1);
    }
    if (!S_ISREG(st.st_mode))
        return fail(w, "`%s` is not a regular file, directory or symlink; refusing to send it", rel);
    /* O_NONBLOCK: a file swapped for a FIFO after the stat must not hang us; fstat re-checks. */
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return fail(w, "`%s`: %s", rel, strerror(errno));
    return add_file(w, fd, rel);
}

/* The names in dirfd (without . and ..) into *names / *n, the stream closed before the caller
 * walks them, so an open directory costs one descriptor per level only while it is listed. */
static int list_dir(struct walk *w, int dirfd, const char *prefix, char ***names, size_t *n)
{
    cleanup_close int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    DIR *d cleanup_(closedir) = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d)
        return fail(w, "`%s`: %s", *prefix ? prefix : ".", strerror(errno));
    dup_fd = -1; /* the stream owns it now */
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*n >= 4 * LIM_FILES_MAX) /* bound the listing itself, not only what is sent */
            return fail(w, "`%s` holds more than %d entries", *prefix ? prefix : ".", 4 * LIM_FILES_MAX);
        char **nn = realloc(*names, (*n + 1) * sizeof *nn);
        if (nn)
            *names = nn;
        char *s = nn ? strdup(e->d_name) : NULL;
        if (!s)
            return fail(w, "out of memory");
        (*names)[(*n)++] = s;
    }
    return 0;
}

/* Entries in byte order, so the request (and its digest) does not depend on readdir's order. */
static int walk_dir(struct walk *w, int dirfd, const char *prefix, int depth)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(w, dirfd, prefix, &names, &n);
    if (rc == 0)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = walk_entry(w, dirfd, names[i], prefix, depth);
        free(names[i]);
    }
    free(names);
    return rc;
}

int cli_project_read_dir(const char *dir, struct cli_project_files *out, char *why, size_t why_n)
{
    memset(out, 0, sizeof *out);
    cleanup_free char *root_real = realpath(dir, NULL);
    struct walk w = {.out = out, .root_real = root_real, .why = why, .why_n = why_n};
    if (!root_real)
        return fail(&w, "`%s`: %s", dir, strerror(errno));
    cleanup_close int fd = open(root_real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail(&w, "`%s`: %s", dir, strerror(errno));
    int rc = walk_dir(&w, fd, "", 0);
    if (rc < 0)
        cli_project_files_done(out);
    return rc;
}

bool cli_artifact_path_safe(const char *path)
{
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || len > LIM_PATH_MAX || path[0] == '/')
        return false;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

int cli_out_prepare(const char *dir, bool *created, char *why, size_t why_n)
{
    *created = false;
    if (mkdir(dir, 0755) == 0) {
        *created = true;
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            snprintf(why, why_n, "--out `%s`: %s", dir, strerror(errno));
        return fd;
    }
    if (errno != EEXIST) {
        snprintf(why, why_n, "--out `%s`: %s", dir, strerror(errno));
        return -1;
    }
    cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_n, "--out `%s`: %s", dir, strerror(errno));
        return -1;
    }
    cleanup_close int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d cleanup_(closedir) = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (d)
        dup_fd = -1; /* the stream owns it now */
    bool empty = d != NULL;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    if (!empty) {
        snprintf(why, why_n, "--out `%s` exists and is not empty (artifacts never overwrite files)", dir);
        return -1;
    }
    return take_fd(&fd);
}

/* Opens (creating when absent) the directory `name` under dirfd, never through a symlink. */
static int sub_dir(int dirfd, const char *name)
{
    if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
        return -1;
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int cli_artifact_write(int out_fd, const char *path, const uint8_t *data, size_t len, char *why, size_t why_n)
{
    if (!cli_artifact_path_safe(path)) {
        snprintf(why, why_n, "unsafe path (absolute, empty, `.` or `..` component)");
        return -1;
    }
    cleanup_free char *copy = strdup(path);
    if (!copy) {
        snprintf(why, why_n, "out of memory");
        return -1;
    }
    cleanup_close int dfd = fcntl(out_fd, F_DUPFD_CLOEXEC, 0);
    char *p = copy, *slash;
    while (dfd >= 0 && (slash = strchr(p, '/'))) {
        *slash = 0;
        cleanup_close int parent = take_fd(&dfd);
        dfd = sub_dir(parent, p);
        p = slash + 1;
    }
    if (dfd < 0) {
        snprintf(why, why_n, "directory: %s", strerror(errno));
        return -1;
    }
    int fd = openat(dfd, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, why_n, "%s", errno == EEXIST ? "a file of that name already exists (not overwritten)"
                                                   : strerror(errno));
        return -1;
    }
    int w = plm_write_all(fd, data, len, 0);
    int saved = errno;
    if (close(fd) < 0 && w == 0) {
        w = -1;
        saved = errno;
    }
    if (w < 0) {
        unlinkat(dfd, p, 0);
        snprintf(why, why_n, "write: %s", strerror(saved));
    }
    return w < 0 ? -1 : 0;
}
