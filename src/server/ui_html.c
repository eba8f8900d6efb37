/* ui_html.c: HTML escaping for the UI page.
 * Trusts: no string: provider strings, caller ids and card text all pass through here.
 * Invariant: nothing written can open a tag, an attribute or an entity, and no control
 * character reaches the page (they print as \xNN, the CLI's own escape). */
#include <stdio.h>
#include <string.h>

#include "../lib/client.h"
#include "ui.h"

void ui_html(FILE *f, const char *s)
{
    if (!s)
        return;
    size_t len = strlen(s);
    bool utf8 = cli_utf8_valid((const uint8_t *)s, len);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': fputs("&amp;", f); continue;
        case '<': fputs("&lt;", f); continue;
        case '>': fputs("&gt;", f); continue;
        case '"': fputs("&quot;", f); continue;
        case '\'': fputs("&#39;", f); continue;
        case '\n':
        case '\t': fputc(c, f); continue;
        default: break;
        }
        /* C0, DEL and (in valid UTF-8) the C1 controls U+0080..U+009F, encoded C2 80..C2 9F. */
        bool c1 = utf8 && c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] < 0xa0;
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
            fprintf(f, "\\x%02x", c);
        } else if (c1) {
            fprintf(f, "\\x%02x\\x%02x", c, (unsigned char)s[i + 1]);
            i++;
        } else {
            fputc(c, f);
        }
    }
}
