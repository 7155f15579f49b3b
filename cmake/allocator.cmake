# allocator.cmake: the allocator behind malloc in stepq's programs.
#
# stepq_use_allocator(TARGET) links TARGET (an executable) with mimalloc
# when STEPQ_MIMALLOC is on, and defines STEPQ_MIMALLOC for its sources.
# mimalloc's shared library defines malloc, free and the rest, and the
# dynamic linker takes the first definition it finds, so every allocation
# of the process goes there: ours, cJSON's, libcurl's, SQLite's, libuv's
# and libc's own (strdup, open_memstream). Measured in docs/benchmarks.md
# ("the allocator"). Only programs get it: libstepq and the static module
# libraries leave the allocator to whoever links them.
function(stepq_use_allocator target)
    if(STEPQ_MIMALLOC)
        target_link_libraries(${target} PRIVATE mimalloc)
        target_compile_definitions(${target} PRIVATE STEPQ_MIMALLOC)
    endif()
endfunction()
