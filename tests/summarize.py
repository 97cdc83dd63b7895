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
# A sanitizer's report, bare (a daemon's log dumped on stderr) or as TAP diagnostics ("# " before each line): its
# heading, the lines saying who accessed or leaked, each stack's first frames (where the accesses are), its
# SUMMARY. UBSan's heading is "file:line:col: runtime error: ...".
REPORT_START = re.compile(r"(WARNING|ERROR): (Thread|Address|Leak|UndefinedBehavior)Sanitizer|: runtime error: ")
REPORT_FRAME = re.compile(r"^\s*#(\d+) ")
# "Write of size 8 at 0x.. by thread T3:", "READ of size 4 at 0x.. thread T0", "Direct leak of 16 byte(s)"
REPORT_WHO = re.compile(r"\bby (main )?thread\b|\bthread T\d+$|^\s*(Direct|Indirect) leak of")
REPORT_END = re.compile(r"SUMMARY: \w+Sanitizer")
REPORT_FRAMES = 3
REPORT_LINES = 24  # a report's lines printed at most, its SUMMARY always among them


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
            ok, bad = tally(out.splitlines(), is_python(test))
            where = f"{path.split('/meson-logs/')[0]}: {test.get('name')}"
            if test.get("result") not in ("OK", "EXPECTEDFAIL") and not bad:
                bad = [f"{test.get('result')} without a failed check (crash or timeout?)"]
            for check in bad[:MAX_NAMED]:
                print(f"FAILED {where}: {check}")
            if len(bad) > MAX_NAMED:
                print(f"FAILED {where}: and {len(bad) - MAX_NAMED} more")
            if bad:
                for report_line in first_report((test.get("stderr") or test.get("stde") or "") + "\n" + out):
                    print(f"REPORT {where}: {report_line[:300]}")
            passed += ok
            failed += len(bad)
    return passed, failed


def is_python(test):
    """The HTTP suites (tests/http/harness.py's point) print a failed check's diagnostics after it; the C tests'
    tap_diag lines often come before the check they explain, so a line after one may be the next one's."""
    return any(str(arg).endswith(".py") for arg in test.get("command") or [])


def tally(lines, diagnostics_follow):
    """The passed checks' count and the failed ones' lines (with the first diagnostic line where it follows)."""
    ok, bad = 0, []
    for i, tap in enumerate(lines):
        m = TAP.match(tap)
        if not m:
            continue
        if m.group(1) or "# SKIP" in tap.upper():  # a skipped check is not a pass
            follows = diagnostics_follow and i + 1 < len(lines) and lines[i + 1].startswith("# ")
            diag = lines[i + 1][2:].strip() if follows else ""
            bad.append(tap.strip()[:300] + (f" | {diag[:200]}" if diag else ""))
        else:
            ok += 1
    return ok, bad


def first_report(text):
    """Of the sanitizer reports in text, the first with the most frames (a daemon's whole log beats a point's
    tail of it): its heading, who accessed, the top frames of each stack and its SUMMARY line."""
    best, current = [], None
    for raw in text.splitlines():
        line = (raw[2:] if raw.startswith("# ") else raw).strip()
        if REPORT_START.search(line):
            current = [line]
        elif current is None:
            continue
        elif REPORT_END.search(line):
            kept = current[:REPORT_LINES - 1] + [line]
            best = kept if frames(kept) > frames(best) or not best else best
            current = None
        else:
            frame = REPORT_FRAME.match(line)
            if frame and int(frame.group(1)) < REPORT_FRAMES or REPORT_WHO.search(line):
                current.append(line)
    if current and not best:  # cut off before its SUMMARY
        best = current[:REPORT_LINES]
    return best


def frames(report):
    return sum(1 for line in report if REPORT_FRAME.match(line))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.json"]))
