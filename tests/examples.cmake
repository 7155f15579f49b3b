# test_examples: every example job file through `stepq enqueue`, the shell
# and Python enqueue examples, `stepq demo` end to end (its summary against
# `stepq status --json`), and `cmake --install` into a DESTDIR with
# examples/enqueue.c built against the installed pkg-config file.
stepq_add_check_test(test_examples SOURCES test_examples.c LIBS cjson
                     LABEL integration TIMEOUT 900)
add_dependencies(test_examples stepq stepq_man libstepq libstepq_static)
# A sanitizer build's libstepq.so needs the sanitizer runtime in the
# program that links it.
if(STEPQ_SANITIZE)
    set(examples_cflags "-fsanitize=address,undefined")
else()
    set(examples_cflags "")
endif()
set_property(TEST test_examples APPEND PROPERTY ENVIRONMENT
             "STEPQ_BUILD_DIR=${PROJECT_BINARY_DIR}"
             "STEPQ_CMAKE=${CMAKE_COMMAND}"
             "STEPQ_CC=${CMAKE_C_COMPILER}"
             "STEPQ_INSTALL_PREFIX=${CMAKE_INSTALL_PREFIX}"
             "STEPQ_TEST_CFLAGS=${examples_cflags}")
