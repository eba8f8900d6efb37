/* cleanup_json.h: scope-bound ownership of jansson values (header-only glue for the layers that
 * speak JSON; core's own library never includes it). `json_t *v cleanup_json = NULL;` */
#pragma once
#include <jansson.h>

#include "cleanup.h"

DEFINE_CLEANUP(json_t, json_decref)
#define cleanup_json __attribute__((cleanup(cleanup_fn_json_decref)))
