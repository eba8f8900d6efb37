/* chan_fuzz.c: libFuzzer target for mvc_decode_guest (chan.c), the decoder the confined guestio
 * helper runs on the bytes a guest VM writes to its virtio-serial port (STYLE.md §10; the helper
 * itself is never sanitized, so this is where ASan+UBSan see it), and for the canonical pair of
 * the split: mvc_canon_encode (helper) and mvc_canon_decode (daemon).
 * Invariant checked: the decoder never reads outside its buffer; an accepted frame never claims
 * more bytes than it was given nor more than its type's cap, and its inner lengths add up; a
 * buffer it asks more bytes for is a strict prefix (so a stream is consumed frame by frame); an
 * accepted frame re-encodes to exactly its own bytes, which the daemon's decoder accepts; and
 * the daemon's decoder never accepts what is not exactly one valid frame. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"
#include "vmchan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        struct mvc_frame f;
        size_t used = 0;
        enum mvc_decode_status st = mvc_decode_guest(data + off, size - off, &f, &used);
        if (st != MVC_FRAME) {
            /* the daemon's decoder takes no more than the stream decoder: a copy of exactly the rest */
            uint8_t *rest = malloc(size - off);
            if (rest) {
                memcpy(rest, data + off, size - off);
                if (mvc_canon_decode(rest, size - off, &f) == 0)
                    abort();
                free(rest);
            }
            break;
        }
        if (used < F16_HDR_LEN || used > size - off || used - F16_HDR_LEN != f.hdr.len ||
            f.hdr.len > mvc_max_len(f.hdr.type) || f.hdr.type < MVC_READY || f.hdr.flags != 0)
            abort();
        uint8_t *enc = malloc(used);
        struct mvc_frame g;
        if (!enc)
            break;
        if (mvc_canon_encode(enc, used, &f) != used || memcmp(enc, data + off, used) != 0 ||
            mvc_canon_decode(enc, used, &g) < 0 || g.hdr.type != f.hdr.type || g.hdr.len != f.hdr.len)
            abort();
        free(enc);
        if (f.hdr.type == MVC_RESULT &&
            ((size_t)QF_RESULT_FIXED + f.u.result.out_len + f.u.result.err_len != f.hdr.len ||
             f.u.result.out_len > LIM_OUTPUT_MAX || f.u.result.err_len > LIM_OUTPUT_MAX))
            abort();
        if (f.hdr.type == MVC_HOST_CALL &&
            ((size_t)QF_HOST_CALL_FIXED + f.u.host_call.method_len + f.u.host_call.path_len + f.u.host_call.body_len !=
                 f.hdr.len ||
             !qf_text_ok(f.u.host_call.path, f.u.host_call.path_len)))
            abort();
        if ((f.hdr.type == MVC_READY || f.hdr.type == MVC_PROBE_RESULT) &&
            (f.u.text.len != f.hdr.len || !mvc_text_ok(f.u.text.p, f.u.text.len)))
            abort();
        if (f.hdr.type == MVC_PROJECT_RESULT) {
            struct mvc_project_walk w;
            struct mvc_step st;
            struct mvc_artifact a;
            uint32_t ns = 0, na = 0;
            uint64_t art = 0;
            mvc_project_walk_init(&w, &f);
            while (mvc_project_next_step(&w, &st) == 1) {
                if (st.out_len > MVC_STEP_OUT_MAX || st.err_len > MVC_STEP_OUT_MAX)
                    abort();
                ns++;
            }
            while (mvc_project_next_artifact(&w, &a) == 1) {
                if (a.path_len == 0 || a.path_len > MVC_PATH_MAX)
                    abort();
                art += a.len;
                na++;
            }
            if (ns != f.u.project.n_steps || na != f.u.project.n_artifacts || art > MVC_ARTIFACTS_TOTAL_MAX ||
                f.u.project.error_len > MVC_ERROR_MAX)
                abort();
        }
        off += used;
    }
    return 0;
}
