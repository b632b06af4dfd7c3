#!/usr/bin/env python3
"""tests/install/check-api-docs.py - every public function in include/weft/*.h states who owns
what it takes and returns, and what it returns on error (the convention at the top of
include/weft/weft.h).

A declaration is a statement that starts with WEFT_API and declares a function. Its comment is
the /** */ or /* */ block that ends on the line right before it (or a trailing comment on its
last line); a declaration without one that follows another with no blank line between shares
that one's comment (a group such as weft_span_set_str/int/double). The comment must hold an
"Ownership:" note and an "Errors:" or "@return" note.
Prints each declaration that lacks one and exits 1; exits 0 when all are documented.
Usage: check-api-docs.py [include/weft directory]
"""
import os
import re
import sys


def declarations(text):
    """Yield (line number, name, comment) for each WEFT_API function declaration."""
    lines = text.split("\n")
    i = 0
    prev_end = -2
    prev_comment = ""
    while i < len(lines):
        line = lines[i]
        if not re.match(r"\s*WEFT_API\b", line):
            i += 1
            continue
        start = i
        stmt = line
        while ";" not in lines[i] and "{" not in lines[i]:
            i += 1
            stmt += "\n" + lines[i]
        end = i
        m = re.search(r"(\w+)\s*\(", stmt.split("/*")[0])
        if m is None or "(*" in stmt.split(m.group(1))[0]:
            i += 1
            continue
        comment = ""
        tail = lines[end].split(";", 1)[1] if ";" in lines[end] else ""
        if "/*" in tail:
            comment = tail
        j = start - 1
        if j >= 0 and lines[j].rstrip().endswith("*/"):
            block = []
            while j >= 0:
                block.insert(0, lines[j])
                if "/*" in lines[j]:
                    break
                j -= 1
            comment = "\n".join(block) + "\n" + comment
        if comment == "" and prev_end == start - 1:
            comment = prev_comment
        prev_end = end
        prev_comment = comment
        yield start + 1, m.group(1), comment
        i += 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "weft")
    missing = []
    total = 0
    for name in sorted(os.listdir(root)):
        if not name.endswith(".h"):
            continue
        path = os.path.join(root, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for line, func, comment in declarations(text):
            total += 1
            lacks = []
            if "Ownership:" not in comment:
                lacks.append("Ownership:")
            if "Errors:" not in comment and "@return" not in comment:
                lacks.append("Errors: or @return")
            if lacks:
                missing.append("%s:%d: %s lacks %s" % (name, line, func, " and ".join(lacks)))
    for m in missing:
        print(m)
    print("%d of %d public functions documented" % (total - len(missing), total))
    return 1 if missing or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
