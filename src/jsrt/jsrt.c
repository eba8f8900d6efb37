/* jsrt.c: one snippet's life inside the engine: globals, event loop, deadline, output capture.
 * Owns: the QuickJS runtime and context (built once in the zygote, a copy-on-write copy in each
 *   worker), its two capped output buffers, the list of unhandled promise rejections, Math.random.
 * Trusts: nothing the snippet does. jsrt_new runs in the zygote and evaluates only our prelude
 *   and warm-up; the rest runs after the worker's filter is loaded (worker.c), so it makes no
 *   syscall beyond the allow-list: memory via malloc, clocks via the vDSO, and the frames
 *   written by the finish and host callbacks (worker.c). With a grant, the one native the guest
 *   can reach is __plimsoll_host_send, which only asks the monitor (it holds no authority).
 * Invariant: nothing a run can observe is shared between workers: per-process state the engine
 *   keeps (Math.random's generator, performance.timeOrigin, the stack top) is reset by
 *   jsrt_adopt/jsrt_run in each worker. Every way a run can end (completion, uncaught error,
 *   unhandled rejection, process.exit, the deadline in the interrupt handler, a virtual timer
 *   past the deadline) goes through finish() exactly once, with the output kept so far. Output
 *   is bytes appended up to LIM_OUTPUT_MAX per stream; what does not fit is dropped and flagged. */
#include "jsrt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "../core/limits.h"
#include "../core/runframe.h"
#include "prelude.h"
#include <quickjs.h> /* the engine (angle brackets: not our provider header) */

/* Exit status of a run that hit its deadline (timeout(1), the reference). */
#define JSRT_EXIT_TIMEOUT 124
/* Pending unhandled rejections tracked at once; more than this ends the run as unhandled. */
#define JSRT_REJ_MAX 1024

struct jsrt_rej {
    JSValue promise, reason;
};

struct jsrt {
    JSRuntime *rt;
    JSContext *ctx;
    JSValue hooks, h_uncaught, h_next_due, h_fire_next, h_exit_code, h_begin;
    struct jsrt_out out, err;
    int64_t start_ns, deadline_ns;
    uint32_t timeout_ms;
    JSValue eval_promise;
    struct jsrt_rej rej[JSRT_REJ_MAX];
    size_t n_rej;
    bool rej_overflow;
    jsrt_finish_fn *finish;
    jsrt_host_fn *host;  /* the grant's transport; NULL without a grant */
    uint32_t host_calls; /* HOST_CALLs sent in this run (the frame's call_no) */
    uint64_t random_state; /* Math.random's (nat_random), seeded per worker by jsrt_adopt */
    bool exit_called;      /* process.exit: finish() was reached from inside guest code */
    bool print_completion; /* sessions: print the cell's completion value, as a REPL does */
};

static void out_append(struct jsrt_out *o, const void *p, size_t n)
{
    size_t room = LIM_OUTPUT_MAX - o->len;
    if (n > room) {
        n = room;
        o->truncated = true;
    }
    memcpy(o->data + o->len, p, n);
    o->len += (uint32_t)n;
}

__attribute__((noreturn)) static void finish(struct jsrt *r, int32_t code, bool timed_out)
{
    r->finish(code, timed_out, &r->out, &r->err);
    abort(); /* unreachable: finish exits */
}

/* The deadline, checked by QuickJS every few thousand operations (also inside regex
 * backtracking), so `while(true){}` and catastrophic patterns end on time with their output. */
static int on_interrupt(JSRuntime *rt, void *opaque)
{
    (void)rt;
    struct jsrt *r = opaque;
    if (clock_mono_ns() >= r->deadline_ns)
        finish(r, JSRT_EXIT_TIMEOUT, true);
    return 0;
}

