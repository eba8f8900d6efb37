/* session_limits.h: what the session service is configured with (sessions.md §3.1). The daemon
 * reads and checks the variables (src/daemon/session_config.c) and fills this; the server only
 * uses it, so it knows nothing of the environment. */
#pragma once
#include <stdint.h>

struct plm_session_config {
    uint32_t max_sessions;    /* SANDBOX_MAX_SESSIONS; 0 = sessions off */
    uint32_t per_caller;      /* SANDBOX_MAX_SESSIONS_PER_CALLER; 0 = no cap beyond the total */
    uint32_t per_owner;       /* SANDBOX_MAX_SESSIONS_PER_OWNER; 0 = no cap */
    uint32_t pool;            /* SANDBOX_SESSION_POOL */
    uint64_t lifetime_ms;     /* SANDBOX_SESSION_LIFETIME, 1 s .. 12 h */
    uint64_t idle_ms;         /* SANDBOX_SESSION_IDLE, 0 or 1 s .. 12 h */
    uint64_t disk_bytes;      /* SANDBOX_SESSION_DISK_MB << 20; 0 = unmeasured */
};
