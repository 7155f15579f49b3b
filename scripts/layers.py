#!/usr/bin/env python3
"""layers.py: checks every include and link of stepq's rooms against the
arrows of docs/architecture.md (its ```arrows block: the one list).

    python3 scripts/layers.py [--root DIR]

scripts/test.sh runs it before the builds. It reads:
  - the arrows block: its first line is the layers, top to bottom
    (`a, b -> {c, d} -> e`): a room may include and link any room of a
    layer below its own. Every other line is `room -> room, room`: the
    arrows allowed within one layer.
  - every #include of every .c and .h file in the rooms' folders (include/
    is the folder of lib's public header, stepq.h), and fails on
      * an include of another room that no arrow allows;
      * `<folder>/internal.h` included from outside <folder> and its
        subfolders;
      * a project include not spelled from the repository root
        ("internal.h", "../x/y.h"): it would be found beside the file,
        past the include path the build gives each room;
      * an engine's header outside the one folder that may use it
        (ENGINES below);
  - the code of a pure room (PURE: policy), and fails on a call that does
    I/O, reads the clock or logs;
  - every target_link_libraries of the rooms' CMakeLists.txt, and fails on
    a link, or a room's headers exposed through a PUBLIC link, that no
    arrow allows: the build (cmake/rooms.cmake) lets a target include only
    what it links, so these are the includes the compiler lets through.
    It also names the missing link of an allowed include (which would fail
    to compile), and a room a public header includes but its library links
    PRIVATE (which would fail to compile in whoever includes the header).
Outside the check: tests/, bench/ and fuzz/ (white boxes: any header, an
internal.h too). examples/ has its own rule: it includes only stepq.h, the
installed API, as a user's program does.
Exit 0 when all holds, 1 with one line per problem, naming the file, the
line and what to do.
"""
import argparse
import os
import re
import sys

DOC = "docs/architecture.md"
# Folders that are part of another room: include/ holds lib's stepq.h.
FOLDER_ROOM = {"include": "lib"}
# Folders with code that are not rooms, and their rule.
OUTSIDE = {"tests", "bench", "fuzz", "examples"}
# Engine headers: (what an include names, the only folder that may, what
# to do instead).
ENGINES = [
    (re.compile(r"^sqlite3\.h$"), "queue/sqlite", "go through queue/queue.h"),
    (re.compile(r"^libpq-fe\.h$"), "queue/pg", "go through queue/queue.h"),
    (re.compile(r"^curl/"), "http", "go through http/http.h"),
    (re.compile(r"^microhttpd\.h$"), "serve", "only serve/ answers HTTP"),
    (re.compile(r"^http_parser\.h$"), "mock", "only mock/ parses requests"),
]
# Rooms that are pure (CONVENTIONS §1: policy does no I/O and reads no
# clock; it never logs): the calls their code may not make.
PURE = {"policy": re.compile(
    r"\b(clock_now_ms|clock_mono_ms|time|gettimeofday|clock_gettime|"
    r"log_\w+|fopen|open|printf|fprintf|puts|fputs|fread|fwrite|read|"
    r"write|getenv|rand|random|srand|uv_\w+|curl_\w+|q_\w+)\s*\(")}
