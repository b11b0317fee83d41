#!/usr/bin/env python3
"""Fails when a C source file is over 800 lines or a function over 120 (the house limits).

Counts every tracked (and untracked, not ignored) .c/.h file under kernels/ loader/ runtime/ tools/
include/; tests/ and bench/ are exempt from the function limit (table-driven test bodies) but not from
the file limit.  Functions are found by brace depth: a '{' at depth 0 after a ')' starts one.
Usage: python3 scripts/check-sizes.py [--report]   (--report prints the offenders and exits 0)."""
import re
import subprocess
import sys

FILE_MAX, FUNC_MAX = 800, 120
SRC_DIRS = ("kernels/", "loader/", "runtime/", "tools/", "include/")
ALL_DIRS = SRC_DIRS + ("tests/", "bench/")


def files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if f.endswith((".c", ".h")) and f.startswith(ALL_DIRS)
            and not f.endswith(("unicode_tables.c", "unicode_case_tables.c"))]   # generated tables


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r"//.*", "", line)


def functions(path):
    lines = open(path, errors="replace").read().split("\n")
    depth, start, name, in_comment = 0, None, None, False
    for i, raw in enumerate(lines):
        s = strip(raw)
        if in_comment:
            if "*/" not in s:
                continue
            s, in_comment = s.split("*/", 1)[1], False
        s = re.sub(r"/\*.*?\*/", "", s)
        if "/*" in s:
            s, in_comment = s.split("/*", 1)[0], True
        if depth == 0 and "{" in s and start is None:
            sig = " ".join(strip(x) for x in lines[max(0, i - 3):i + 1])
            m = re.search(r"(\w+)\s*\([^;{}]*\)\s*(\{|$)", sig)
            if m and "=" not in s and not re.match(r"\s*(typedef|struct|enum|union)\b", raw):
                start, name = i, m.group(1)
        depth += s.count("{") - s.count("}")
        if depth == 0 and start is not None:
            yield name, start + 1, i - start + 1
            start = None


def main():
    report = "--report" in sys.argv
    bad = []
    for f in files():
        n = sum(1 for _ in open(f, errors="replace"))
        if n > FILE_MAX:
            bad.append(f"{f}: {n} lines (limit {FILE_MAX})")
        if f.startswith(SRC_DIRS):
            for name, line, length in functions(f):
                if length > FUNC_MAX:
                    bad.append(f"{f}:{line}: {name}() is {length} lines (limit {FUNC_MAX})")
    for b in bad:
        print("check-sizes: " + b, file=sys.stderr)
    if bad and not report:
        print(f"check-sizes: FAILED ({len(bad)} over the limits)", file=sys.stderr)
        return 1
    print(f"check-sizes: {len(files())} files checked" + (f", {len(bad)} over the limits" if bad else ", all within the limits"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
