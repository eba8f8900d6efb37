/* hostsock.c: the grant socket of one docker run (hostsock.h): its private directory, its
 * listener, and the guestio server (src/guestio) that serves it.
 * Owns: <base>/plimsoll-broker-XXXXXX (0700) with host-api.sock and host-api.mjs, the listening
 *   socket until guestio takes it, and that server.
 * Trusts: nothing that arrives on a connection, and it reads none of it: the confined guestio
 *   helper parses the guest's HTTP; the daemon gets canonical frames and calls the copied
 *   plm_host_api with them (docs/privsep.md).
 * Invariants:
 *  - bounded: at most DOCK_HS_CONN_MAX connections held, each at most DOCK_HS_HEAD_MAX +
 *    DOCK_HS_BODY_MAX + 1 bytes in the helper, each read and write under a deadline;
 *  - after dock_hostsock_stop returns, nothing of the server is left on the file system, the
 *    helper is reaped, no call begins, and only a thread inside a held `call` remains. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../guestio/guestio.h"
#include "hostsock.h"

#define SOCK_NAME "host-api.sock"
#define PRELOAD_NAME "host-api.mjs"

struct dock_hostsock {
    struct gio_server *gio;
    int lfd; /* until guestio owns it */
    char dir[108], sock[108], preload[108];
};

/* The guestio helper for tests; NULL is the installed one. */
static const char *g_helper_path;

void dock_hostsock_set_helper(const char *path)
{
    g_helper_path = path;
}

unsigned dock_hostsock_threads(void)
{
    return gio_threads();
}

bool dock_hostsock_quiesce(uint32_t timeout_ms)
{
    return gio_quiesce(timeout_ms);
}

const char *dock_hostsock_sock_path(const struct dock_hostsock *hs)
{
    return hs->sock;
}

const char *dock_hostsock_preload_path(const struct dock_hostsock *hs)
{
    return hs->preload;
}

struct gio_server *dock_hostsock_gio(const struct dock_hostsock *hs)
{
    return hs->gio;
}

/* ---- the base directory ---------------------------------------------------------------------- */

static int dir_ok(const char *p, bool own, struct plm_err *err)
{
    struct stat st;
    if (p[0] != '/')
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "\"%s\" is not an absolute path", p);
    /* the longest path we make below it must fit sun_path */
    if (strlen(p) + sizeof "/" DOCK_HS_DIR_PREFIX "XXXXXX/" SOCK_NAME > sizeof((struct sockaddr_un *)0)->sun_path)
        return plm_fail(err, ENAMETOOLONG, PLM_E_INTERNAL, "\"%s\" is too long for a unix socket path", p);
    if (lstat(p, &st) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "\"%s\": %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return plm_fail(err, ENOTDIR, PLM_E_INTERNAL, "\"%s\" is not a directory", p);
    /* Another user who can write the parent could swap our run directory under dockerd. */
    if (own && (st.st_uid != geteuid() || (st.st_mode & 022)))
        return plm_fail(err, EPERM, PLM_E_INTERNAL, "\"%s\" must belong to uid %u and be writable by no one else", p,
                        (unsigned)geteuid());
    return 0;
}

int dock_hs_base_dir(const char *configured, char *out, size_t cap, struct plm_err *err)
{
    if (configured && *configured) {
        if (dir_ok(configured, true, err) < 0)
            return plm_err_wrap(err, "grant socket directory");
        snprintf(out, cap, "%s", configured);
        return 0;
    }
    struct plm_err ignored = {0};
    const char *rd = getenv("RUNTIME_DIRECTORY"); /* systemd's RuntimeDirectory=, ':'-separated */
    if (rd && *rd) {
        char first[256];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(rd, ":"), rd);
        if (dir_ok(first, true, &ignored) == 0) {
            snprintf(out, cap, "%s", first);
            return 0;
        }
    }
    if ((mkdir("/run/plimsoll", 0700) == 0 || errno == EEXIST) && dir_ok("/run/plimsoll", true, &ignored) == 0) {
        snprintf(out, cap, "/run/plimsoll");
        return 0;
    }
    /* The sticky world-writable /tmp: mkdtemp's random 0700 directory is safe there. */
    if (dir_ok("/tmp", false, err) < 0)
        return plm_err_wrap(err, "grant socket directory");
    snprintf(out, cap, "/tmp");
    return 0;
}

