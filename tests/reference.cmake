# test_reference: docs/reference.md against the binary (the commands and
# flags of `stepq --help` and of each command's --help), and the man page
# and reference as `cmake --install --component docs` installs them.
stepq_add_check_test(test_reference SOURCES test_reference.c
                     LABEL integration TIMEOUT 200)
add_dependencies(test_reference stepq stepq_man)
set_property(TEST test_reference APPEND PROPERTY ENVIRONMENT
             "STEPQ_BUILD_DIR=${PROJECT_BINARY_DIR}"
             "STEPQ_CMAKE=${CMAKE_COMMAND}")
