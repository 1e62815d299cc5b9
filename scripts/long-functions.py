#!/usr/bin/env python3
"""Lists the Rust functions longer than N lines below DIR (issue 28: no function in
crates/server/src over 100 lines). A function runs from its `fn` line to the closing brace at
its own indentation, as rustfmt lays code out. Exits 1 if any is longer.

    python3 scripts/long-functions.py crates/server/src 100
"""
import os
import re
import sys

FN = re.compile(r"^(\s*)(pub(\([^)]*\))? )?(const )?(async )?(unsafe )?fn (\w+)")


def long_functions(root, limit):
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            for i, line in enumerate(lines):
                m = FN.match(line)
                if not m or line.rstrip().endswith(";"):
                    continue
                indent = len(m.group(1))
                end = i + 1
                while end < len(lines) and not (
                    lines[end].startswith(" " * indent + "}")
                    and len(lines[end]) - len(lines[end].lstrip()) == indent
                ):
                    end += 1
                length = end - i + 1
                if length > limit:
                    yield length, path, i + 1, m.group(7)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: long-functions.py DIR MAX_LINES")
    found = sorted(long_functions(sys.argv[1], int(sys.argv[2])), reverse=True)
    for length, path, line, name in found:
        print(f"{length:5} lines  {path}:{line}  {name}")
    print(f"{len(found)} function(s) over {sys.argv[2]} lines in {sys.argv[1]}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