/* A run directory nobody serves: its socket refuses (or is gone). A live server always listens
 * within milliseconds of making its directory, and min_age_s keeps that moment out of reach. */
static bool stale(const char *dir, time_t min_age_s)
{
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || time(NULL) - st.st_mtime < min_age_s)
        return false;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/" SOCK_NAME, dir) >= sizeof sa.sun_path)
        return false;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa), e = errno;
    close(fd);
    return r < 0 && (e == ECONNREFUSED || e == ENOENT);
}

int dock_hs_sweep(const char *base, unsigned min_age_s)
{
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char dir[108], f[128];
        if (strncmp(e->d_name, DOCK_HS_DIR_PREFIX, sizeof DOCK_HS_DIR_PREFIX - 1) ||
            (size_t)snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= sizeof dir || !stale(dir, (time_t)min_age_s))
            continue;
        snprintf(f, sizeof f, "%s/" SOCK_NAME, dir);
        unlink(f);
        snprintf(f, sizeof f, "%s/" PRELOAD_NAME, dir);
        unlink(f);
        n += rmdir(dir) == 0;
    }
    closedir(d);
    return n;
}

/* ---- start and stop -------------------------------------------------------------------------- */

/* Removes what start made on the file system; each step tolerates the thing being absent. */
static void remove_files(struct dock_hostsock *hs)
{
    if (hs->sock[0])
        unlink(hs->sock);
    if (hs->preload[0])
        unlink(hs->preload);
    if (hs->dir[0])
        rmdir(hs->dir);
}

static int write_preload(const char *path, const char *text, struct plm_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "create \"%s\": %s", path, strerror(errno));
    size_t n = text ? strlen(text) : 0;
    const char *p = text;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            return plm_fail(err, e, PLM_E_INTERNAL, "write \"%s\": %s", path, strerror(e));
        }
        p += w, n -= (size_t)w;
    }
    if (close(fd) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "write \"%s\": %s", path, strerror(errno));
    return 0;
}

