/* plimsoll.h: libplimsoll, the C client of plimsolld (docs/library.md).
 *
 * One client talks to one daemon (plimsoll_client_new) or places each request on one of several
 * (plimsoll_pool_new + plimsoll_pool_add / plimsoll_pool_load), each daemon with the caller's own
 * token and CA. Every answer is checked before it is handed back: the request id echo, the run
 * record's digests against the request sent and the result received, and the isolation that ran
 * against the floor. What a call concluded is one plimsoll_status:
 *
 *   PLIMSOLL_OK                 checked, at or above the floor
 *   PLIMSOLL_REFUSED            refused before dispatch (a NotDispatched mark): nothing ran
 *   PLIMSOLL_EVIDENCE_MISMATCH  an answer whose tier is below the floor, or whose record does not
 *                               check: something may have run, and the answer does not vouch for it
 *   PLIMSOLL_ERROR              a server error without a mark: something may have run
 *   PLIMSOLL_TRANSPORT          no usable answer (plimsoll_result_not_sent: provably nothing sent)
 *   PLIMSOLL_INVALID            a bad argument, judged here: nothing was sent
 *
 * Thread safety: a client, pool or session is used by one thread at a time; distinct ones may be
 * used from distinct threads. Strings returned by accessors live as long as their object. */
#ifndef PLIMSOLL_H
#define PLIMSOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLIMSOLL_PROTOCOL 3

typedef enum plimsoll_status {
    PLIMSOLL_OK = 0,
    PLIMSOLL_REFUSED = 1,
    PLIMSOLL_EVIDENCE_MISMATCH = 2,
    PLIMSOLL_ERROR = 3,
    PLIMSOLL_TRANSPORT = 4,
    PLIMSOLL_INVALID = 5,
} plimsoll_status;

/* "ok", "refused", "evidence_mismatch", "error", "transport", "invalid". */
const char *plimsoll_status_name(plimsoll_status s);

typedef struct plimsoll_client plimsoll_client; /* one daemon, or a pool of them */
typedef struct plimsoll_info plimsoll_info;     /* one daemon's Describe */
typedef struct plimsoll_result plimsoll_result; /* the checked outcome of one call */
typedef struct plimsoll_session plimsoll_session;

/* ---- clients and pools ---- */

/* One daemon at url (http:// or https://). token: the bearer token, or NULL; ca_file: a PEM CA
 * bundle for https, or NULL for the system's. NULL on a bad argument, with the reason in err. */
plimsoll_client *plimsoll_client_new(const char *url, const char *token, const char *ca_file, char *err,
                                     size_t err_len);
/* An empty pool; add backends before the first call. */
plimsoll_client *plimsoll_pool_new(void);
/* A backend: name (1..63 of A-Z a-z 0-9 . _ -, unique), url, its own token and CA (NULL: none). */
int plimsoll_pool_add(plimsoll_client *pool, const char *name, const char *url, const char *token,
                      const char *ca_file, char *err, size_t err_len);
/* Backends from a JSON file: [{"name", "url", "token_file"?, "ca"?}, ...] (docs/cli.md). */
int plimsoll_pool_load(plimsoll_client *pool, const char *path, char *err, size_t err_len);
/* How long a backend's Describe is trusted for placement (default 60 s). */
void plimsoll_pool_set_ttl(plimsoll_client *pool, double seconds);
void plimsoll_client_free(plimsoll_client *c);
/* Reads a token file (one visible-ASCII token, blanks around it ignored). *token is wiped and
 * freed by plimsoll_token_free. */
int plimsoll_token_load(const char *path, char **token, char *err, size_t err_len);
void plimsoll_token_free(char *token);
/* Frees a string this library returned. */
void plimsoll_free(void *p);

size_t plimsoll_client_backends(const plimsoll_client *c);
const char *plimsoll_client_backend_name(const plimsoll_client *c, size_t i);

/* ---- Describe ---- */

/* Describes backend i now (0 for a one-daemon client). PLIMSOLL_OK with *out, else the status
 * and, when result is non-NULL, a result saying why. */
plimsoll_status plimsoll_describe(plimsoll_client *c, size_t i, plimsoll_info **out, plimsoll_result **result);
const char *plimsoll_info_provider(const plimsoll_info *d);
const char *plimsoll_info_isolation(const plimsoll_info *d);
uint32_t plimsoll_info_protocol(const plimsoll_info *d);
/* kind: "javascript", "project", "module" or "session". */
int plimsoll_info_supports(const plimsoll_info *d, const char *kind);
/* The whole answer as canonical JSON; free with plimsoll_free. */
char *plimsoll_info_json(const plimsoll_info *d);
void plimsoll_info_free(plimsoll_info *d);

/* ---- placement ---- */

