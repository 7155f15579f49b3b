# package.cmake: the Debian package, built by CPack from the release
# preset (`cpack -G DEB` in build/release, or scripts/package.sh): what
# `cmake --install` installs (the binary, libstepq with stepq.h and
# stepq.pc, the man page, the docs and examples), plus the systemd units
# of packaging/ (a templated worker, serve, the morning report and its
# timer) and the stepq system user (sysusers.d), under /usr. The units
# name `stepq` without a folder: systemd finds it in /usr/bin or
# /usr/local/bin, so they are right for `cmake --install` too.
# tests/test_units.c checks the units with `systemd-analyze verify`.
set(pkg ${PROJECT_SOURCE_DIR}/packaging)
install(FILES ${pkg}/stepq-worker@.service ${pkg}/stepq-serve.service
              ${pkg}/stepq-report.service ${pkg}/stepq-report.timer
        DESTINATION lib/systemd/system)
install(FILES ${pkg}/stepq.sysusers DESTINATION lib/sysusers.d
        RENAME stepq.conf)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operating.md
        DESTINATION share/doc/stepq)

# Debian wants the copyright and a changelog compressed to the maximum.
set(STEPQ_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/changelog.gz)
add_custom_command(OUTPUT ${STEPQ_CHANGELOG_GZ}
    COMMAND gzip -9 -n -c ${pkg}/debian/changelog > ${STEPQ_CHANGELOG_GZ}
    DEPENDS ${pkg}/debian/changelog
    COMMENT "Compressing the package's changelog")
add_custom_target(stepq_changelog ALL DEPENDS ${STEPQ_CHANGELOG_GZ})
install(FILES ${STEPQ_CHANGELOG_GZ} ${pkg}/debian/copyright
        DESTINATION share/doc/stepq)

set(CPACK_PACKAGE_NAME stepq)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stepq maintainers <maintainers@stepq.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "queue of LLM and agent jobs for rate-limited endpoints")
# The synopsis is the summary; CPack indents these lines.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "stepq runs nightly LLM and agent jobs against rate-limited endpoints:
a durable queue in SQLite or PostgreSQL, pacing and walls per tier,
parking for a human instead of guessing, and a morning report.
The package holds the stepq program, libstepq with its header and
pkg-config file, the man page and documentation, and systemd units:
stepq-worker@.service, stepq-serve.service and stepq-report.timer.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/stepq/stepq")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${pkg}/debian/postinst
    ${pkg}/debian/postrm ${pkg}/debian/triggers)
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/package-stage.cmake)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
include(CPack)
