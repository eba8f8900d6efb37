/* prelude.c: the worker's JavaScript prelude (prelude.js), embedded at build time.
 * Owns: nothing at run time; the bytes are a constant array in the binary.
 * Trusts: the build: embed_js.py turned prelude.js into prelude_js.h (meson.build), refusing a
 *   NUL byte or invalid UTF-8, so the source is exactly the file under review.
 * Invariant: prelude_source() returns the whole file, NUL-terminated, without the terminator
 *   in *len. */
#include "prelude.h"

#include "prelude_js.h"

const char *prelude_source(size_t *len)
{
    *len = sizeof prelude_js - 1;
    return prelude_js;
}
