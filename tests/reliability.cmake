# Reliability suites of issue 8: fuzz regressions, hostile endpoints and
# the short crash soak. Included at the end of tests/CMakeLists.txt.
stepq_add_check_test(test_fuzz_regressions SOURCES test_fuzz_regressions.c
                     LIBS stepq_worker cjson LABEL unit TIMEOUT 60)
stepq_add_check_test(test_soak SOURCES soak/test_soak.c
                     LABEL integration TIMEOUT 400)
add_dependencies(test_soak stepq)
stepq_add_check_test(test_hostile SOURCES test_hostile.c
                     support/mockproc.c support/e2e.c LIBS cjson
                     LABEL integration TIMEOUT 600)
add_dependencies(test_hostile stepq)
