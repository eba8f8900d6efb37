/* api_result.c: what a plimsoll_result tells its caller. Guest output and the answer's JSON are
 * handed out only when the record checked: an answer that does not check vouches for nothing. */
#include <stdlib.h>

#include "../wire/json_codec.h"
#include "api.h"

static const char *S(const char *s) { return s ? s : ""; }

PLIMSOLL_EXPORT plimsoll_status plimsoll_result_status(const plimsoll_result *r) { return r->status; }
PLIMSOLL_EXPORT const char *plimsoll_result_message(const plimsoll_result *r) { return r->call.o.message; }
PLIMSOLL_EXPORT const char *plimsoll_result_refusal(const plimsoll_result *r)
{
    return r->status == PLIMSOLL_REFUSED ? r->reason : NULL;
}
PLIMSOLL_EXPORT int plimsoll_result_record_checked(const plimsoll_result *r) { return r->call.checked; }
PLIMSOLL_EXPORT int plimsoll_result_not_sent(const plimsoll_result *r)
{
    return r->status == PLIMSOLL_INVALID || (r->call.o.verdict == CLI_V_TRANSPORT && r->call.o.not_sent) ||
           (r->status == PLIMSOLL_REFUSED && r->choice.backend[0] == '\0');
}

static const Plimsoll__V1__RunResponse *checked(const plimsoll_result *r)
{
    return r->call.checked ? r->call.resp : NULL;
}

PLIMSOLL_EXPORT const char *plimsoll_result_provider(const plimsoll_result *r)
{
    return checked(r) ? S(checked(r)->sandbox) : NULL;
}
PLIMSOLL_EXPORT const char *plimsoll_result_isolation(const plimsoll_result *r)
{
    return checked(r) ? S(checked(r)->isolation) : NULL;
}
PLIMSOLL_EXPORT const char *plimsoll_result_record_sha256(const plimsoll_result *r)
{
    return checked(r) && checked(r)->record ? S(checked(r)->record->record_sha256) : NULL;
}
PLIMSOLL_EXPORT const char *plimsoll_result_request_id(const plimsoll_result *r)
{
    return r->call.rid[0] ? r->call.rid : NULL;
}

PLIMSOLL_EXPORT const uint8_t *plimsoll_result_stdout(const plimsoll_result *r, size_t *len)
{
    *len = r->call.js ? r->call.js->stdout.len : 0;
    return r->call.js ? (r->call.js->stdout.len ? r->call.js->stdout.data : (const uint8_t *)"") : NULL;
}
PLIMSOLL_EXPORT const uint8_t *plimsoll_result_stderr(const plimsoll_result *r, size_t *len)
{
    *len = r->call.js ? r->call.js->stderr.len : 0;
    return r->call.js ? (r->call.js->stderr.len ? r->call.js->stderr.data : (const uint8_t *)"") : NULL;
}
PLIMSOLL_EXPORT int plimsoll_result_exit_code(const plimsoll_result *r)
{
    return r->call.js ? r->call.js->exit_code : -1;
}
PLIMSOLL_EXPORT int plimsoll_result_exit_status(const plimsoll_result *r) { return r->call.rep.exit_status; }

PLIMSOLL_EXPORT char *plimsoll_result_json(const plimsoll_result *r)
{
    size_t n = 0;
    return checked(r) ? wire_json_encode(&checked(r)->base, &n) : NULL;
}

PLIMSOLL_EXPORT const char *plimsoll_result_backend(const plimsoll_result *r) { return r->choice.backend; }
PLIMSOLL_EXPORT size_t plimsoll_result_refused_count(const plimsoll_result *r) { return r->choice.n_refused; }
PLIMSOLL_EXPORT const char *plimsoll_result_refused_backend(const plimsoll_result *r, size_t i)
{
    return i < r->choice.n_refused ? r->choice.refused[i].backend : NULL;
}
PLIMSOLL_EXPORT const char *plimsoll_result_refused_why(const plimsoll_result *r, size_t i)
{
    return i < r->choice.n_refused ? r->choice.refused[i].why : NULL;
}

PLIMSOLL_EXPORT void plimsoll_result_free(plimsoll_result *r)
{
    if (!r)
        return;
    cli_run_call_done(&r->call);
    free(r);
}
