/* profile_names.c: the character rules of the names a grants file gives (profile_names.h): the
 * profile's own name, environment variable names, and the guest-side global of the JS client. */
#include "profile_names.h"

#include <string.h>

#include "../core/limits.h"
#include "profiles.h"

bool brk_env_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > 128 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

bool brk_profile_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > LIM_GRANT_PROFILE_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

/* Names the client could not survive being shadowed by, and every word that cannot be an
 * identifier in strict-mode or module code. The name is also JSON-quoted where it is used
 * (globalThis["..."]), so this is about a usable global, not about injection. */
static const char *const reserved_globals[] = {
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    "globalThis",
    "Object",
    "Array",
    "Promise",
    "JSON",
    "Error",
    "String",
    "Number",
    "Boolean",
    "Symbol",
    "Function",
    "Reflect",
    "Proxy",
    "Buffer",
    "console",
    "process",
    "require",
    "module",
    "exports",
    "decodeURIComponent",
    "encodeURI",
    NULL,
};

bool brk_global_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > BRK_GLOBAL_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    if (strncmp(s, "__plimsoll", 10) == 0)
        return false;
    for (const char *const *r = reserved_globals; *r; r++)
        if (strcmp(s, *r) == 0)
            return false;
    return true;
}
