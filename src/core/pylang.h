/* pylang.h: whether a project asks for Python (docs/python.md, "Which projects are Python").
 * A project has no language field on the wire; a step that names the interpreter is the only
 * statement a caller makes. A provider whose startup proof did not import the data libraries
 * refuses such a project `unsupported` before anything starts, where otherwise the step would
 * fail inside a started sandbox with "python3: not found". */
#pragma once
#include <stdbool.h>

#include "request.h"

/* True when a step's command holds a shell word python, python3 or python3.N (with or without a
 * directory: /usr/bin/python3), delimited by the start, blanks or ; & | ( ) ` $ ' ". Only the
 * interpreter names count: `node gen.js > out.py` is not a Python project. */
bool plm_step_names_python(const char *step);
/* True for a project request with at least one such step. */
bool plm_project_is_python(const struct plm_request *r);

/* The startup proof (issue 20): the imports every Python claim rests on, then one line naming the
 * versions. Run as a project step in the tier's real sandbox, and as a session's Python cell in a
 * real session sandbox where sessions list python. */
#define PLM_PY_PROBE_CODE                                                                              \
    "import sys, numpy, pandas, matplotlib; print(\"plimsoll-python\", sys.version.split()[0], "           \
    "numpy.__version__, pandas.__version__, matplotlib.__version__)"
#define PLM_PY_PROBE_STEP "python3 -c '" PLM_PY_PROBE_CODE "'"

/* Judges the probe step's result (guest bytes): true only for exit 0 and one line
 * "plimsoll-python V V V V" of short version words. observed gets what the card shows: the
 * versions, or why Python is absent (exit status and the last stderr line, printable ASCII only). */
bool plm_py_probe_judge(const struct plm_step_result *st, char *observed, size_t cap);
