/* prelude.h: the JavaScript source of the worker's Node-like globals (prelude.c). */
#pragma once
#include <stddef.h>

/* A function expression taking the native object and returning the event-loop hooks. */
const char *prelude_source(size_t *len);
