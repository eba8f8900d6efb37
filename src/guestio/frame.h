/* frame.h: the canonical frames between the daemon (the broker's side) and the confined guestio
 * helper that parses guest-written HTTP (docs/privsep.md). Shared by both sides of the wall:
 * frame.c allocates nothing and makes no syscall.
 *
 * Wire format (STYLE.md §5): a SOCK_STREAM socketpair; every frame is core/frame16.h's 16-byte
 * header with this channel's table for the reader's direction (frame.c), then exactly `len`
 * payload bytes. A type from the other direction or over its cap => the receiver kills the
 * sender; seq is the connection id the daemon assigned in CONN (0 for HELLO).
 * Payloads (all lengths checked against the caps below before anything is used):
 *     HELLO  helper -> daemon, once, after confinement: u32 version (GIO_VERSION)
 *     CALL   helper -> daemon, at most once per connection: u8 method_len (1..32), method
 *            (RFC 9110 token bytes), u16 target_len (1..GIO_TARGET_MAX), target (bytes 0x21..0xff
 *            except 0x7f: verbatim from the request line), u32 body_len (0..GIO_BODY_MAX), body
 *     DONE   helper -> daemon: the helper closed the connection; empty
 *     CONN   daemon -> helper: one accepted connection in SCM_RIGHTS; empty
 *     REPLY  daemon -> helper, once per CALL: u16 status (200..599), u8 ctype_len (0..160),
 *            ctype (0x20..0x7e), u32 body_len (0..GIO_REPLY_MAX), body
 * A payload decoder must consume exactly `len` bytes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/frame16.h"

#define GIO_VERSION 2u /* 2: GCALL (the e2b guard) and GUEST/END (a guest byte stream) */

#define GIO_METHOD_MAX 32u                  /* a method token, as the HTTP parser takes */
#define GIO_TARGET_MAX (16u * 1024)         /* never more than a request head */
#define GIO_BODY_MAX (1u * 1024 * 1024 + 1) /* the broker's 1 MiB cap plus the byte that trips it */
#define GIO_CTYPE_MAX 160u                  /* a Content-Type the head can carry */
#define GIO_REPLY_MAX (4u * 1024 * 1024)    /* the broker's upstream body cap */
#define GIO_CALL_FIXED 7u                   /* u8 + u16 + u32 */
#define GIO_REPLY_FIXED 7u                  /* u16 + u8 + u32 */
/* GCALL (the e2b guard's parsed request, guard mode) */
#define GIO_CRED_MAX 128u                       /* a credential header value (the guard token) */
#define GIO_GPATH_MAX 8192u                     /* the guard's path field (providers.md §5.4) */
#define GIO_GBODY_MAX (2u * 1024 * 1024)        /* the guard's body cap (its JSON request) */
#define GIO_WHY_MAX 120u                        /* why a guard request was refused */
#define GIO_GCALL_FIXED 9u                      /* u8 cred_len + u8 verdict + u8 method + u16 + u32 */
/* GUEST: one re-encoded frame of a guest byte stream (stream mode); the stream's own decoder
 * applies the tighter cap of each of its types. */
#define GIO_GUEST_MAX (16u * 1024 * 1024)

enum gio_type {
    GIO_T_HELLO = 1,  /* helper -> daemon */
    GIO_T_CALL = 2,   /* helper -> daemon */
    GIO_T_DONE = 3,   /* helper -> daemon */
    GIO_T_GCALL = 4,  /* helper -> daemon, guard mode: one parsed guard request (gio_gcall) */
    GIO_T_GUEST = 5,  /* helper -> daemon, stream mode: one canonical guest frame */
    GIO_T_END = 6,    /* helper -> daemon, stream mode: u8 enum gio_end; the helper then exits */
    GIO_T_CONN = 16,  /* daemon -> helper */
    GIO_T_REPLY = 17, /* daemon -> helper */
};

/* Which side is reading: a frame type from the other direction is a protocol violation. */
enum gio_dir {
    GIO_TO_DAEMON,
    GIO_TO_HELPER,
};

