/* card_project.c: the project part of the run card and of its JSON (see card.h).
 * Trusts: no server string: commands and paths print through cli_put_safe.
 * Invariant: step output and artifact contents never reach the text card (only sizes), and the
 * JSON carries them only for a checked answer. */
#include <string.h>

#include "card.h"

static const char *outcome_name(Plimsoll__V1__ProjectOutcome o)
{
    switch (o) {
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED: return "completed";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_SETUP_FAILED: return "setup failed";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_TIMED_OUT: return "timed out";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_PROTOCOL_ERROR: return "protocol error";
    default: return "unspecified";
    }
}

/* An image by its signature (PNG, JPEG, GIF, WebP): what a chart saved by a project looks like. */
static bool is_image(const ProtobufCBinaryData *c)
{
    static const struct {
        const char *sig;
        size_t len, at;
    } sigs[] = {{"\x89PNG\r\n\x1a\n", 8, 0}, {"\xff\xd8\xff", 3, 0}, {"GIF8", 4, 0}, {"WEBP", 4, 8}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (c->len >= sigs[i].at + sigs[i].len && !memcmp(c->data + sigs[i].at, sigs[i].sig, sigs[i].len))
            return true;
    return false;
}

void cli_card_print_project(FILE *f, const Plimsoll__V1__ProjectResult *p, bool checked)
{
    fprintf(f, "%-16s %s", "outcome:", outcome_name(p->outcome));
    if (p->outcome_detail && *p->outcome_detail) {
        fputs(": ", f);
        cli_put_safe(f, p->outcome_detail, "");
    }
    fputc('\n', f);
    for (size_t i = 0; i < p->n_steps; i++) {
        const Plimsoll__V1__StepResult *st = p->steps[i];
        if (!st)
            continue;
        char label[32];
        snprintf(label, sizeof label, "step %zu:", i + 1);
        fprintf(f, "%-16s exit %d%s, %lld ms, %zu/%zu bytes out/err%s: ", label, st->exit_code,
                st->timed_out ? " (timed out)" : "", (long long)st->duration_ms, st->stdout.len, st->stderr.len,
                st->stdout_truncated || st->stderr_truncated ? " (truncated)" : "");
        cli_put_safe(f, st->command, "\"\"");
        fputc('\n', f);
    }
    size_t bytes = 0, images = 0, image_bytes = 0;
    for (size_t i = 0; i < p->n_artifacts; i++) {
        size_t n = p->artifacts[i] ? p->artifacts[i]->content.len : 0;
        bytes += n;
        if (p->artifacts[i] && is_image(&p->artifacts[i]->content)) {
            images++;
            image_bytes += n;
        }
    }
    /* Images (charts) only as a count and a size: the card, and the run-card page made from it,
     * never shows artifact content (docs/ui.md). */
    fprintf(f, "%-16s %zu, %zu bytes", "artifacts:", p->n_artifacts, bytes);
    if (images)
        fprintf(f, ", %zu image%s (%zu bytes)", images, images == 1 ? "" : "s", image_bytes);
    fprintf(f, "%s%s\n", p->artifacts_truncated ? " (truncated)" : "",
            checked ? "" : " (withheld: the record does not vouch for them)");
}

int cli_card_json_project(json_t *j, const Plimsoll__V1__ProjectResult *p, bool withheld)
{
    json_t *o = json_object(), *steps = json_array(), *arts = json_array();
    int bad = !o || !steps || !arts;
    bad |= json_object_set_new(j, "project", o);
    bad |= json_object_set_new(o, "steps", steps);
    bad |= json_object_set_new(o, "artifacts", arts);
    if (bad)
        return -1;
    bad |= json_object_set_new(o, "outcome", json_string(outcome_name(p->outcome)));
    if (p->outcome_detail && *p->outcome_detail)
        bad |= json_object_set_new(o, "outcome_detail", json_string(p->outcome_detail));
    bad |= json_object_set_new(o, "artifacts_truncated", json_boolean(p->artifacts_truncated));
    for (size_t i = 0; i < p->n_steps; i++) {
        const Plimsoll__V1__StepResult *st = p->steps[i];
        json_t *s = json_object();
        if (!st || !s || json_array_append_new(steps, s) < 0)
            return -1;
        bad |= json_object_set_new(s, "command", json_string(st->command ? st->command : ""));
        bad |= json_object_set_new(s, "exit_code", json_integer(st->exit_code));
        bad |= json_object_set_new(s, "timed_out", json_boolean(st->timed_out));
        bad |= json_object_set_new(s, "duration_ms", json_integer(st->duration_ms));
        bad |= json_object_set_new(s, "stdout_truncated", json_boolean(st->stdout_truncated));
        bad |= json_object_set_new(s, "stderr_truncated", json_boolean(st->stderr_truncated));
        if (withheld) {
            bad |= json_object_set_new(s, "output_withheld", json_true());
        } else {
            bad |= cli_json_set_bytes(s, "stdout", "stdout_encoding", &st->stdout);
            bad |= cli_json_set_bytes(s, "stderr", "stderr_encoding", &st->stderr);
        }
    }
    for (size_t i = 0; i < p->n_artifacts; i++) {
        const Plimsoll__V1__Artifact *a = p->artifacts[i];
        json_t *s = json_object();
        if (!a || !s || json_array_append_new(arts, s) < 0)
            return -1;
        bad |= json_object_set_new(s, "path", json_string(a->path ? a->path : ""));
        bad |= json_object_set_new(s, "bytes", json_integer((json_int_t)a->content.len));
        if (!withheld)
            bad |= cli_json_set_bytes(s, "content", "encoding", &a->content);
    }
    return bad ? -1 : 0;
}

