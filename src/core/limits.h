/* limits.h: every named maximum on outside input, checked before allocation.
 * Values marked (spec) are the reference's (shared/spec/providers.md §1.4, wire.md §5.4, §18). */
#pragma once

#define LIM_BODY_MAX (8u * 1024 * 1024)         /* (spec) raw request body */
#define LIM_MESSAGE_MAX (8u * 1024 * 1024)      /* (spec) decoded message */
#define LIM_DECODE_ARENA_MAX (16u * 1024 * 1024) /* all a request decodes into: 2 x the message cap */
#define LIM_REPEATED_DEFAULT 1024               /* a repeated field without a limit of its own */
#define LIM_DECODE_VALUES_MAX 65536u            /* repeated elements in one request, all fields */
#define LIM_JSON_IGNORED_MAX 1024u              /* JSON values under unknown keys (or misshapen) */
#define LIM_UNKNOWN_FIELDS_MAX 64u              /* unknown fields in one binary request */
#define LIM_JSON_DEPTH 32                       /* nesting of a request's JSON */
#define LIM_HEADER_MAX (32u * 1024)             /* (spec) request header bytes */
#define LIM_CODE_MAX (256u * 1024)              /* (spec) snippet code */
#define LIM_STEPS_MAX 20                        /* (spec) project steps */
#define LIM_STEP_MAX (16u * 1024)               /* (spec) one step command */
#define LIM_FILES_MAX 200                       /* (spec) project files */
#define LIM_FILES_TOTAL_MAX (4u * 1024 * 1024)  /* (spec) total file content */
#define LIM_PATH_MAX 1024                       /* (spec) file or artifact path */
#define LIM_ARTIFACTS_MAX 100                   /* (spec) artifact paths */
#define LIM_GRANT_PROFILE_MAX 128               /* grant profile name */
#define LIM_RULE_IDENTITIES_MAX 32              /* (spec) approved identities */
#define LIM_RULE_IDENTITY_MAX 256               /* (spec, "roughly") one identity */
#define LIM_MODEL_MAX 64                        /* (spec) module model id */
#define LIM_ROWS_MAX 100000                     /* (spec) module rows (core/module.h checks the rest) */
#define LIM_ROW_VALUES_MAX 1024                 /* values in one module row at decode (64 validated) */
#define LIM_MODULE_ELEMENTS_MAX 1100000u         /* module rows + values in one request (own budget) */
#define LIM_TRACE_ID_MAX 64                     /* (spec) trace id */
#define LIM_TIMEOUT_MS_MAX 300000               /* (spec) RPC-edge clamp */
#define LIM_OUTPUT_MAX (64u * 1024)             /* (spec) guest output per stream */
#define LIM_RESPONSE_MAX (32u * 1024 * 1024)    /* (spec) client response cap */
#define LIM_HEADER_READ_MS 5000u               /* (spec) the whole request head, from accept */
#define LIM_BODY_READ_MS 30000u                 /* (spec) the whole body, from the head */
#define LIM_IDLE_MS 120000u                     /* (spec) no byte moving on a connection */
#define LIM_CONN_PER_PEER 256u                  /* connections per peer address at once */
#define LIM_PENDING_CONNECTIONS 4096u           /* connections waiting for a complete head */
#define LIM_METRICS_PER_PEER 8u                 /* metrics connections per peer address */
#define LIM_TOKEN_MAX 4096                      /* bearer token bytes */
