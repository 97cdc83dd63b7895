#!/usr/bin/env python3
"""TAP: docs/PARAMETERS.md must be exactly what tools/params_doc prints from the schema table.

usage: check_params_doc.py PARAMS_DOC_EXE DOCS_FILE
"""
import difflib
import subprocess
import sys


def main():
    exe, doc = sys.argv[1], sys.argv[2]
    run = subprocess.run([exe], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"not ok 1 - {exe} ran (exit {run.returncode}): {run.stderr.strip()}")
        print("1..1")
        return 1
    try:
        with open(doc, encoding="utf-8") as f:
            committed = f.read()
    except OSError as e:
        committed = ""
        print(f"# cannot read {doc}: {e}")
    if committed == run.stdout:
        print("ok 1 - docs/PARAMETERS.md matches the schema table (tools/params_doc)")
        print("1..1")
        return 0
    print("not ok 1 - docs/PARAMETERS.md differs from the schema table; regenerate it with "
          "build/tools/params_doc > docs/PARAMETERS.md")
    diff = difflib.unified_diff(committed.splitlines(), run.stdout.splitlines(),
                                "docs/PARAMETERS.md", "params_doc output", lineterm="")
    for line in list(diff)[:80]:
        print("# " + line)
    print("1..1")
    return 1


if __name__ == "__main__":
    sys.exit(main())
