/* rpc_call.c: a procedure call's context (rpc.h): the caller's deadline, read from the Connect
 * timeout header, and whether the caller is still there. Knows nothing of sockets: the HTTP layer
 * supplies caller_gone. */
#include <stdint.h>

#include "../core/clock.h"
#include "rpc.h"

struct rpc_call rpc_call_plain(const struct principal *who, const char *request_id, enum rpc_fmt fmt,
                               const char *body, size_t len)
{
    return (struct rpc_call){.who = who, .request_id = request_id, .fmt = fmt, .body = body, .len = len,
                             .deadline_ms = RPC_NO_DEADLINE};
}

int rpc_call_ended(const struct rpc_call *c, struct plm_err *err)
{
    if (c->caller_gone && c->caller_gone(c->gone_cls))
        return plm_refuse(err, PLM_E_CANCELED, PLM_REFUSAL_CAPACITY, "the caller went away; nothing was done");
    if (c->deadline_ms != RPC_NO_DEADLINE && clock_mono_ms() >= c->deadline_ms)
        return plm_refuse(err, PLM_E_DEADLINE, PLM_REFUSAL_CAPACITY,
                          "the caller's deadline (Connect-Timeout-Ms) passed; nothing was done");
    return 0;
}

uint64_t rpc_call_left_ms(const struct rpc_call *c, uint64_t now)
{
    if (c->deadline_ms == RPC_NO_DEADLINE)
        return UINT64_MAX;
    return c->deadline_ms > now ? c->deadline_ms - now : 0;
}

int rpc_parse_timeout_ms(const char *v, size_t n, uint64_t *ms)
{
    if (!v || n == 0 || n > 10)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *ms = x;
    return 0;
}
