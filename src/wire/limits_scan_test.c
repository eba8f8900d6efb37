/* limits_scan_test.c: the count limits on raw request bytes, JSON and binary, at and past each
 * limit, under both JSON spellings and escaped keys, packed and unpacked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"
#include "limits_scan.h"
#include "sandbox.pb-c.h"
#include "unit.h"

static const ProtobufCMessageDescriptor *RUN = &plimsoll__v1__run_request__descriptor;

/* {"protocol":3,"<outer>":{"<key>":[<n x elem>]}} */
static int json_n(const char *outer, const char *key, const char *elem, size_t n, struct plm_err *err)
{
    size_t cap = 64 + strlen(outer) + strlen(key) + n * (strlen(elem) + 1);
    char *s = malloc(cap);
    int o = snprintf(s, cap, "{\"protocol\":3,\"%s\":{\"%s\":[", outer, key);
    for (size_t i = 0; i < n; i++)
        o += snprintf(s + o, cap - (size_t)o, "%s%s", i ? "," : "", elem);
    o += snprintf(s + o, cap - (size_t)o, "]}}");
    int rc = wire_scan_json(RUN, s, (size_t)o, err);
    free(s);
    return rc;
}

static size_t put_varint(unsigned char *p, size_t v)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* RunRequest{protocol 3, project{files: n x {}}} */
static int bin_files(size_t n, struct plm_err *err)
{
    unsigned char *b = malloc(2 * n + 16);
    size_t o = 0;
    b[o++] = 0x08, b[o++] = 0x03, b[o++] = 0x5a;
    o += put_varint(b + o, 2 * n);
    for (size_t i = 0; i < n; i++)
        b[o++] = 0x0a, b[o++] = 0x00;
    int rc = wire_scan_binary(RUN, b, o, err);
    free(b);
    return rc;
}

int main(void)
{
    struct plm_err err = {0};
    CHECK(json_n("project", "files", "{}", LIM_FILES_MAX, &err) == 0);
    CHECK(json_n("project", "files", "{}", LIM_FILES_MAX + 1, &err) < 0 && strstr(err.msg, "more than 200"));
    CHECK(json_n("project", "\\u0066iles", "{}", LIM_FILES_MAX + 1, &err) < 0);
    CHECK(json_n("project", "steps", "\"a\"", LIM_STEPS_MAX, &err) == 0);
    CHECK(json_n("project", "steps", "\"a\"", LIM_STEPS_MAX + 1, &err) < 0);
    CHECK(json_n("softwareRule", "identities", "\"a\"", LIM_RULE_IDENTITIES_MAX + 1, &err) < 0);
    CHECK(json_n("software_rule", "identities", "\"a\"", LIM_RULE_IDENTITIES_MAX + 1, &err) < 0);
    CHECK(json_n("module", "rows", "{\"values\":[1,2]}", LIM_ROWS_MAX, &err) == 0);
    CHECK(json_n("module", "rows", "{}", LIM_ROWS_MAX + 1, &err) < 0);
    /* module rows and values have their own budget (LIM_MODULE_ELEMENTS_MAX), apart from the
     * request-wide one: 100 rows of 1000 values pass; 1100 rows of 1000 do not */
    CHECK(json_n("module", "rows", "{\"values\":[1,1,1,1,1,1,1,1,1,1]}", 1000, &err) == 0);
    for (int rows = 100; rows <= 1100; rows += 1000) {
        size_t cap = (size_t)rows * 2100 + 64;
        char *s = malloc(cap);
        int o = snprintf(s, cap, "{\"protocol\":3,\"module\":{\"rows\":[");
        for (int r = 0; r < rows; r++) {
            o += snprintf(s + o, cap - (size_t)o, "%s{\"values\":[", r ? "," : "");
            for (int v = 0; v < 1000; v++)
                o += snprintf(s + o, cap - (size_t)o, "%s0", v ? "," : "");
            o += snprintf(s + o, cap - (size_t)o, "]}");
        }
        o += snprintf(s + o, cap - (size_t)o, "]}}");
        int rc = wire_scan_json(RUN, s, (size_t)o, &err);
        CHECK(rows == 100 ? rc == 0 : rc < 0 && strstr(err.msg, "module rows and values") && err.refusal == PLM_REFUSAL_REQUEST);
        free(s);
    }
    /* unknown content is budgeted; misshapen known content too */
    CHECK(json_n("project", "nope", "1", LIM_JSON_IGNORED_MAX - 8, &err) == 0);
    CHECK(json_n("project", "nope", "1", LIM_JSON_IGNORED_MAX + 1, &err) < 0 && strstr(err.msg, "unknown keys"));
    CHECK(json_n("project", "files", "[]", LIM_JSON_IGNORED_MAX + 1, &err) < 0);
    /* structure the walker cannot follow is refused, strings hide structure */
    CHECK(wire_scan_json(RUN, "{\"a\":[1,2}", 10, &err) < 0 && strstr(err.msg, "invalid JSON"));
    CHECK(wire_scan_json(RUN, "{\"a\":\"[{]\\\"\"}", 13, &err) == 0);
    CHECK(wire_scan_json(RUN, "{\"a\"", 4, &err) < 0);
    CHECK(wire_scan_json(RUN, "", 0, &err) == 0);
    /* binary */
    CHECK(bin_files(LIM_FILES_MAX, &err) == 0);
    CHECK(bin_files(LIM_FILES_MAX + 1, &err) < 0 && strstr(err.msg, "more than 200"));
    CHECK(bin_files(4000000, &err) < 0);
    const unsigned char twice[] = {0x08, 0x03, 0x08, 0x03};
    CHECK(wire_scan_binary(RUN, twice, sizeof twice, &err) < 0 && strstr(err.msg, "given twice"));
    const unsigned char trunc[] = {0x08, 0x03, 0x5a, 0x05, 0x0a};
    CHECK(wire_scan_binary(RUN, trunc, sizeof trunc, &err) < 0 && strstr(err.msg, "malformed"));
    const unsigned char group[] = {0x0b};
    CHECK(wire_scan_binary(RUN, group, sizeof group, &err) < 0);
    /* module{rows{values: packed 1025 doubles}} */
    {
        size_t nv = LIM_ROW_VALUES_MAX + 1, o = 0;
        unsigned char *b = calloc(1, nv * 8 + 32);
        unsigned char row[16], mod[16];
        size_t rl = 0, ml = 0;
        b[o++] = 0x08, b[o++] = 0x03;
        size_t packed = nv * 8;
        row[rl++] = 0x0a;
        rl += put_varint(row + rl, packed); /* ModuleRow.values header */
        mod[ml++] = 0x12;                   /* ModuleRun.rows */
        ml += put_varint(mod + ml, rl + packed);
        b[o++] = 0x62; /* RunRequest.module = 12 */
        o += put_varint(b + o, ml + rl + packed);
        memcpy(b + o, mod, ml), o += ml;
        memcpy(b + o, row, rl), o += rl;
        o += packed;
        CHECK(wire_scan_binary(RUN, b, o, &err) < 0 && strstr(err.msg, "ModuleRow.values"));
        free(b);
    }
    return unit_done();
}