static void on_rejection(JSContext *ctx, JSValueConst promise, JSValueConst reason, bool is_handled,
                         void *opaque)
{
    struct jsrt *r = opaque;
    if (is_handled) {
        for (size_t i = 0; i < r->n_rej; i++) {
            if (JS_VALUE_GET_PTR(r->rej[i].promise) == JS_VALUE_GET_PTR(promise)) {
                JS_FreeValue(ctx, r->rej[i].promise);
                JS_FreeValue(ctx, r->rej[i].reason);
                r->rej[i] = r->rej[--r->n_rej];
                return;
            }
        }
        return;
    }
    if (r->n_rej == JSRT_REJ_MAX) {
        r->rej_overflow = true;
        return;
    }
    r->rej[r->n_rej].promise = JS_DupValue(ctx, promise);
    r->rej[r->n_rej].reason = JS_DupValue(ctx, reason);
    r->n_rej++;
}

/* ---- natives handed to the prelude (never global) ---- */

static struct jsrt *self(JSContext *ctx)
{
    return JS_GetContextOpaque(ctx);
}

static JSValue nat_write(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    int32_t fd = 0;
    if (argc < 2 || JS_ToInt32(ctx, &fd, argv[0]) < 0)
        return JS_EXCEPTION;
    size_t n;
    const char *s = JS_ToCStringLen(ctx, &n, argv[1]);
    if (!s)
        return JS_EXCEPTION;
    struct jsrt *r = self(ctx);
    out_append(fd == 2 ? &r->err : &r->out, s, n);
    JS_FreeCString(ctx, s);
    return JS_UNDEFINED;
}

static JSValue nat_exit(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    int32_t code = 0;
    if (argc > 0 && JS_ToInt32(ctx, &code, argv[0]) < 0)
        return JS_EXCEPTION;
    /* As a process would: the status is the low byte. */
    self(ctx)->exit_called = true;
    finish(self(ctx), code & 0xff, false);
}

static JSValue nat_elapsed(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val, (void)argc, (void)argv;
    return JS_NewFloat64(ctx, (double)(clock_mono_ns() - self(ctx)->start_ns) / 1e6);
}

static JSValue nat_promise_state(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    if (argc < 1)
        return JS_NewInt32(ctx, -1);
    /* -1: not a promise; 0 pending; 1 fulfilled; 2 rejected. */
    return JS_NewInt32(ctx, (int32_t)JS_PromiseState(ctx, argv[0]));
}

static JSValue nat_promise_result(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    if (argc < 1 || JS_PromiseState(ctx, argv[0]) < 0)
        return JS_UNDEFINED;
    return JS_PromiseResult(ctx, argv[0]);
}

static JSValue nat_is_error(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    return JS_NewBool(ctx, argc > 0 && JS_IsError(argv[0]));
}

static JSValue job_call(JSContext *ctx, int argc, JSValueConst *argv)
{
    (void)argc;
    return JS_Call(ctx, argv[0], JS_UNDEFINED, 0, NULL);
}

/* queueMicrotask/nextTick: a job whose exception is an uncaught exception (as in Node), not a
 * rejected promise. */
static JSValue nat_enqueue(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    if (argc < 1 || !JS_IsFunction(ctx, argv[0]))
        return JS_ThrowTypeError(ctx, "callback must be a function");
    if (JS_EnqueueJob(ctx, job_call, 1, argv) < 0)
        return JS_EXCEPTION;
    return JS_UNDEFINED;
}

/* ---- the grant's transport: the only native the guest can reach, and only with a grant ---- */

/* What the broker answers a method or target it cannot match; used for the ones a frame cannot
 * carry (over the caps, a NUL, not UTF-8), which the broker would refuse with 403 anyway
 * (client_js.h: a transport answers an unsendable target with 403 itself). */
static const char forbidden_text[] = "forbidden by sandbox capability allowlist\n";

