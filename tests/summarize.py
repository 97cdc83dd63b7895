#!/usr/bin/env python3
"""Counts every check of every suite from meson's testlog.json files (the build's, the fuzz build's) and
prints 'N passed, N failed'.

Each test program speaks TAP, so a check is one 'ok'/'not ok' line. A program that failed without
reporting a failed check (a crash, a timeout, a bad plan) adds one failure of its own, so nothing that
went wrong can disappear from the count."""
import json
import re
import sys

TAP = re.compile(r"^(not )?ok\b")


def main(paths):
    passed = failed = 0
    for path in paths:
        p, f = count(path)
        passed += p
        failed += f
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def count(path):
    passed = failed = 0
    with open(path, encoding="utf-8") as log:
        for line in log:
            test = json.loads(line)
            out = test.get("stdout") or test.get("stdo") or ""
            ok = bad = 0
            for tap in out.splitlines():
                m = TAP.match(tap)
                if not m:
                    continue
                if m.group(1):
                    bad += 1
                elif "# SKIP" in tap.upper():
                    bad += 1  # a skipped check is not a pass
                else:
                    ok += 1
            if test.get("result") not in ("OK", "EXPECTEDFAIL") and bad == 0:
                bad = 1
                print(f"{test.get('name')}: {test.get('result')} without a failed check (crash or timeout?)")
            passed += ok
            failed += bad
    return passed, failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.json"]))