/* The payload cap of a type read in direction dir; 0 when the type is not valid there. */
uint32_t gio_max_len(enum gio_dir dir, uint16_t type);

/* Decodes and validates direction, type, flags and len against the type's bounds (and seq: 0
 * for HELLO, non-zero otherwise). Returns 0 or -1. */
int gio_hdr_decode(const uint8_t in[F16_HDR_LEN], enum gio_dir dir, struct f16_hdr *h);

/* A decoded CALL: pointers into the payload; method and target are not NUL-terminated. */
struct gio_call {
    const uint8_t *method, *target, *body;
    size_t method_len, target_len, body_len;
};
/* Strict: lengths in range, method bytes tchar, target bytes 0x21..0xff but not 0x7f, every
 * byte consumed. Returns 0 or -1. */
int gio_call_decode(const uint8_t *p, size_t len, struct gio_call *c);
/* The payload size of a CALL with these parts (0 when a part is out of range). */
size_t gio_call_size(size_t method_len, size_t target_len, size_t body_len);
/* Writes the payload into out (gio_call_size bytes); returns that size or 0 when invalid. */
size_t gio_call_encode(uint8_t *out, size_t cap, const struct gio_call *c);

struct gio_reply {
    int status;
    const uint8_t *ctype, *body;
    size_t ctype_len, body_len;
};
int gio_reply_decode(const uint8_t *p, size_t len, struct gio_reply *r);
size_t gio_reply_size(size_t ctype_len, size_t body_len);
size_t gio_reply_encode(uint8_t *out, size_t cap, const struct gio_reply *r);

int gio_hello_decode(const uint8_t *p, size_t len, uint32_t *version);
void gio_hello_encode(uint8_t out[4], uint32_t version);

/* GCALL payload: u8 cred_len (1..GIO_CRED_MAX), cred (0x21..0x7e), u8 verdict,
 * then for GIO_V_CALL: u8 method (enum gio_gmethod), u16 path_len (1..GIO_GPATH_MAX), path
 * (UTF-8, no NUL), u32 body_len (0..GIO_GBODY_MAX), body (UTF-8); for GIO_V_BAD: u8 why_len
 * (1..GIO_WHY_MAX), why (0x20..0x7e but not '"' or '\\'); for GIO_V_TOO_LARGE nothing. The
 * credential is carried, never judged, by the helper: the daemon compares it. */
enum gio_verdict {
    GIO_V_CALL = 0,      /* a well-formed request: call it */
    GIO_V_BAD = 1,       /* the body is not a valid request: 400 with why */
    GIO_V_TOO_LARGE = 2, /* the body is over GIO_GBODY_MAX: 413 */
};
enum gio_gmethod { GIO_GM_GET, GIO_GM_PUT, GIO_GM_POST, GIO_GM_DELETE, GIO_GM_PATCH, GIO_GM_COUNT };
extern const char *const gio_gmethod_name[GIO_GM_COUNT];
struct gio_gcall {
    const uint8_t *cred, *path, *body, *why;
    size_t cred_len, path_len, body_len, why_len;
    int verdict; /* enum gio_verdict */
    int method;  /* enum gio_gmethod, GIO_V_CALL only */
};
int gio_gcall_decode(const uint8_t *p, size_t len, struct gio_gcall *g);
size_t gio_gcall_size(const struct gio_gcall *g);
size_t gio_gcall_encode(uint8_t *out, size_t cap, const struct gio_gcall *g);

/* END payload: why the helper stopped reading a guest stream. */
enum gio_end {
    GIO_END_CLOSED = 1,   /* the guest side closed (EOF or an error on it) */
    GIO_END_PROTOCOL = 2, /* the guest broke its stream's framing */
};

/* RFC 9110 tchar: the bytes a method may contain. */
bool gio_tchar(uint8_t c);
/* A byte of a raw target: not a control byte, not a space, not DEL (non-ASCII passes through
 * for the broker to refuse). */
static inline bool gio_target_byte(uint8_t c)
{
    return c > 0x20 && c != 0x7f;
}
