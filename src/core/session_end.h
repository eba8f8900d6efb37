/* session_end.h: why a session ended (sessions.md §2.4), shared by the registry and providers. */
#pragma once

/* Numbers equal plimsoll.v1.SessionEnd. */
enum plm_session_end {
    PLM_END_NONE = 0,
    PLM_END_CLOSED = 1,
    PLM_END_EXPIRED = 2,
    PLM_END_DISK_EXCEEDED = 3,
    PLM_END_MAIN_PROCESS_ENDED = 4,
    PLM_END_BOUNDARY_FAILED = 5,
    PLM_END_SANDBOX_CHANGED = 6,
    PLM_END_SHUTDOWN = 7,
    PLM_END_REPLACED = 8,
    PLM_END_NOT_FOUND = 9,
    PLM_END_UNCLAIMED = 10,
};
const char *plm_session_end_name(enum plm_session_end e); /* "closed", "expired", ... */