/* What a request needs of a daemon (all optional; zero-initialise). A pool filters its backends by
 * what each states in its cached Describe, ranks the survivors with prefer (else their order) and
 * tries the next one only after a refusal marked unsupported, isolation or capacity, or a connection
 * that carried none of the request. minimum_isolation is merged with the request's own floor (the
 * stronger wins) and that floor is what the daemon is sent. A one-daemon client ignores everything
 * but minimum_isolation. */
typedef struct plimsoll_requirement {
    const char *backend;           /* this backend only */
    const char *provider;          /* Describe's provider, e.g. "docker" */
    const char *minimum_isolation; /* process, container, kernel or vm */
    const char *environment;       /* the payload kind's environment identity */
    int (*prefer)(const plimsoll_info *a, const plimsoll_info *b, void *ctx); /* < 0: a first */
    void *prefer_ctx;
} plimsoll_requirement;

/* ---- runs ---- */

typedef struct plimsoll_snippet {
    const char *code;              /* JavaScript, UTF-8 */
    const char *grant_profile;     /* NULL: none */
    const char *minimum_isolation; /* NULL: none */
    int32_t timeout_ms;            /* 0: the daemon's default */
} plimsoll_snippet;

/* Each returns the status and, in *out (always set unless out is NULL), the result. */
plimsoll_status plimsoll_run_snippet(plimsoll_client *c, const plimsoll_snippet *s, const plimsoll_requirement *req,
                                     plimsoll_result **out);
/* project_json: the wire's JSON form of a ProjectRun ({"files":[...],"steps":[...],...}). */
plimsoll_status plimsoll_run_project(plimsoll_client *c, const char *project_json, const char *minimum_isolation,
                                     int32_t timeout_ms, const plimsoll_requirement *req, plimsoll_result **out);
/* module_json: the wire's JSON form of a ModuleRun. */
plimsoll_status plimsoll_run_module(plimsoll_client *c, const char *module_json, const char *minimum_isolation,
                                    int32_t timeout_ms, const plimsoll_requirement *req, plimsoll_result **out);

plimsoll_status plimsoll_result_status(const plimsoll_result *r);
/* The server's message for a refusal or error; our reason for a mismatch or transport failure. */
const char *plimsoll_result_message(const plimsoll_result *r);
/* A refusal's NotDispatched reason ("isolation", "capacity", ...), else NULL. */
const char *plimsoll_result_refusal(const plimsoll_result *r);
/* 1 when the run record checked (OK, or an evidence mismatch on the tier alone). */
int plimsoll_result_record_checked(const plimsoll_result *r);
/* 1 when a transport failure provably sent nothing. */
int plimsoll_result_not_sent(const plimsoll_result *r);
const char *plimsoll_result_provider(const plimsoll_result *r);
const char *plimsoll_result_isolation(const plimsoll_result *r);
const char *plimsoll_result_record_sha256(const plimsoll_result *r);
const char *plimsoll_result_request_id(const plimsoll_result *r);
/* The guest's output and exit code of a snippet, only when the record checked (else NULL / -1). */
const uint8_t *plimsoll_result_stdout(const plimsoll_result *r, size_t *len);
const uint8_t *plimsoll_result_stderr(const plimsoll_result *r, size_t *len);
int plimsoll_result_exit_code(const plimsoll_result *r);
/* The exit status `plimsoll` would return for this call (docs/cli.md). */
int plimsoll_result_exit_status(const plimsoll_result *r);
/* The checked answer as JSON (NULL without one); free with plimsoll_free. */
char *plimsoll_result_json(const plimsoll_result *r);
/* Placement: the backend that answered ("" none), and those that refused before it. */
const char *plimsoll_result_backend(const plimsoll_result *r);
size_t plimsoll_result_refused_count(const plimsoll_result *r);
const char *plimsoll_result_refused_backend(const plimsoll_result *r, size_t i);
const char *plimsoll_result_refused_why(const plimsoll_result *r, size_t i);
void plimsoll_result_free(plimsoll_result *r);

/* ---- sessions ---- */

/* Opens a session (language "javascript" or "python"), placed once on a pool: every cell goes to
 * the daemon that opened it. *opened (optional) says where and why not. */
plimsoll_status plimsoll_session_open(plimsoll_client *c, const char *language, const char *minimum_isolation,
                                      int32_t timeout_ms, const plimsoll_requirement *req, plimsoll_session **out,
                                      plimsoll_result **opened);
/* Runs one cell; its checked stdout in *output and the card lines (stderr, chain) in *report, both
 * malloc'd (free with plimsoll_free; either pointer may be NULL). */
plimsoll_status plimsoll_session_cell(plimsoll_session *s, const char *code, char **output, char **report);
const char *plimsoll_session_backend(const plimsoll_session *s);
/* Closes it and checks the close summary against the chain; frees s either way. */
plimsoll_status plimsoll_session_close(plimsoll_session *s, char **report);

#ifdef __cplusplus
}
#endif
#endif