/* __plimsoll_host_send(method, path, body) -> {status, body}, synchronously (client_js.h): one
 * HOST_CALL to the monitor, blocking until its HOST_REPLY. The body is decoded as UTF-8 with
 * replacement. The worker's deadline cannot fire while it blocks; the monitor keeps it instead
 * and answers QF_HR_DEADLINE, which ends the run here as timed out. */
static JSValue nat_host_send(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    struct jsrt *r = self(ctx);
    if (!r->host)
        return JS_ThrowTypeError(ctx, "host api broker unavailable");
    if (clock_mono_ns() >= r->deadline_ns)
        finish(r, JSRT_EXIT_TIMEOUT, true);
    if (argc < 2)
        return JS_ThrowTypeError(ctx, "__plimsoll_host_send(method, path[, body])");
    size_t mlen = 0, plen = 0, blen = 0;
    const char *m = JS_ToCStringLen(ctx, &mlen, argv[0]);
    const char *p = m ? JS_ToCStringLen(ctx, &plen, argv[1]) : NULL;
    const char *b = NULL;
    bool has_body = argc > 2 && !JS_IsUndefined(argv[2]) && !JS_IsNull(argv[2]);
    if (p && has_body)
        b = JS_ToCStringLen(ctx, &blen, argv[2]);
    if (!m || !p || (has_body && !b)) {
        JS_FreeCString(ctx, m);
        JS_FreeCString(ctx, p);
        return JS_EXCEPTION;
    }
    struct jsrt_host_reply rep = {0};
    if (mlen == 0 || mlen > QF_HOST_METHOD_MAX || plen == 0 || plen > QF_HOST_PATH_MAX ||
        !qf_text_ok((const uint8_t *)m, mlen) || !qf_text_ok((const uint8_t *)p, plen)) {
        rep.status = 403;
        rep.body = (const uint8_t *)forbidden_text;
        rep.body_len = sizeof forbidden_text - 1;
    } else {
        /* Past 1 MiB the broker answers 413 whatever follows: one byte more is enough to say so. */
        if (blen > QF_HOST_BODY_MAX)
            blen = QF_HOST_BODY_MAX;
        r->host(++r->host_calls, (const uint8_t *)m, mlen, (const uint8_t *)p, plen, (const uint8_t *)b, blen, &rep);
    }
    JS_FreeCString(ctx, m);
    JS_FreeCString(ctx, p);
    if (b)
        JS_FreeCString(ctx, b);
    /* The monitor says the run's time is up (or it is, by our own clock): end it here with the
     * output so far, as the interrupt handler would. */
    if (rep.deadline || clock_mono_ns() >= r->deadline_ns)
        finish(r, JSRT_EXIT_TIMEOUT, true);

    size_t n = qf_utf8_repair(rep.body, rep.body_len, NULL);
    uint8_t *text = malloc(n ? n : 1);
    if (!text) {
        free(rep.buf);
        return JS_ThrowOutOfMemory(ctx);
    }
    qf_utf8_repair(rep.body, rep.body_len, text);
    free(rep.buf);
    JSValue body = JS_NewStringLen(ctx, (const char *)text, n);
    free(text);
    if (JS_IsException(body))
        return body;
    JSValue obj = JS_NewObject(ctx);
    if (JS_IsException(obj)) {
        JS_FreeValue(ctx, body);
        return obj;
    }
    if (JS_DefinePropertyValueStr(ctx, obj, "status", JS_NewInt32(ctx, (int32_t)rep.status), JS_PROP_C_W_E) < 0 ||
        JS_DefinePropertyValueStr(ctx, obj, "body", body, JS_PROP_C_W_E) < 0) {
        JS_FreeValue(ctx, obj);
        return JS_EXCEPTION;
    }
    return obj;
}

/* Math.random, replacing the engine's: QuickJS keeps its generator state in the context, which
 * the zygote builds once, so every worker would inherit (and repeat) one sequence. This one is the
 * engine's own algorithm (xorshift64*, same mapping to [0, 1)) on state jsrt_adopt seeds from
 * the zygote's getrandom for each worker. */
