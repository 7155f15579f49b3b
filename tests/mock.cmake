# test_mock: `stepq mock` over loopback (forks the real binary) and
# mock_start in process. mockproc.c is the fork/exec helper.
stepq_add_check_test(test_mock
    SOURCES test_mock.c support/mockproc.c support/httpcl.c
    LIBS stepq_mock
    LABEL integration
    TIMEOUT 120)

# test_mock_limits: the limiter shapes (token bucket, fixed and sliding
# window) and their provider headers, over loopback with the real binary.
stepq_add_check_test(test_mock_limits
    SOURCES test_mock_limits.c support/mockproc.c support/httpcl.c
    LIBS stepq_mock
    LABEL integration
    TIMEOUT 120)
