# package-stage.cmake: run by CPack (CPACK_PRE_BUILD_SCRIPTS) on the staged
# files of the Debian package before it is built, so that `cmake
# --install` keeps installing them as they are: the man page compressed
# to the maximum (Debian's rule), and the Python examples not executable
# (the package only recommends Python; run them with python3).
file(GLOB_RECURSE staged LIST_DIRECTORIES false
     "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*")
foreach(f ${staged})
    if(f MATCHES "/man1/stepq\\.1$")
        execute_process(COMMAND gzip -9 -n -f "${f}"
                        COMMAND_ERROR_IS_FATAL ANY)
    elseif(f MATCHES "/examples/[^/]*\\.py$")
        file(CHMOD "${f}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ
             WORLD_READ)
    endif()
endforeach()
