/* pylang_test.c: which steps name the Python interpreter (pylang.h). */
#include "pylang.h"
#include "unit.h"

int main(void)
{
    CHECK(plm_step_names_python("python3 main.py"));
    CHECK(plm_step_names_python("python main.py"));
    CHECK(plm_step_names_python("python3.11 -c 'print(1)'"));
    CHECK(plm_step_names_python("/usr/bin/python3 main.py"));
    CHECK(plm_step_names_python("cd src && python3 -m app"));
    CHECK(plm_step_names_python("echo start; python3 x.py | tee log"));
    CHECK(plm_step_names_python("$(python3 -c 1)"));
    CHECK(plm_step_names_python("sh -c \"python3 x.py\""));
    CHECK(plm_step_names_python("env X=1 python3 x.py"));
    CHECK(!plm_step_names_python("node gen.js > out.py"));
    CHECK(!plm_step_names_python("cat python3.txt"));
    CHECK(!plm_step_names_python("./pythonic"));
    CHECK(!plm_step_names_python("python3.x"));
    CHECK(!plm_step_names_python("python3."));
    CHECK(!plm_step_names_python("python2"));
    CHECK(!plm_step_names_python("mypython3"));
    CHECK(!plm_step_names_python(""));
    CHECK(!plm_step_names_python(NULL));

    const char *node_steps[] = {"node main.js", "tsc x.ts"};
    const char *py_steps[] = {"node main.js", "python3 plot.py"};
    struct plm_request r = {.kind = PLM_KIND_PROJECT, .project = {.steps = node_steps, .n_steps = 2}};
    CHECK(!plm_project_is_python(&r));
    r.project.steps = py_steps;
    CHECK(plm_project_is_python(&r));
    r.kind = PLM_KIND_JAVASCRIPT;
    CHECK(!plm_project_is_python(&r));
    CHECK(!plm_project_is_python(NULL));

    char obs[160];
    struct plm_step_result st = {.exit_code = 0};
    st.out.data = (uint8_t *)"plimsoll-python 3.11.2 1.24.2 1.5.3 3.6.3\n";
    st.out.len = strlen((const char *)st.out.data);
    CHECK(plm_py_probe_judge(&st, obs, sizeof obs));
    CHECK_STR(obs, "Python 3.11.2, numpy 1.24.2, pandas 1.5.3, matplotlib 3.6.3");
    st.out.data = (uint8_t *)"plimsoll-python 3.11.2 1.24.2 1.5.3\n";
    st.out.len = strlen((const char *)st.out.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    st.out.data = (uint8_t *)"plimsoll-python 3.11.2 1.24.2 1.5.3 3.6.3 extra\n";
    st.out.len = strlen((const char *)st.out.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    st.out.data = (uint8_t *)"plimsoll-python 3.11.2 1.24.2 1.5.3 3\x1b[2J\n";
    st.out.len = strlen((const char *)st.out.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    st.out.data = (uint8_t *)"hello\nplimsoll-python 3.11.2 1.24.2 1.5.3 3.6.3\n";
    st.out.len = strlen((const char *)st.out.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    st.out.len = 0;
    st.exit_code = 1;
    st.err.data = (uint8_t *)"Traceback\nModuleNotFoundError: No module named 'numpy'\n";
    st.err.len = strlen((const char *)st.err.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    CHECK_STR(obs, "absent: exit 1: ModuleNotFoundError: No module named 'numpy'");
    st.exit_code = 127;
    st.err.data = (uint8_t *)"sh: 1: python3: not found\x07";
    st.err.len = strlen((const char *)st.err.data);
    CHECK(!plm_py_probe_judge(&st, obs, sizeof obs));
    CHECK_STR(obs, "absent: exit 127: sh: 1: python3: not found?");
    CHECK(!plm_py_probe_judge(NULL, obs, sizeof obs));
    return unit_done();
}