static int listen_on(struct dock_hostsock *hs, struct plm_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", hs->sock);
    hs->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (hs->lfd < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "socket: %s", strerror(errno));
    if (bind(hs->lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "bind \"%s\": %s", hs->sock, strerror(errno));
    /* (spec) 0666: the guest uid is nobody on the host; the 0700 directory keeps host users out,
     * and the container reaches the socket only through its bind mount. */
    if (chmod(hs->sock, 0666) < 0 || listen(hs->lfd, DOCK_HS_BACKLOG) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "listen \"%s\": %s", hs->sock, strerror(errno));
    return 0;
}

/* Fills hs's paths under dir (made here when make_dir; then it is hs's to remove) and starts
 * serving. The names are <dir>/<stem>.sock and .mjs, or the run's fixed names when stem is NULL. */
static int serve(struct dock_hostsock *hs, const char *dir, bool make_dir, const char *stem,
                 const struct plm_host_api *api, const struct dock_hs_limits *lim, struct plm_err *err)
{
    struct dock_hs_limits t = lim ? *lim : (struct dock_hs_limits){DOCK_HS_HEAD_MS, DOCK_HS_READ_MS, DOCK_HS_WRITE_MS};
    /* The spec's figures (hostsock.h); the body cap is the broker's plus the byte that trips
     * its 413. */
    struct gio_limits gl = {.conn_max = DOCK_HS_CONN_MAX,
                            .head_max = DOCK_HS_HEAD_MAX,
                            .body_max = DOCK_HS_BODY_MAX + 1,
                            .head_ms = t.head_ms,
                            .read_ms = t.read_ms,
                            .write_ms = t.write_ms};
    /* guestio keeps hold/release as a pair and calls `call` with the guest's method and raw
     * target verbatim, as plm_host_api requires; the texts of api are not kept. */
    struct gio_handler h = {.call = api->call, .hold = api->hold, .release = api->release, .ctx = api->cb_ctx};
    char where[sizeof hs->sock];
    if (make_dir) {
        /* sized so that the socket path below always fits sun_path */
        char tmpl[sizeof hs->sock - sizeof "/" SOCK_NAME + 1];
        if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/" DOCK_HS_DIR_PREFIX "XXXXXX", dir) >= sizeof tmpl)
            return plm_fail(err, ENAMETOOLONG, PLM_E_INTERNAL, "\"%s\" is too long for a socket path", dir);
        if (!mkdtemp(tmpl))
            return plm_fail(err, errno, PLM_E_INTERNAL, "mkdtemp under \"%s\": %s", dir, strerror(errno));
        snprintf(hs->dir, sizeof hs->dir, "%s", tmpl);
        snprintf(where, sizeof where, "%s", tmpl);
    } else if ((size_t)snprintf(where, sizeof where, "%s", dir) >= sizeof where) {
        return plm_fail(err, ENAMETOOLONG, PLM_E_INTERNAL, "\"%s\" is too long for a socket path", dir);
    }
    int a = stem ? snprintf(hs->preload, sizeof hs->preload, "%s/%s.mjs", where, stem)
                 : snprintf(hs->preload, sizeof hs->preload, "%s/" PRELOAD_NAME, where);
    int b = stem ? snprintf(hs->sock, sizeof hs->sock, "%s/%s.sock", where, stem)
                 : snprintf(hs->sock, sizeof hs->sock, "%s/" SOCK_NAME, where);
    if (a < 0 || b < 0 || (size_t)a >= sizeof hs->preload || (size_t)b >= sizeof hs->sock) {
        hs->preload[0] = hs->sock[0] = 0; /* nothing of ours there to remove */
        return plm_fail(err, ENAMETOOLONG, PLM_E_INTERNAL, "\"%s\" is too long for a socket path", where);
    }
    if (write_preload(hs->preload, api->node_preload, err) < 0) {
        if (err->errnum == EEXIST)
            hs->preload[0] = 0; /* not ours */
        hs->sock[0] = 0;
        return -1;
    }
    if (listen_on(hs, err) < 0) {
        if (err->errnum == EADDRINUSE)
            hs->sock[0] = 0; /* not ours */
        return -1;
    }
    int lfd = hs->lfd;
    hs->lfd = -1; /* guestio owns it from here, failure included */
    return gio_server_start(lfd, &gl, &h, g_helper_path, &hs->gio, err);
}

static int start(const char *dir, bool make_dir, const char *stem, const struct plm_host_api *api,
                 const struct dock_hs_limits *lim, struct dock_hostsock **out, struct plm_err *err)
{
    *out = NULL;
    if (!api || !api->call)
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "grant socket: no host api to serve");
    struct dock_hostsock *hs = calloc(1, sizeof *hs);
    if (!hs)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    hs->lfd = -1;
    if (serve(hs, dir, make_dir, stem, api, lim, err) < 0) {
        if (hs->lfd >= 0)
            close(hs->lfd);
        remove_files(hs);
        free(hs);
        return plm_err_wrap(err, "grant socket");
    }
    *out = hs;
    return 0;
}

int dock_hostsock_start(const char *base, const struct plm_host_api *api, const struct dock_hs_limits *lim,
                        struct dock_hostsock **out, struct plm_err *err)
{
    return start(base, true, NULL, api, lim, out, err);
}

int dock_hostsock_start_in(const char *dir, const char *stem, const struct plm_host_api *api,
                           const struct dock_hs_limits *lim, struct dock_hostsock **out, struct plm_err *err)
{
    if (!stem || !*stem || strchr(stem, '/') || stem[0] == '.')
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "grant socket: bad name \"%s\"", stem ? stem : "");
    return start(dir, false, stem, api, lim, out, err);
}

void dock_hostsock_stop(struct dock_hostsock *hs)
{
    if (!hs)
        return;
    /* No call begins from here; the helper is reaped, the listener and every connection are
     * closed (a leftover guest process that kept the mounted socket sees ECONNREFUSED once the
     * path is gone), and a call in flight that holds cb_ctx finishes on its own. */
    gio_server_stop(hs->gio);
    remove_files(hs);
    free(hs);
}
