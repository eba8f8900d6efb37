/* card.h: the run card, one library below both the `plimsoll` client (src/cli) and the daemon's
 * web UI (src/server/ui_*.c), so the card a person reads in a terminal and in the browser is one
 * renderer. Built on libplimsoll's internal types (src/lib/client.h): a card prints a checked
 * report and decides nothing.
 * Owns: formatting only (card.c: the run card and its --json object, and the Describe summary;
 * card_project.c: the project part; card_bytes.c: bytes as JSON text or base64). */
#pragma once
#include "../lib/client.h"

/* ---- card.c: printing ---- */

void cli_card_print(FILE *f, const struct cli_run_report *r);
/* The --json object for a run; NULL out of memory. */
json_t *cli_card_json(const struct cli_run_report *r);

/* "[backend NAME] refused before: a: why; b: why" and a newline: where a session was placed. */
void cli_print_placement(FILE *f, const struct plc_choice *c);

/* Prints a DescribeResponse as text. */
void cli_describe_print(FILE *f, const Plimsoll__V1__DescribeResponse *d);

/* ---- card_project.c: the project part of a run card (outcome, each step, artifacts) and of its
 * JSON. Step output and artifact bytes appear in the JSON only, and only when `checked` /
 * not `withheld`: a record that does not check does not vouch for them. ---- */
void cli_card_print_project(FILE *f, const Plimsoll__V1__ProjectResult *p, bool checked);
int cli_card_json_project(json_t *j, const Plimsoll__V1__ProjectResult *p, bool withheld);

/* ---- card_bytes.c (a leaf: card.c and card_project.c both call it) ---- */

/* Sets k to the bytes as text when valid UTF-8 (enc_k "utf-8"), else standard padded base64
 * (enc_k "base64"). -1 out of memory. */
int cli_json_set_bytes(json_t *o, const char *k, const char *enc_k, const ProtobufCBinaryData *b);