static JSValue nat_random(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val, (void)argc, (void)argv;
    struct jsrt *r = self(ctx);
    uint64_t x = r->random_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->random_state = x;
    union {
        double d;
        uint64_t u;
    } u = {.u = ((uint64_t)0x3ff << 52) | ((x * 0x2545F4914F6CDD1DULL) >> 12)};
    return JS_NewFloat64(ctx, u.d - 1.0);
}

static const JSCFunctionListEntry natives[] = {
    JS_CFUNC_DEF("write", 2, nat_write),
    JS_CFUNC_DEF("exit", 1, nat_exit),
    JS_CFUNC_DEF("elapsed", 0, nat_elapsed),
    JS_CFUNC_DEF("promiseState", 1, nat_promise_state),
    JS_CFUNC_DEF("promiseResult", 1, nat_promise_result),
    JS_CFUNC_DEF("isError", 1, nat_is_error),
    JS_CFUNC_DEF("enqueue", 1, nat_enqueue),
};

static JSValue hook(JSContext *ctx, JSValueConst hooks, const char *name)
{
    JSValue f = JS_GetPropertyStr(ctx, hooks, name);
    if (!JS_IsFunction(ctx, f)) {
        JS_FreeValue(ctx, f);
        return JS_EXCEPTION;
    }
    return f;
}

/* Zygote warm-up (see the prelude's warm()): the compiler, the interpreter and console's
 * formatter build their lazily created shapes, atoms and caches once, before any fork. */
/* Evaluates src (len bytes, JS_Eval flags) and then calls the prelude's hook `name`, dropping
 * both results: the warm-ups only want the pages and caches these paths touch. -1 when either
 * threw. */
static int eval_then_hook(struct jsrt *r, const char *src, size_t len, int flags, const char *name)
{
    JSContext *ctx = r->ctx;
    JSValue v = JS_Eval(ctx, src, len, "<warm>", flags);
    JSValue h = hook(ctx, r->hooks, name);
    JSValue w = JS_IsException(h) ? JS_EXCEPTION : JS_Call(ctx, h, r->hooks, 0, NULL);
    int rc = JS_IsException(v) || JS_IsException(w) ? -1 : 0;
    JS_FreeValue(ctx, v);
    JS_FreeValue(ctx, h);
    JS_FreeValue(ctx, w);
    return rc;
}

static int warm(struct jsrt *r)
{
    static const char src[] = "(function(){ let s = 0; for (let i = 0; i < 10; i++) s += i; return [s, `${s}`]; })()";
    return eval_then_hook(r, src, sizeof src - 1, JS_EVAL_TYPE_GLOBAL, "warm");
}

/* Math.random becomes nat_random, with the builtin's attributes (writable, configurable, not
 * enumerable) and name, so only its state differs from the engine's. */
