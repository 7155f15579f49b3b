# bench_http: the HTTP client against `stepq mock` (run on demand).
if(NOT TARGET stepq_http)
    include(${PROJECT_SOURCE_DIR}/worker/http.cmake)
endif()
add_executable(bench_http ${CMAKE_CURRENT_SOURCE_DIR}/http.c)
target_link_libraries(bench_http PRIVATE stepq_http stepq_common)
target_compile_definitions(bench_http PRIVATE
    STEPQ_BIN_DEFAULT="$<TARGET_FILE:stepq>")
add_dependencies(bench_http stepq)
