#!/usr/bin/env python3
"""TAP: the repository stands alone (issue 35). A clone has nothing beside it, so no tracked file may point
at the sibling folder the project was first written next to (its reference notes, real frames and device
scripts): each such line is printed as file:line and the test fails. Symbolic links that leave the
repository fail too. docs/ALGORITHMS.md, docs/DECISIONS.md, tests/data/ and bench/device/prepare.sh hold
what used to be read from there.

usage: check_standalone.py [SOURCE_ROOT]     (default: the repository holding this script)
"""
import os
import re
import subprocess
import sys

# Built from parts so that this file does not match itself.
SIBLING = "shared"
OUTSIDE = re.compile(r"\.\./" + SIBLING + r"\b|\b" + SIBLING + r"/(?:reference|data|device)\b")


def tracked_files(root):
    run = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if run.returncode != 0:
        return None
    return [p.decode("utf-8", "surrogateescape") for p in run.stdout.split(b"\0") if p]


def offences(root, path):
    """[(line number, text)] of one tracked file; a link out of the repository is line 0."""
    full = os.path.join(root, path)
    if os.path.islink(full):
        target = os.path.realpath(full)
        inside = os.path.commonpath([target, os.path.realpath(root)]) == os.path.realpath(root)
        return [] if inside else [(0, "symbolic link to " + os.readlink(full))]
    if not os.path.isfile(full):  # deleted in the working tree, or a submodule
        return []
    with open(full, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:  # binary
        return []
    text = data.decode("utf-8", "replace")
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = tracked_files(root)
    if files is None:
        print(f"1..0 # SKIP {root} is not a git checkout (git ls-files failed)")
        return 77
    found = [(path, n, line) for path in files for n, line in offences(root, path)]
    if not found:
        print(f"ok 1 - none of the {len(files)} tracked files refers outside the repository")
        print("1..1")
        return 0
    print(f"not ok 1 - {len(found)} lines in {len(set(p for p, _, _ in found))} tracked files refer outside the "
          "repository; cite docs/ALGORITHMS.md, docs/DECISIONS.md, tests/data/ or bench/device/prepare.sh instead")
    for path, n, line in found:
        print(f"# {path}:{n}: {line}")
    print("1..1")
    return 1


if __name__ == "__main__":
    sys.exit(main())
