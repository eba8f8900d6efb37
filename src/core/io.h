/* io.h: whole reads and writes on file descriptors, once for the whole daemon and the CLI:
 * EINTR and short transfers are retried here, never by each caller. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes (send with MSG_NOSIGNAL on sockets, write otherwise). deadline_ms: a
 * clock_mono_ms() instant after which it gives up (the fd may then be non-blocking: it polls
 * for room), or 0 for none (a blocking fd). Returns 0 or -1 with errno (ETIMEDOUT at the deadline). */
int plm_write_all(int fd, const void *p, size_t n, uint64_t deadline_ms);
/* Reads to end of file, at most cap bytes: more is -EFBIG (never truncated silently). Returns 0
 * with a malloc'd, NUL-terminated *out, or a negative errno. */
int plm_read_all(int fd, size_t cap, char **out, size_t *out_len);
