# embed.cmake: writes OUT, a C file holding the web view's files (ASSETS,
# a list of URL=FILE=TYPE, FILE relative to DIR, each text in UTF-8) as byte arrays in the
# table serve_assets of serve/internal.h. Run by serve/CMakeLists.txt at
# build time: the page is edited as plain HTML, CSS and JavaScript, and
# the binary needs no files beside it.
set(body "/* Made by cmake/embed.cmake from serve/web/: do not edit. */\n")
string(APPEND body "#include \"serve/internal.h\"\n\n")
set(table "")
set(i 0)
foreach(entry IN LISTS ASSETS)
    string(REPLACE "=" ";" parts "${entry}")
    list(GET parts 0 url)
    list(GET parts 1 file)
    list(GET parts 2 type)
    file(READ "${DIR}/${file}" hex HEX)
    string(LENGTH "${hex}" n)
    math(EXPR size "${n} / 2")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    # 16 bytes a line (CMake's regexes have no {16}).
    string(REPEAT "0x..," 16 line)
    string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
    string(APPEND body "static const unsigned char asset_${i}[] = {\n    ${bytes}0x00};\n\n")
    string(APPEND table "    {\"${url}\", \"${type}; charset=utf-8\", asset_${i}, ${size}},\n")
    math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "const struct serve_asset serve_assets[] = {\n${table}    {NULL, NULL, NULL, 0}};\n")
# Written every time it runs (only when an input changed): an output
# older than its inputs would make the build run this again and again.
file(WRITE "${OUT}" "${body}")