# Link targets of the rooms, by room.
TARGET_ROOM = {"stepq": "cli", "libstepq": "lib", "stepq_facade": "lib"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


class Arrows:
    """The allowed arrows, parsed from the arrows block of DOC."""

    def __init__(self, root):
        self.layer = {}  # room -> layer index, 0 at the top
        self.within = {}  # room -> rooms of its layer it may include
        path = os.path.join(root, DOC)
        lines = read_lines(path)
        block = None
        for i, line in enumerate(lines):
            if block is None and line.strip() == "```arrows":
                block = []
            elif block is not None and line.strip() == "```":
                break
            elif block is not None:
                block.append((i + 1, line))
        if not block:
            sys.exit(f"{DOC}: no ```arrows block: the layers and arrows the "
                     "check enforces are missing")
        rows = [(n, l.split("#")[0].strip()) for n, l in block]
        rows = [(n, l) for n, l in rows if l]
        if not rows:
            sys.exit(f"{DOC}: the ```arrows block is empty")
        self.parse_layers(*rows[0])
        for n, line in rows[1:]:
            self.parse_within(n, line)

    def parse_layers(self, n, line):
        for i, part in enumerate(line.split("->")):
            for room in part.strip().strip("{}").split(","):
                room = room.strip()
                if not re.fullmatch(r"[a-z]+", room):
                    sys.exit(f"{DOC}:{n}: the layers line: `{room}` is not "
                             "a room's folder name")
                self.layer[room] = i
                self.within.setdefault(room, set())

    def parse_within(self, n, line):
        m = re.fullmatch(r"([a-z]+)\s*->\s*([a-z]+(?:\s*,\s*[a-z]+)*)", line)
        if not m:
            sys.exit(f"{DOC}:{n}: `{line}`: write an arrow within a layer "
                     "as `room -> room, room`")
        src = m.group(1)
        for dst in (d.strip() for d in m.group(2).split(",")):
            for r in (src, dst):
                if r not in self.layer:
                    sys.exit(f"{DOC}:{n}: `{r}` is in no layer of the "
                             "first line")
            if self.layer[src] != self.layer[dst]:
                sys.exit(f"{DOC}:{n}: {src} -> {dst} crosses layers: only "
                         "arrows within one layer are listed")
            self.within[src].add(dst)

    def allows(self, src, dst):
        return (src == dst or self.layer[dst] > self.layer[src]
                or dst in self.within[src])

    def targets(self, src):
        """The rooms src may include, for the error messages."""
        rooms = sorted((r for r in self.layer
                        if r != src and self.allows(src, r)),
                       key=lambda r: (self.layer[r], r))
        return ", ".join(rooms) or "no other room"


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def room_of(folder):
    return FOLDER_ROOM.get(folder, folder)


def source_files(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(dirpath, name), root)


class Check:
    def __init__(self, root, arrows):
        self.root, self.arrows = root, arrows
        self.problems = []
        self.files = self.includes = 0
        self.uses = []  # (where, rel, src room, dst room): allowed includes

    def problem(self, where, text):
        self.problems.append(f"{where}: {text}")

    def folders(self):
        """Top folders holding C code: each must be a room or outside."""
        rooms = []
        for name in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, name)
            if (name.startswith((".", "build")) or not os.path.isdir(path)
                    or name in OUTSIDE):
                continue
            if not any(True for _ in source_files(self.root, name)):
                continue
            if room_of(name) not in self.arrows.layer:
                self.problem(f"{name}/", f"a folder of C code that no layer "
                             f"of {DOC}'s arrows block names: add it to a "
                             "layer (and a row of the rooms table)")
                continue
            rooms.append(name)
        return rooms

    def project_header(self, name):
        top = name.split("/")[0]
        return "/" in name and (room_of(top) in self.arrows.layer
                                or top in OUTSIDE)

    def engine(self, where, rel, name):
        for pattern, folder, instead in ENGINES:
            if pattern.search(name) and not under(rel, folder):
                self.problem(where, f"<{name}> is included only in "
                             f"{folder}/: {instead}")

    def room_include(self, where, rel, quote, name):
        src = room_of(rel.split("/")[0])
        parts = name.split("/")
        if ".." in parts or "." in parts or (quote == '"'
                                             and len(parts) == 1):
            fixed = [p for p in parts if p not in ("..", ".")]
            if len(fixed) == 1:
                fixed = os.path.dirname(rel).split("/") + fixed
            self.problem(where, f'"{name}": spell a project include from '
                         f'the repository root, as "{"/".join(fixed)}"')
            return
        if not self.project_header(name):
            if quote == '"':
                self.problem(where, f'"{name}": no room of {DOC} has this '
                             "folder")
            return
        dst = room_of(parts[0])
        owner = "/".join(parts[:-1])
        if dst in OUTSIDE:
            self.problem(where, f'"{name}": a room includes nothing of '
                         f"{parts[0]}/")
        elif not self.arrows.allows(src, dst):
            self.problem(where, f"{src} -> {dst} is not an arrow of {DOC} "
                         f"({src} may include: {self.arrows.targets(src)})")
        elif parts[-1] == "internal.h" and not under(rel, owner):
            pub = f"{parts[0]}/{parts[0]}.h"
            if not os.path.exists(os.path.join(self.root, pub)):
                pub = f"a public header of {parts[0]}/"
            self.problem(where, f'"{name}" is private to {owner}/: '
                         f"include {pub}, or move what you need into it")
        elif dst != src:
            self.uses.append((where, rel, src, dst, name))

    def sources(self, rooms):
        for folder in rooms:
            for rel in source_files(self.root, folder):
                self.files += 1
                lines = read_lines(os.path.join(self.root, rel))
                for n, line in enumerate(lines, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    self.includes += 1
                    where = f"{rel}:{n}"
                    self.engine(where, rel, m.group(2))
                    self.room_include(where, rel, m.group(1), m.group(2))
                if folder in PURE:
                    self.pure(rel, "\n".join(lines), PURE[folder])

    def pure(self, rel, text, calls):
        """No call of calls outside comments and strings."""
        def blank(m):
            return re.sub(r"[^\n]", " ", m.group(0))
        code = re.sub(r'/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'
                      r"'(?:\\.|[^'\\\n])*'", blank, text, flags=re.S)
        for m in calls.finditer(code):
            n = code.count("\n", 0, m.start()) + 1
            self.problem(f"{rel}:{n}", f"{m.group(1)}(): {rel.split('/')[0]} "
                         "is pure (no I/O, no clock, no logging): take it "
                         "as an argument, or return it to the caller")

    def examples(self):
        for rel in source_files(self.root, "examples"):
            for n, line in enumerate(read_lines(
                    os.path.join(self.root, rel)), 1):
                m = INCLUDE_RE.match(line)
                if m and (m.group(1) == '"' or self.project_header(
                        m.group(2))) and m.group(2) != "stepq.h":
                    self.problem(f"{rel}:{n}", f"{m.group(2)}: an example "
                                 "includes only stepq.h (the installed "
                                 "API), as a user's program does")

    def links(self, rooms):
        """Each room target's links, and what their PUBLIC parts expose."""
        deps = {}  # target -> [(dep target, public?, where)]
        for folder in rooms:
            path = os.path.join(folder, "CMakeLists.txt")
            if os.path.exists(os.path.join(self.root, path)):
                self.link_lines(path, deps)
        public = {t: [d for d, pub, _ in ds if pub] for t, ds in deps.items()}

        def exposed(t, seen):
            if t in seen:
                return
            seen.add(t)
            for d in public.get(t, []):
                exposed(d, seen)

        self.arrow_links(deps, exposed)
        self.linked_uses(deps, exposed)

    def arrow_links(self, deps, exposed):
        """No link, and nothing a PUBLIC link passes on, against the arrows."""
        for target, ds in deps.items():
            src = target_room(target)
            for dep, _, where in ds:
                reach = set()
                exposed(dep, reach)
                for r in sorted(reach):
                    dst = target_room(r)
                    if dst in (None, src) or dst not in self.arrows.layer:
                        continue
                    if not self.arrows.allows(src, dst):
                        via = ("" if r == dep else
                               f" (through {dep}, which links {r} PUBLIC)")
                        self.problem(where, f"{target} reaches {dst}/'s "
                                     f"headers{via}: {src} -> {dst} is not "
                                     f"an arrow of {DOC}")

    def linked_uses(self, deps, exposed):
        """Each allowed include of another room has its link: the build
        finds a room's headers only through one, and a public header's
        rooms only through a PUBLIC one."""
        reach, passes = {}, {}  # room -> rooms its target finds, passes on
        for target, ds in deps.items():
            room = target_room(target)
            if target not in (f"stepq_{room}", "stepq", "libstepq"):
                continue
            seen, own = set(), set()
            for dep, _, _ in ds:
                exposed(dep, seen)
            exposed(target, own)
            reach[room] = {target_room(t) for t in seen}
            passes[room] = {target_room(t) for t in own}
        for where, rel, src, dst, name in self.uses:
            cmake = f"{rel.split('/')[0]}/CMakeLists.txt"
            lib = "stepq_" + dst
            if src not in reach:
                continue
            if dst not in reach[src]:
                self.problem(where, f'"{name}": {cmake} does not link '
                             f"{lib}: add it to target_link_libraries "
                             "(PRIVATE, or PUBLIC if a public header of "
                             f"{src}/ includes it)")
            elif (is_public_header(rel) and src != "cli"
                  and dst not in passes[src]):
                self.problem(where, f'"{name}" in a public header: {cmake} '
                             f"links {lib} PUBLIC (whoever includes "
                             f"{os.path.basename(rel)} needs it)")

    def link_lines(self, path, deps):
        text = "\n".join(read_lines(os.path.join(self.root, path)))
        text = re.sub(r"#[^\n]*", "", text)
        for m in re.finditer(r"target_link_libraries\s*\(([^)]*)\)", text):
            words = m.group(1).split()
            target, public = words[0], True
            line = text.count("\n", 0, m.start()) + 1
            for w in words[1:]:
                if w in ("PUBLIC", "INTERFACE", "PRIVATE"):
                    public = w != "PRIVATE"
                elif target_room(w) is not None:
                    deps.setdefault(target, []).append(
                        (w, public, f"{path}:{line}"))


def target_room(target):
    if target in TARGET_ROOM:
        return TARGET_ROOM[target]
    m = re.fullmatch(r"stepq_([a-z]+)", target)
    return m.group(1) if m else None


def is_public_header(rel):
    return rel.endswith(".h") and os.path.basename(rel) != "internal.h"


def under(rel, folder):
    return rel.startswith(folder.rstrip("/") + "/")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here),
                    help="the repository (default: this script's)")
    root = ap.parse_args().root
    arrows = Arrows(root)
    check = Check(root, arrows)
    rooms = check.folders()
    check.sources(rooms)
    check.examples()
    check.links(rooms)
    for p in check.problems:
        print(p)
    if check.problems:
        print(f"layers: {len(check.problems)} problem(s); the arrows are "
              f"the ```arrows block of {DOC}")
        return 1
    print(f"layers: {check.includes} includes of {check.files} files and "
          f"the rooms' links follow the arrows of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
