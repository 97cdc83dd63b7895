#!/usr/bin/env python3
"""Counts every check of every suite from meson's testlog.json files (the build's, the fuzz build's) and
prints 'N passed, N failed', after a line for each failed check naming its build, its test, the check's line
and, after a '|', its first diagnostic line (CI shows a log's tail, so what failed is said there, beside the
count). A skipped check counts as failed and is named as one. A failed test whose output holds a sanitizer's
report (a daemon's log, shown in a point's diagnostics) also gets its first report's kind, top frames and
SUMMARY line: a race that shows once in many runs must be readable from the one tail that caught it.

Each test program speaks TAP, so a check is one 'ok'/'not ok' line. A program that failed without
reporting a failed check (a crash, a timeout, a bad plan) adds one failure of its own, so nothing that
went wrong can disappear from the count."""
import json
import re
import sys

TAP = re.compile(r"^(not )?ok\b")
MAX_NAMED = 5  # a test's failed checks named at most; the rest are counted
# A sanitizer's report, as a TAP diagnostic ("# " before it) or bare: its heading, each stack's frames, its
# last line. The frames kept are each stack's first few: where the two accesses (or the bad one) are.
REPORT_START = re.compile(r"(WARNING|ERROR): (Thread|Address|Leak|UndefinedBehavior)Sanitizer")
REPORT_FRAME = re.compile(r"^\s*#(\d+) ")
REPORT_WHO = re.compile(r"\bby (main )?thread\b")  # "Write of size 8 at 0x.. by thread T3:", who made a thread
REPORT_END = re.compile(r"SUMMARY: \w+Sanitizer")
REPORT_FRAMES = 3
REPORT_LINES = 24  # a report's lines printed at most (two accesses and two threads' creations)


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
            lines = out.splitlines()
            for i, tap in enumerate(lines):
                m = TAP.match(tap)
                if not m:
                    continue
                if m.group(1) or "# SKIP" in tap.upper():  # a skipped check is not a pass
                    # with its first diagnostic line, often what was seen ("exit 66", the numbers compared)
                    diag = lines[i + 1][2:].strip() if i + 1 < len(lines) and lines[i + 1].startswith("# ") else ""
                    bad.append(tap.strip()[:300] + (f" | {diag[:200]}" if diag else ""))
                else:
                    ok += 1
            where = f"{path.split('/meson-logs/')[0]}: {test.get('name')}"
            if test.get("result") not in ("OK", "EXPECTEDFAIL") and not bad:
                bad = [f"{test.get('result')} without a failed check (crash or timeout?)"]
            for check in bad[:MAX_NAMED]:
                print(f"FAILED {where}: {check}")
            if len(bad) > MAX_NAMED:
                print(f"FAILED {where}: and {len(bad) - MAX_NAMED} more")
            if bad:
                for line in first_report(out + "\n" + (test.get("stderr") or "")):
                    print(f"REPORT {where}: {line[:300]}")
            passed += ok
            failed += len(bad)
    return passed, failed


def first_report(out):
    """The first sanitizer report's heading, the top frames of each of its stacks and its SUMMARY line."""
    lines = []
    for raw in out.splitlines():
        line = raw[2:] if raw.startswith("# ") else raw
        if not lines:
            if REPORT_START.search(line):
                lines.append(line.strip())
            continue
        frame = REPORT_FRAME.match(line)
        if frame and int(frame.group(1)) < REPORT_FRAMES or REPORT_WHO.search(line):
            lines.append(line.strip())
        elif REPORT_END.search(line):
            lines.append(line.strip())
            break
    return lines[:REPORT_LINES]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.json"]))
