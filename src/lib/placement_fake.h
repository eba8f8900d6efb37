/* placement_fake.h: fake daemons behind the library's transport seam, for the placement unit tests.
 * Each answers Describe as configured and Run / OpenSession as scripted, stamps a record that
 * checks, and remembers what reached it (token, floors, counts). */
#pragma once
#include "client.h"

enum fake_answer {
    FAKE_OK,        /* a checked answer at the stated isolation */
    FAKE_REFUSE,    /* a bound refusal with a NotDispatched mark of `reason` */
    FAKE_UNMARKED,  /* internal error without a mark: may have run */
    FAKE_DOWN,      /* connection refused: nothing sent */
    FAKE_LOST,      /* the connection broke after the request went out */
    FAKE_DOWNGRADE, /* answers from "container" whatever it stated */
};

struct fake {
    const char *url, *provider, *isolation, *env_identity;
    bool project, module, sessions, js_grants, project_grants;
    enum fake_answer answer;
    int reason;
    int runs, describes, opens;
    char last_token[64];
    char floors[8][16];
    size_t n_floors;
    /* its one session's chain, as the daemon keeps it */
    uint64_t session_calls;
    char session_fp[PLM_HEX_SHA256], session_last[PLM_HEX_SHA256];
};

/* The transport over fakes[0..n): each connection's URL picks its fake. */
struct fake_net {
    struct fake *f;
    size_t n;
    struct cli_transport t;
};
void fake_net_init(struct fake_net *net, struct fake *f, size_t n);
