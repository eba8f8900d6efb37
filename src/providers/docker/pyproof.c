/* pyproof.c: the startup proof behind `python` in the project environment's languages.
 * Owns: one probe project run at startup and the card entry it leaves.
 * Trusts: nothing the probe prints; plm_py_probe_judge() reads it as guest bytes.
 * Invariant: python_proven is set only after PLM_PY_PROBE_STEP ran in the project image under the
 * configured runtime, with the lockdown every run gets, and printed its version line. */
#include <stdio.h>

#include "../../core/pylang.h"
#include "internal.h"

/* Importing pandas under runsc on this machine kind takes a few seconds (docs/python.md); the
 * proof runs once, so it gets the project ceiling rather than a tight bound. */
#define PY_PROOF_MS 60000u

int dock_python_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    const char *steps[] = {PLM_PY_PROBE_STEP};
    struct plm_request req = {.kind = PLM_KIND_PROJECT, .project = {.steps = steps, .n_steps = 1}};
    struct plm_result res = {0};
    struct plm_err e = {0};
    char obs[160];
    bool ok = false;
    if (dock_project_exec(s, PY_PROOF_MS, &req, NULL, &res, &e) < 0)
        snprintf(obs, sizeof obs, "absent: the probe project failed: %.120s", e.msg);
    else
        ok = plm_py_probe_judge(res.project.n_steps == 1 ? &res.project.steps[0] : NULL, obs, sizeof obs);
    plm_result_done(&res);
    if (ok) {
        if (ev_add_check(ev, "project.python", "python3 imports numpy, pandas, matplotlib in the project image", true,
                         "%s", obs) < 0)
            return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
        atomic_store(&s->python_proven, true);
        return 0;
    }
    /* Not a failed check (that would stop startup for node projects too): the card says Python
     * is absent and why, Describe leaves it out, and a Python project is refused unsupported. */
    if (ev_add_confinement(ev, "python: %.120s", obs) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    return 0;
}

int dock_session_python_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    struct plm_step_result st = {0};
    struct plm_err e = {0};
    char obs[160];
    bool ok = false;
    if (dock_session_probe_cell(s, "python", PLM_PY_PROBE_CODE, PY_PROOF_MS, &st, &e) < 0)
        snprintf(obs, sizeof obs, "absent: the probe session failed: %.120s", e.msg);
    else
        ok = plm_py_probe_judge(&st, obs, sizeof obs);
    plm_bytes_done(&st.out);
    plm_bytes_done(&st.err);
    int r = ok ? ev_add_check(ev, "session.python", "a session's Python cell imports numpy, pandas, matplotlib", true,
                              "%s", obs)
               : ev_add_confinement(ev, "session python: %.120s", obs);
    if (r < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    atomic_store(&s->session_python_proven, ok);
    return 0;
}
