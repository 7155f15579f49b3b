# install.cmake: the man page (generated at build time from the --help
# texts by man-page.cmake), the user documentation and the examples. The
# binary, libstepq, stepq.h and stepq.pc have their install rules next to
# their targets (cli/, lib/).
#
# The man page and docs/reference.md (which the man page points to) form
# the "docs" component, so that `cmake --install BUILD --component docs`
# installs just them (tests/test_reference.c does).
#
# The generator runs the freshly built stepq; leak checking is off for it
# because a sanitizer build must not fail over a help text.
set(STEPQ_MAN_PAGE ${PROJECT_BINARY_DIR}/stepq.1)
add_custom_command(OUTPUT ${STEPQ_MAN_PAGE}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
            ${CMAKE_COMMAND} -DSTEPQ=$<TARGET_FILE:stepq>
            -DOUT=${STEPQ_MAN_PAGE} -DVERSION=${PROJECT_VERSION}
            -P ${PROJECT_SOURCE_DIR}/cmake/man-page.cmake
    DEPENDS stepq ${PROJECT_SOURCE_DIR}/cmake/man-page.cmake
    COMMENT "Generating stepq.1 from the --help texts"
    VERBATIM)
add_custom_target(stepq_man ALL DEPENDS ${STEPQ_MAN_PAGE})
install(FILES ${STEPQ_MAN_PAGE} DESTINATION share/man/man1 COMPONENT docs)
install(FILES ${PROJECT_SOURCE_DIR}/docs/reference.md
              ${PROJECT_SOURCE_DIR}/docs/mock.md
              ${PROJECT_SOURCE_DIR}/docs/endpoints.md
              ${PROJECT_SOURCE_DIR}/docs/openapi.json
        DESTINATION share/doc/stepq COMPONENT docs)

set(ex ${PROJECT_SOURCE_DIR}/examples)
install(FILES ${ex}/nightly-changelog.json ${ex}/batch-prompts.jsonl
              ${ex}/extract-json.json ${ex}/stepq.json ${ex}/enqueue.c
              ${ex}/mock-free-tier.json ${ex}/mock-faults.json
              ${ex}/mock-endpoints.json
              ${ex}/crontab
        DESTINATION share/stepq/examples)
install(PROGRAMS ${ex}/enqueue.sh ${ex}/enqueue.py ${ex}/serve_client.py
        DESTINATION share/stepq/examples)
install(DIRECTORY ${ex}/systemd DESTINATION share/stepq/examples)
