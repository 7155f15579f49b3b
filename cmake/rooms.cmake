# rooms.cmake: each room's headers reachable only through the targets that
# link it, so that an include against the arrows of docs/architecture.md
# fails to compile.
#
# There is no global include path. stepq_room(TARGET FOLDER), called for
# every room in the top CMakeLists.txt, makes
# ${CMAKE_BINARY_DIR}/rooms/FOLDER/FOLDER, a symbolic link to the source
# folder, and puts ${CMAKE_BINARY_DIR}/rooms/FOLDER on TARGET's include path
# (PUBLIC for a library, so whatever links it finds its headers; PRIVATE for
# a program). `#include "queue/queue.h"` keeps its spelling, and it is found
# only by a target that links stepq_queue, directly or through a library
# whose public header includes queue.h and so links it PUBLIC. Every other
# room is linked PRIVATE: cli links stepq_worker, but finds tier/tier.h
# only if it links stepq_tier itself.
#
# What the compiler cannot see, scripts/layers.py checks before the build
# (scripts/test.sh runs it): the link lines themselves against the arrows, a
# `<folder>/internal.h` included from another folder (the link exposes the
# whole folder), a quoted include without its folder or with `..` (found
# beside the including file, past the include path), and the engine headers
# (sqlite3.h, libpq-fe.h, curl, microhttpd), which live in /usr/include.
function(stepq_room target folder)
    set(dir ${CMAKE_BINARY_DIR}/rooms/${folder})
    if(NOT IS_SYMLINK ${dir}/${folder})
        file(MAKE_DIRECTORY ${dir})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${dir}/${folder}
             SYMBOLIC)
    endif()
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
        target_include_directories(${target} PRIVATE ${dir})
    else()
        target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${dir}>)
    endif()
endfunction()
