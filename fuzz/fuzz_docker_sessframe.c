/* fuzz_docker_sessframe.c: the docker session agent's reply decoder (src/providers/docker/
 * sessframe.c) over bytes a session's code may have written in the agent's place: one buffer,
 * decoded frame after frame as the provider does, until it needs more or finds it malformed. */
#include <stdint.h>
#include <stdlib.h>

#include "../src/providers/docker/sessframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        struct dock_sf_reply r;
        size_t used = 0;
        int rc = dock_sf_parse(data + off, size - off, &used, &r);
        if (rc <= 0)
            break;
        if (used == 0 || used > size - off || r.out.len > 64 * 1024 || r.err.len > 64 * 1024)
            abort();
        dock_sf_reply_done(&r);
        off += used;
    }
    return 0;
}
