#!/usr/bin/env python3
"""tests/install/check-shape.py SRCDIR - the shape the code keeps (issue 29, in the spirit of
curl's checksrc), read from git's files:

  1. no include cycle between files: the quoted #include lines of the library, the CLI and
     their headers form no loop (a file that includes itself through others);
  2. no source file over 1,500 lines (library and CLI: .c and .h);
  3. no function over 100 lines (library, CLI, benches, examples; a function runs from the line
     that starts with its name to the closing brace in column 0, the project's style, as
     scripts/longfn.sh counts).

Files and functions over a limit today are listed in tests/install/shape-allow.txt with the
most lines they may have and why; an entry may not grow, and an entry no longer over its limit
fails too (remove it), so the list only shrinks. Prints each problem and exits 1, or prints a
one-line summary and exits 0.
"""
import os
import re
import subprocess
import sys

FILE_MAX = 1500
FUNC_MAX = 100
CODE_DIRS = ("base/", "tracing/", "store/", "exporters/", "report/", "runtime/", "serve/",
             "cli/", "include/")
FUNC_DIRS = CODE_DIRS + ("bench/", "examples/")

src = sys.argv[1]
os.chdir(src)
files = subprocess.run(["git", "ls-files", "*.c", "*.h"], capture_output=True, text=True,
                       check=True).stdout.split()
code = [f for f in files if f.startswith(CODE_DIRS)]
problems = []


def read_allow():
    allow = {}
    with open("tests/install/shape-allow.txt") as fp:
        for n, line in enumerate(fp, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 3 or not parts[1].isdigit() or not parts[2].strip():
                problems.append("tests/install/shape-allow.txt:%d: expected NAME<TAB>MAX<TAB>WHY"
                                % n)
                continue
            allow[parts[0]] = int(parts[1])
    return allow


# 1. Include cycles.
def resolve(inc, including):
    for cand in (inc, os.path.join(os.path.dirname(including), inc), "include/" + inc):
        cand = os.path.normpath(cand)
        if cand in graph:
            return cand
    return None


graph = {f: [] for f in files if f.startswith(CODE_DIRS)}
for f in graph:
    with open(f, errors="replace") as fp:
        for line in fp:
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                target = resolve(m.group(1), f)
                if target is not None and target != f:
                    graph[f].append(target)
WHITE, GREY, BLACK = 0, 1, 2
color = dict.fromkeys(graph, WHITE)
cycles = []


def visit(node, stack):
    color[node] = GREY
    stack.append(node)
    for nxt in graph[node]:
        if color[nxt] == GREY:
            cycles.append(stack[stack.index(nxt):] + [nxt])
        elif color[nxt] == WHITE:
            visit(nxt, stack)
    stack.pop()
    color[node] = BLACK


sys.setrecursionlimit(10000)
for node in sorted(graph):
    if color[node] == WHITE:
        visit(node, [])
for c in cycles:
    problems.append("include cycle: " + " -> ".join(c))

# 2 and 3. Sizes, against the allow-list.
allow = read_allow()
seen = set()


def check(name, lines, limit):
    if name in allow:
        seen.add(name)
        if lines > allow[name]:
            problems.append("%s: %d lines, more than the %d tests/install/shape-allow.txt allows"
                            " (it may not grow: split it)" % (name, lines, allow[name]))
        elif lines <= limit:
            problems.append("%s: %d lines, within %d now: remove its entry from"
                            " tests/install/shape-allow.txt" % (name, lines, limit))
    elif lines > limit:
        problems.append("%s: %d lines, over %d (split it, or list it with a reason in"
                        " tests/install/shape-allow.txt)" % (name, lines, limit))


for f in code:
    with open(f, errors="replace") as fp:
        check(f, sum(1 for _ in fp), FILE_MAX)
for f in (f for f in files if f.startswith(FUNC_DIRS) and f.endswith(".c")):
    start = None
    name = None
    with open(f, errors="replace") as fp:
        for n, line in enumerate(fp, 1):
            m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\(", line)
            if m:
                name, start = m.group(1), n
            elif start is not None and line.startswith("}"):
                check("%s:%s" % (f, name), n - start, FUNC_MAX)
                start = None
for name in sorted(set(allow) - seen):
    problems.append("tests/install/shape-allow.txt: %s names no file or function any more:"
                    " remove it" % name)

for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
print("shape: %d files, no include cycle; files <= %d lines and functions <= %d lines but the"
      " %d allowed in tests/install/shape-allow.txt" % (len(graph), FILE_MAX, FUNC_MAX,
                                                          len(allow)))
