# stepq_http: the worker's HTTP client (libcurl multi on libuv) and the chat
# and http step builders. Included from worker/CMakeLists.txt (and, until
# then, from tests/http.cmake and bench/http.cmake).
add_library(stepq_http STATIC
    ${PROJECT_SOURCE_DIR}/worker/http.c
    ${PROJECT_SOURCE_DIR}/worker/http_build.c)
target_link_libraries(stepq_http PUBLIC stepq_common CURL::libcurl
                      PkgConfig::UV cjson m)
