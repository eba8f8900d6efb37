/* exact_io.h: exactly n bytes through read(2)/write(2), nothing else. Kept apart from io.h because
 * the confined QuickJS worker and the static guest init compile it in directly: under their
 * seccomp tables and in the guest only read and write exist (no send, no poll, no allocation). */
#pragma once
#include <stddef.h>

/* 0 once n bytes moved; -1 on end of file, on an error, or on a write that wrote nothing. EINTR
 * and short transfers are retried. */
int plm_read_exact(int fd, void *buf, size_t n);
int plm_write_exact(int fd, const void *buf, size_t n);
