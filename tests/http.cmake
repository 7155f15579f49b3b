# test_http: the HTTP client against the mock (in process on the same loop,
# and the real `stepq mock` process), plus the request builders and parser.
if(NOT TARGET stepq_http)
    include(${PROJECT_SOURCE_DIR}/worker/http.cmake)
endif()
stepq_add_check_test(test_http
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_http.c
            ${CMAKE_CURRENT_SOURCE_DIR}/support/mockproc.c
    LIBS stepq_http stepq_mock
    LABEL integration
    TIMEOUT 300)
add_dependencies(test_http stepq)
