/* api.h: the objects behind include/plimsoll.h, shared by api.c (clients, Describe, runs, results)
 * and api_session.c. Every public function is a thin wrapper over client.h: no check or request
 * exists twice. */
#pragma once
#include "../../include/plimsoll.h"
#include "../core/cleanup.h"
#include "client.h"

#define PLIMSOLL_EXPORT __attribute__((visibility("default")))

struct plimsoll_client {
    struct plc_pool pool;
    bool direct; /* one daemon: no Describe, no placement, every call to b[0] */
};

struct plimsoll_info {
    Plimsoll__V1__DescribeResponse *d; /* owned */
};

struct plimsoll_result {
    struct plc_choice choice; /* choice.floor is the floor sent; call.floor points at it */
    struct cli_run_call call; /* call.o is the outcome of any call kind */
    plimsoll_status status;
    char reason[32];
};

void api_err(char *err, size_t n, const char *msg);
plimsoll_status api_status(enum cli_verdict v);
/* A result for a call that ends before any send (bad argument or out of memory). */
plimsoll_result *api_result_new(void);
/* A result owned by the scope until handed on with take_ptr(). */
DEFINE_CLEANUP(plimsoll_result, plimsoll_result_free)
#define cleanup_result cleanup_(plimsoll_result_free)
/* The internal requirement for a public one (prefer adapted); `adapter` must outlive it. */
struct api_prefer {
    int (*fn)(const plimsoll_info *a, const plimsoll_info *b, void *ctx);
    void *ctx;
};
void api_requirement(const plimsoll_requirement *in, struct api_prefer *adapter, struct plc_requirement *out);