static int replace_random(JSContext *ctx)
{
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue math = JS_GetPropertyStr(ctx, global, "Math");
    JS_FreeValue(ctx, global);
    if (!JS_IsObject(math)) {
        JS_FreeValue(ctx, math);
        return -1;
    }
    JSValue fn = JS_NewCFunction(ctx, nat_random, "random", 0);
    int rc = JS_IsException(fn) ? -1
                                : JS_DefinePropertyValueStr(ctx, math, "random", fn,
                                                            JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    JS_FreeValue(ctx, math);
    return rc < 0 ? -1 : 0;
}

struct jsrt *jsrt_new(uint32_t memory_mb, size_t js_stack_bytes, jsrt_finish_fn *fin)
{
    struct jsrt *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->finish = fin;
    r->random_state = 1; /* never used before jsrt_adopt seeds it; xorshift needs non-zero */
    r->out.data = malloc(LIM_OUTPUT_MAX);
    r->err.data = malloc(LIM_OUTPUT_MAX);
    r->rt = JS_NewRuntime();
    if (!r->out.data || !r->err.data || !r->rt)
        return NULL; /* the zygote exits; nothing to release */
    r->start_ns = clock_mono_ns();
    r->deadline_ns = INT64_MAX;
    JS_SetMemoryLimit(r->rt, (size_t)memory_mb * 1024 * 1024);
    JS_SetMaxStackSize(r->rt, js_stack_bytes);
    /* Atomics.wait would block in futex(2), which the filter forbids: refuse it in JS. */
    JS_SetCanBlock(r->rt, 0);
    JS_SetInterruptHandler(r->rt, on_interrupt, r);
    JS_SetHostPromiseRejectionTracker(r->rt, on_rejection, r);
    r->ctx = JS_NewContext(r->rt);
    if (!r->ctx)
        return NULL;
    JSContext *ctx = r->ctx;
    JS_SetContextOpaque(ctx, r);
    if (replace_random(ctx) < 0)
        return NULL;

    JSValue native = JS_NewObject(ctx);
    if (JS_IsException(native))
        return NULL;
    JS_SetPropertyFunctionList(ctx, native, natives, sizeof natives / sizeof natives[0]);
    size_t n;
    const char *src = prelude_source(&n);
    JSValue fn = JS_Eval(ctx, src, n, "<plimsoll>", JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_STRICT);
    if (JS_IsException(fn))
        return NULL;
    r->hooks = JS_Call(ctx, fn, JS_UNDEFINED, 1, (JSValueConst *)&native);
    JS_FreeValue(ctx, fn);
    JS_FreeValue(ctx, native);
    if (JS_IsException(r->hooks))
        return NULL;
    r->h_uncaught = hook(ctx, r->hooks, "uncaught");
    r->h_next_due = hook(ctx, r->hooks, "nextDue");
    r->h_fire_next = hook(ctx, r->hooks, "fireNext");
    r->h_exit_code = hook(ctx, r->hooks, "exitCode");
    r->h_begin = hook(ctx, r->hooks, "begin");
    if (JS_IsException(r->h_uncaught) || JS_IsException(r->h_next_due) ||
        JS_IsException(r->h_fire_next) || JS_IsException(r->h_exit_code) || JS_IsException(r->h_begin))
        return NULL;
    r->eval_promise = JS_UNDEFINED;
    if (warm(r) < 0)
        return NULL;
    /* Leave no garbage for a worker's first collection to find. */
    JS_RunGC(r->rt);
    return r;
}

int jsrt_adopt(struct jsrt *r, uint64_t seed)
{
    /* The stack limit is measured from the top recorded at JS_NewRuntime; the worker's frames
     * are the zygote's, but measure again from here rather than rely on that. */
    JS_UpdateStackTop(r->rt);
    r->random_state = seed ? seed : 1;
    /* The first writes to the engine's pages are copy-on-write faults (~20 us each on the
     * development VM, ~50 for a small run): take them now, before READY, by going through the
     * run's own path once: an async script evaluation and console's formatter. Function scope
     * only, so no binding or output survives; the jobs it queued are drained here. */
    static const char src[] = "(() => { const w = [6 * 7, 'x']; return `${w[0]}` + typeof console.log; })()";
    int rc = eval_then_hook(r, src, sizeof src - 1, JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_ASYNC, "warmRun");
    for (JSContext *jctx; rc == 0;) {
        int j = JS_ExecutePendingJob(r->rt, &jctx);
        if (j == 0)
            break;
        if (j < 0)
            rc = -1;
    }
    if (r->n_rej || r->rej_overflow)
        rc = -1; /* not ours to leave for the snippet */
    r->start_ns = clock_mono_ns();
    return rc;
}

/* Prints "Uncaught <inspect(err)>" on stderr through the prelude; when that itself fails (out of
 * memory, a hostile getter), falls back to C so the run still ends with a message. */
__attribute__((noreturn)) static void die_uncaught(struct jsrt *r, JSValue exc, bool in_promise)
{
    JSContext *ctx = r->ctx;
    JSValue args[2] = {exc, JS_NewBool(ctx, in_promise)};
    JSValue s = JS_Call(ctx, r->h_uncaught, r->hooks, 2, (JSValueConst *)args);
    const char *txt = NULL;
    size_t n = 0;
    if (!JS_IsException(s))
        txt = JS_ToCStringLen(ctx, &n, s);
    if (txt) {
        out_append(&r->err, txt, n);
        JS_FreeCString(ctx, txt);
    } else {
        JS_FreeValue(ctx, JS_GetException(ctx));
        const char *m = NULL;
        if (!JS_IsNull(exc) && !JS_IsUndefined(exc) && !JS_IsUninitialized(exc))
            m = JS_ToCString(ctx, exc);
        static const char pre[] = "Uncaught ";
        out_append(&r->err, pre, sizeof pre - 1);
        if (m) {
            out_append(&r->err, m, strlen(m));
            JS_FreeCString(ctx, m);
        } else {
            static const char oom[] = "InternalError: out of memory";
            out_append(&r->err, oom, sizeof oom - 1);
        }
    }
    out_append(&r->err, "\n", 1);
    finish(r, 1, false);
}

static void drain_jobs(struct jsrt *r)
{
    for (;;) {
        JSContext *jctx;
        int rc = JS_ExecutePendingJob(r->rt, &jctx);
        if (rc == 0)
            return;
        if (rc < 0)
            die_uncaught(r, JS_GetException(r->ctx), false);
    }
}

/* Node (>= 15): a rejection still unhandled once the microtasks drained ends the process. The
 * promise returned by the top-level (async) evaluation is the script itself failing. */
static void check_rejections(struct jsrt *r)
{
    if (r->rej_overflow) {
        static const char m[] = "Uncaught (in promise) too many unhandled rejections\n";
        out_append(&r->err, m, sizeof m - 1);
        finish(r, 1, false);
    }
    if (r->n_rej == 0)
        return;
    bool top = JS_VALUE_GET_PTR(r->rej[0].promise) == JS_VALUE_GET_PTR(r->eval_promise);
    die_uncaught(r, r->rej[0].reason, !top);
}

/* A grant: the native transport as a plain, deletable global (the client captures it and
 * deletes it), then the client text (and the profile's preamble after it) as a classic script.
 * An exception there is the run's uncaught error, like one in the snippet. */
static void install_grant(struct jsrt *r, const char *client, size_t client_len)
{
    JSContext *ctx = r->ctx;
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue fn = JS_NewCFunction(ctx, nat_host_send, "__plimsoll_host_send", 3);
    int rc = JS_IsException(fn) ? -1
                                : JS_DefinePropertyValueStr(ctx, global, "__plimsoll_host_send", fn,
                                                            JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE);
    JS_FreeValue(ctx, global);
    if (rc < 0)
        die_uncaught(r, JS_GetException(ctx), false);
    if (client_len == 0)
        return;
    JSValue v = JS_Eval(ctx, client, client_len, "<plimsoll-host-api>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(v))
        die_uncaught(r, JS_GetException(ctx), false);
    JS_FreeValue(ctx, v);
}

/* Sessions: the evaluation's completion value (the async script's promise resolves to
 * { value }) printed in inspect form through console.dir, unless it is undefined. An exception
 * while printing is the cell's uncaught error, as it would be in the cell itself. */
static void print_completion(struct jsrt *r)
{
    JSContext *ctx = r->ctx;
    if (JS_PromiseState(ctx, r->eval_promise) != JS_PROMISE_FULFILLED)
        return;
    JSValue res = JS_PromiseResult(ctx, r->eval_promise);
    JSValue v = JS_IsObject(res) ? JS_GetPropertyStr(ctx, res, "value") : JS_UNDEFINED;
    JS_FreeValue(ctx, res);
    if (JS_IsException(v))
        die_uncaught(r, JS_GetException(ctx), false);
    if (JS_IsUndefined(v))
        return;
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue console = JS_GetPropertyStr(ctx, global, "console");
    JSValue dir = JS_GetPropertyStr(ctx, console, "dir");
    JSValue out = JS_Call(ctx, dir, console, 1, (JSValueConst *)&v);
    JS_FreeValue(ctx, dir);
    JS_FreeValue(ctx, console);
    JS_FreeValue(ctx, global);
    JS_FreeValue(ctx, v);
    if (JS_IsException(out))
        die_uncaught(r, JS_GetException(ctx), false);
    JS_FreeValue(ctx, out);
    drain_jobs(r);
}

void jsrt_set_session(struct jsrt *r, bool session)
{
    r->print_completion = session;
}

void jsrt_run(struct jsrt *r, const char *code, size_t len, uint32_t timeout_ms, const char *client, size_t client_len,
              jsrt_host_fn *host)
{
    JSContext *ctx = r->ctx;
    r->timeout_ms = timeout_ms;
    r->start_ns = clock_mono_ns();
    r->deadline_ns = r->start_ns + (int64_t)timeout_ms * 1000000;
    r->host = host;
    /* performance.timeOrigin is this run's start, not the zygote's (which built the prelude). */
    JSValue b = JS_Call(ctx, r->h_begin, r->hooks, 0, NULL);
    if (JS_IsException(b))
        die_uncaught(r, JS_GetException(ctx), false);
    JS_FreeValue(ctx, b);
    if (host)
        install_grant(r, client, client_len);

    /* Script (not module) semantics like `node -e`, with top-level await allowed (the async
     * flag makes the evaluation return a promise). */
    JSValue v = JS_Eval(ctx, code, len, "[eval]", JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_ASYNC);
    if (JS_IsException(v))
        die_uncaught(r, JS_GetException(ctx), false);
    r->eval_promise = v;

    for (;;) {
        drain_jobs(r);
        check_rejections(r);
        JSValue d = JS_Call(ctx, r->h_next_due, r->hooks, 0, NULL);
        if (JS_IsException(d))
            die_uncaught(r, JS_GetException(ctx), false);
        double due = -1;
        JS_ToFloat64(ctx, &due, d);
        JS_FreeValue(ctx, d);
        if (due < 0)
            break;
        /* Only timers remain: the virtual clock jumps to the next one, unless it lies past
         * the deadline, in which case the run has timed out (without waiting for it). */
        if (due > (double)r->timeout_ms)
            finish(r, JSRT_EXIT_TIMEOUT, true);
        JSValue f = JS_Call(ctx, r->h_fire_next, r->hooks, 0, NULL);
        if (JS_IsException(f))
            die_uncaught(r, JS_GetException(ctx), false);
        JS_FreeValue(ctx, f);
    }
    if (r->print_completion)
        print_completion(r);
    JSValue c = JS_Call(ctx, r->h_exit_code, r->hooks, 0, NULL);
    int32_t code_out = 0;
    if (JS_IsException(c) || JS_ToInt32(ctx, &code_out, c) < 0)
        code_out = 1;
    finish(r, code_out & 0xff, false);
}

bool jsrt_exit_called(const struct jsrt *r)
{
    return r->exit_called;
}

void jsrt_next_run(struct jsrt *r)
{
    /* What the last run left behind for this one: output, pending rejections, its promise. The
     * context itself (globals, functions, imports) is what a session keeps. */
    r->out.len = r->err.len = 0;
    r->out.truncated = r->err.truncated = false;
    for (size_t i = 0; i < r->n_rej; i++) {
        JS_FreeValue(r->ctx, r->rej[i].promise);
        JS_FreeValue(r->ctx, r->rej[i].reason);
    }
    r->n_rej = 0;
    r->rej_overflow = false;
    r->host = NULL;
    r->host_calls = 0;
}
