# test_mock: `stepq mock` over loopback (forks the real binary) and
# mock_start in process. mockproc.c is the fork/exec helper.
stepq_add_check_test(test_mock
    SOURCES test_mock.c support/mockproc.c
    LIBS stepq_mock
    LABEL integration
    TIMEOUT 120)
