#!/usr/bin/env python3
"""Counts every check of every suite from meson's testlog.json files (the build's, the fuzz build's) and
prints 'N passed, N failed', after a line for each failed check naming its build, its test and the check's
line (CI shows a log's tail, so what failed is said there, beside the count). A skipped check counts as
failed and is named as one.

Each test program speaks TAP, so a check is one 'ok'/'not ok' line. A program that failed without
reporting a failed check (a crash, a timeout, a bad plan) adds one failure of its own, so nothing that
went wrong can disappear from the count."""
import json
import re
import sys

TAP = re.compile(r"^(not )?ok\b")
MAX_NAMED = 5  # a test's failed checks named at most; the rest are counted


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
    with open(path, encoding="utf-8") as log:  # devices*.json: build-asan's wrapped tests, named as build-asan's
        for line in log:
            test = json.loads(line)
            out = test.get("stdout") or test.get("stdo") or ""
            ok = 0
            bad = []
            for tap in out.splitlines():
                m = TAP.match(tap)
                if not m:
                    continue
                if m.group(1) or "# SKIP" in tap.upper():  # a skipped check is not a pass
                    bad.append(tap.strip())
                else:
                    ok += 1
            where = f"{path.split('/meson-logs/')[0]}: {test.get('name')}"
            if test.get("result") not in ("OK", "EXPECTEDFAIL") and not bad:
                bad = [f"{test.get('result')} without a failed check (crash or timeout?)"]
            for check in bad[:MAX_NAMED]:
                print(f"FAILED {where}: {check[:300]}")
            if len(bad) > MAX_NAMED:
                print(f"FAILED {where}: and {len(bad) - MAX_NAMED} more")
            passed += ok
            failed += len(bad)
    return passed, failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.json"]))
