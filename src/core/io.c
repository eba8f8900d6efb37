/* io.c: see io.h. */
#include "io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"

int plm_write_all(int fd, const void *p, size_t n, uint64_t deadline_ms)
{
    const char *q = p;
    while (n) {
        ssize_t w = send(fd, q, n, MSG_NOSIGNAL | (deadline_ms ? MSG_DONTWAIT : 0));
        if (w < 0 && errno == ENOTSOCK)
            w = write(fd, q, n);
        if (w > 0) {
            q += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -1;
        if (!deadline_ms)
            return errno = EIO, -1; /* a blocking fd that wrote nothing */
        uint64_t now = clock_mono_ms();
        if (now >= deadline_ms)
            return errno = ETIMEDOUT, -1;
        uint64_t left = deadline_ms - now;
        struct pollfd pf = {fd, POLLOUT, 0};
        if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

int plm_read_all(int fd, size_t cap, char **out, size_t *out_len)
{
    struct plm_buf b = {.max = cap};
    char chunk[16384];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            plm_buf_done(&b);
            return -e;
        }
        if (n == 0)
            break;
        if (!plm_buf_add(&b, chunk, (size_t)n)) {
            bool over = b.len + (size_t)n > cap;
            plm_buf_done(&b);
            return over ? -EFBIG : -ENOMEM;
        }
    }
    if (!plm_buf_reserve(&b, 0)) { /* empty input: still a NUL-terminated string */
        plm_buf_done(&b);
        return -ENOMEM;
    }
    b.p[b.len] = '\0';
    *out_len = b.len;
    *out = plm_buf_take(&b, NULL);
    return 0;
}
