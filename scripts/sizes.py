#!/usr/bin/env python3
"""sizes.py: keeps stepq's functions and files from growing past the sizes
of CONVENTIONS (functions under ~80-100 lines, files under ~600).

    python3 scripts/sizes.py [--root DIR] [--report N]
    python3 scripts/sizes.py --self-test

scripts/test.sh runs it (and its self-test) before the builds. It reads
every .c and .h file of the rooms (ROOMS below; tests/, bench/, fuzz/ and
examples/ are left out) and fails on
  * a function longer than FUNCTION_MAX lines, counted from the line of
    its name to its closing brace;
  * a file longer than FILE_MAX lines;
unless the function or file is in ALLOWED with a ceiling it has not
passed: those are the exceptions of the day the list was written, each to
be split along its seams, not to grow. An entry that is no longer over the
limit, or names what does not exist, fails too (remove it: the list stays
true).

The heuristic is clang-format's layout (.clang-format: the return type on
its own line, BreakBeforeBraces Linux): a definition is a line that starts
at column 0 with `name(`, then a line `{`, and it ends at the next line
`}`. Nothing else in formatted code puts a lone brace at column 0.
--report N lists every function over N lines, biggest first (for the
closing notes of a cleanup); it fails on nothing.
Exit 0 when all holds, 1 with one line per problem.
"""
import argparse
import os
import re
import sys
import tempfile

ROOMS = ["cli", "common", "queue", "spec", "policy", "park", "tier", "http",
         "worker", "view", "serve", "sched", "mock", "demo", "include", "lib"]
FUNCTION_MAX = 100
FILE_MAX = 600
# Today's exceptions and their ceilings: "path" for a file, "path:function"
# for a function. Each is to be split along its seams, not to grow.
ALLOWED = {
    "worker/internal.h": 639,
}

NAME_RE = re.compile(r"^([A-Za-z_]\w*)\(")


def functions(lines):
    """Yields (name, first line number, length) of each definition."""
    name, first, body = None, 0, False
    for i, line in enumerate(lines):
        if not body:
            m = NAME_RE.match(line)
            if m and not line.endswith(";"):
                name, first = m.group(1), i
            elif line == "{" and name is not None:
                body = True
            elif line.endswith(";") and not line.startswith((" ", "\t")):
                name = None
        elif line == "}":
            yield name, first + 1, i - first + 1
            name, body = None, False


def sources(root):
    for room in ROOMS:
        for folder, _, files in os.walk(os.path.join(root, room)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(folder, f)
                    yield os.path.relpath(path, root), path


def measure(root):
    """Returns {key: (lines, where)} for every file and function."""
    sizes = {}
    for rel, path in sources(root):
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        sizes[rel] = (len(lines), rel)
        for name, first, n in functions(lines):
            sizes[f"{rel}:{name}"] = (n, f"{rel}:{first}")
    return sizes


def check(root, allowed):
    problems = []
    sizes = measure(root)
    for key, (n, where) in sorted(sizes.items()):
        limit = FUNCTION_MAX if ":" in key else FILE_MAX
        what = "function " + key.split(":")[1] if ":" in key else "file"
        if n <= limit:
            continue
        if key not in allowed:
            problems.append(
                f"{where}: {what} has {n} lines, over {limit}: split it "
                f"along its seams (CONVENTIONS §1, §7)")
        elif n > allowed[key]:
            problems.append(
                f"{where}: {what} grew to {n} lines, past its allowed "
                f"{allowed[key]} (scripts/sizes.py ALLOWED): split it, "
                f"do not raise the ceiling")
    for key, ceiling in sorted(allowed.items()):
        limit = FUNCTION_MAX if ":" in key else FILE_MAX
        if key not in sizes:
            problems.append(f"scripts/sizes.py: ALLOWED names {key}, which "
                            f"does not exist: remove the entry")
        elif sizes[key][0] <= limit:
            problems.append(f"scripts/sizes.py: {key} is {sizes[key][0]} "
                            f"lines now, within {limit}: remove its entry")
    return problems


def report(root, over):
    rows = [(n, where, key.split(":")[1])
            for key, (n, where) in measure(root).items()
            if ":" in key and n > over]
    for n, where, name in sorted(rows, reverse=True):
        print(f"{n:5d}  {name}  {where}")


def self_test():
    """Plants each kind of problem in a copy of a small tree and checks
    that each one fails, and that the clean tree passes."""
    def body(n):
        return "".join(f"    x += {i};\n" for i in range(n))

    def fn(name, n):
        # the name, "{", n lines, the return and "}": n + 4 lines.
        return f"int\n{name}(int x)\n{{\n{body(n)}    return x;\n}}\n"

    cases = {
        "clean": ({"policy/a.c": fn("ok", 96)}, {}, 0),
        "long function": ({"policy/a.c": fn("big", 97)}, {}, 1),
        "long file": ({"policy/a.h": "int x;\n" * 601}, {}, 1),
        "file at the limit": ({"policy/a.h": "int x;\n" * 600}, {}, 0),
        "allowed file": ({"policy/a.h": "int x;\n" * 601},
                         {"policy/a.h": 601}, 0),
        "allowed file grew": ({"policy/a.h": "int x;\n" * 602},
                              {"policy/a.h": 601}, 1),
        "allowed function grew": ({"tier/b.c": fn("big", 99)},
                                  {"tier/b.c:big": 101}, 1),
        "stale entry": ({"tier/b.c": fn("small", 10)},
                        {"tier/b.c:small": 120}, 1),
        "missing entry": ({"tier/b.c": fn("small", 10)},
                          {"tier/gone.c": 700}, 1),
        "prototype is no definition": (
            {"tier/c.h": "int\nproto(int x);\nint y[] = {\n    1,\n};\n" +
                         fn("f", 10)},
            {}, 0),
    }
    failed = 0
    for what, (files, allowed, want) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)),
                            exist_ok=True)
                with open(os.path.join(root, rel), "w") as fh:
                    fh.write(text)
            got = 1 if check(root, allowed) else 0
            if got != want:
                print(f"self-test: {what}: expected "
                      f"{'a failure' if want else 'no failure'}")
                failed = 1
    if not failed:
        print(f"self-test: {len(cases)} cases as expected")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--report", type=int, metavar="N")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if a.report is not None:
        report(a.root, a.report)
        return 0
    problems = check(a.root, ALLOWED)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
