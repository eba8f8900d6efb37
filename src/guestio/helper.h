/* helper.h: the modes of the plimsoll-guestio helper (helper.c, helper_stream.c). */
#pragma once

enum gio_helper_mode {
    GIO_MODE_HTTP,   /* the docker grant socket: HTTP -> CALL, REPLY -> HTTP */
    GIO_MODE_GUARD,  /* the e2b guard: HTTP + its JSON body -> GCALL, REPLY -> HTTP */
    GIO_MODE_STREAM, /* a microvm channel: guest frames -> GUEST ... END; the daemon writes to the
                        guest itself */
};

/* Stream mode, after confinement and HELLO: takes the one CONN, then reads, decodes and forwards
 * guest frames until the guest's side ends or breaks its framing. Never returns. */
_Noreturn void gio_stream_helper_main(void);
