/* test_upstream.h: a scripted HTTP/1.1 upstream on 127.0.0.1:<ephemeral> for the broker tests.
 * One acceptor thread and one thread per connection (keep-alive honoured). Every request is
 * recorded (method, target, header block, body) so tests can assert exactly what reached the
 * upstream. Tests only; never linked into the daemon.
 *
 * Scripted answers by target:
 *   /health            status tu->health_status (default 200)
 *   /v1/redirect       302 with Location: http://evil.example/steal
 *   /v1/busy           503 with Retry-After: tu->retry_after (default "10")
 *   /v1/quota          429 with Retry-After: tu->retry_after
 *   /v1/big            200 with Content-Length 5 MiB, then 1 KiB and silence until closed
 *   /v1/endless        200 chunked, 64 KiB chunks until the client goes away
 *   /v1/hang           never answers; waits until the client closes
 *   /v1/slow           waits while tu->hold is set, then 200
 *   /v1/ctype-bad      200 with a control byte in Content-Type
 *   /v1/no-ctype       200 without Content-Type
 *   /v1/status-999     "HTTP/1.1 999 Odd"
 *   /v1/text           200 text/plain "plain text"
 *   /v1/...            200 application/json {"ok":true} with Set-Cookie and X-Upstream
 *   anything else      404 */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TU_MAX_REQS 2048

struct tu_req {
    char method[16];
    char target[1024];
    char headers[4096]; /* the header lines as received, names lower-cased, "\n"-separated */
    char *body;
    size_t body_len;
};

struct tu_conn;

struct tu {
    int lfd;
    uint16_t port;
    char origin[64]; /* "http://127.0.0.1:<port>" */
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool hold; /* /v1/slow waits while set */
    int health_status;
    char retry_after[32];
    struct tu_req reqs[TU_MAX_REQS];
    size_t n_reqs; /* requests recorded (capped at TU_MAX_REQS) */
    size_t hits;   /* every request, recorded or not */
    struct tu_conn *conns;
};

int tu_start(struct tu *tu);
void tu_stop(struct tu *tu);
/* Requests whose target equals `target` (NULL: all). */
size_t tu_count(struct tu *tu, const char *target);
/* Waits up to ms for tu_count(target) >= n. */
bool tu_wait_count(struct tu *tu, const char *target, size_t n, unsigned ms);
void tu_set_hold(struct tu *tu, bool hold);
void tu_reset(struct tu *tu);
