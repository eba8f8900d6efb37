/* port.c: the guest agent's ties to its host: the virtio-serial port (opened by PID 1, init.c)
 * and the kernel command line the host wrote. A leaf: every other file of the agent uses it and
 * it uses none of them.
 * Owns: nothing (the port's descriptor is PID 1's, recorded here for every file to write to).
 * Trusts: the host's command line, read as numbers with a fallback. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../core/exact_io.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"

static int port = -1;

int gs_port(void)
{
    return port;
}

int gs_send(uint16_t type, uint64_t seq, const void *payload, uint32_t len)
{
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    if (plm_write_exact(port, h, sizeof h) < 0)
        return -1;
    return len ? plm_write_exact(port, payload, len) : 0;
}

void gs_idle_forever(void)
{
    for (;;)
        pause();
}

void gs_port_set(int fd)
{
    port = fd;
}

uint32_t gs_cmdline_u32(const char *key, uint32_t def)
{
    char buf[1024];
    int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return def;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0)
        return def;
    buf[k] = 0;
    char *p = strstr(buf, key);
    if (!p)
        return def;
    unsigned long v = strtoul(p + strlen(key), NULL, 10);
    return v > 0 && v < 65536 ? (uint32_t)v : def;
}
