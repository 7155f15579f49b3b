# policy: classify/decide unit tables and `stepq policy check` on the case
# tables in tests/cases/.
stepq_add_check_test(test_policy
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_policy.c
    LIBS stepq_worker
    LABEL unit
    TIMEOUT 120)
