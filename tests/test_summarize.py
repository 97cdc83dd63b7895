#!/usr/bin/env python3
"""tests/summarize.py, which prints CI's last line: every check counted, and each failed one named before it.

Feeds it testlogs as meson writes them (one JSON object a line) with a pass, a failed check, a skip, a crash
without a failed check and a test of many failed checks, and checks the count, the exit status and the lines
naming what failed."""
import json
import os
import subprocess
import sys
import tempfile

SUMMARIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "summarize.py")
n = 0


def point(what, ok, detail=""):
    global n
    n += 1
    print(f"{'ok' if ok else 'not ok'} {n} {what}")
    if not ok:
        print("# " + detail.replace("\n", "\n# "))


def run(tests):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "build-x", "meson-logs"))
        log = os.path.join(d, "build-x", "meson-logs", "testlog.json")
        with open(log, "w", encoding="utf-8") as f:
            for t in tests:
                f.write(json.dumps(t) + "\n")
        r = subprocess.run([sys.executable, SUMMARIZE, log], capture_output=True, text=True)
        return r.returncode, r.stdout.splitlines()


rc, lines = run([{"name": "a", "result": "OK", "stdout": "ok 1 one\nok 2 two\n"}])
point("all passing: '2 passed, 0 failed' alone, exit 0", rc == 0 and lines == ["2 passed, 0 failed"], str(lines))

rc, lines = run([{"name": "a", "result": "OK", "stdout": "ok 1 one\n"},
                 {"name": "b", "result": "FAIL", "command": ["python3", "tests/http/test_b.py"],
                  "stdout": "ok 1 x\nnot ok 2 the frame is wrong\n# 3 of 9 differ\n# more\n"},
                 {"name": "c", "result": "OK", "stdout": "ok 1 y # SKIP no browser\n"},
                 {"name": "d", "result": "TIMEOUT", "stdout": "ok 1 z\n"}])
point("failures counted: a failed check, a skip, a timeout without one", rc == 1 and lines[-1] == "3 passed, 3 failed",
      str(lines))
named = "\n".join(lines[:-1])
point("each failure named before the count, by build, test and check; an HTTP suite's with its first "
      "diagnostic line", "build-x: b: not ok 2 the frame is wrong | 3 of 9 differ\n" in named + "\n"
      and "more" not in named and "build-x: c: ok 1 y # SKIP no browser" in named
      and "build-x: d: TIMEOUT without a failed check" in named and "build-x: a" not in named, named)

many = "".join(f"not ok {i} check {i}\n" for i in range(1, 9))
rc, lines = run([{"name": "e", "result": "FAIL", "stdout": many}])
point("a test of 8 failed checks: five named and 'and 3 more', all 8 counted",
      rc == 1 and lines[-1] == "0 passed, 8 failed" and len(lines) == 7 and lines[5].endswith("and 3 more"), str(lines))
# A daemon's ThreadSanitizer report in a failed point's diagnostics, as threads_http shows it: its heading, the
# top three frames of each stack and its SUMMARY line are printed, the deeper frames and a second report not.
report = ["WARNING: ThreadSanitizer: data race (pid=7)", "  Write of size 8 at 0x7b by thread T3:",
          *[f"    #{i} f{i} daemon/queue.c:{10 + i} (hdrpostd+0x{i})" for i in range(5)],
          "  Previous read of size 8 at 0x7b by thread T1:",
          *[f"    #{i} g{i} api/http/server.c:{20 + i} (hdrpostd+0x{i})" for i in range(5)],
          "SUMMARY: ThreadSanitizer: data race daemon/queue.c:10 in f0",
          "WARNING: ThreadSanitizer: data race (pid=7)", "    #0 second daemon/other.c:1 (hdrpostd+0x1)"]
diag = "".join(f"# {line}\n" for line in report)
rc, lines = run([{"name": "t", "result": "FAIL", "stdout": "ok 1 ready\nnot ok 2 the daemon answers\n" + diag},
                 {"name": "u", "result": "OK", "stdout": "ok 1 fine\n" + diag}])
reported = [l.split("build-x: t: ", 1)[1] for l in lines if l.startswith("REPORT ") and "build-x: t: " in l]
point("a failed test's sanitizer report: heading, accesses, each stack's frames #0-#2, SUMMARY; a passing test's "
      "not shown", rc == 1 and lines[-1] == "2 passed, 1 failed" and len(reported) == 10
      and reported[0] == "WARNING: ThreadSanitizer: data race (pid=7)" and reported[1].endswith("by thread T3:")
      and reported[2].startswith("#0 f0 ") and reported[5].startswith("Previous read")
      and reported[6].startswith("#0 g0 ") and reported[8].startswith("#2 g2 ")
      and reported[9] == "SUMMARY: ThreadSanitizer: data race daemon/queue.c:10 in f0"
      and not any("build-x: u" in l for l in lines) and not any("second" in l for l in lines), "\n".join(lines))
# A C test's diagnostics may come before the check they explain: a line after a failed check is not given.
rc, lines = run([{"name": "c", "result": "FAIL", "command": ["build/tests/test_c"],
                  "stdout": "# field a\nnot ok 1 A\n# field b\nnot ok 2 B\n"}])
point("a C test's failed checks named without a diagnostic line (tap_diag may be the next check's)",
      rc == 1 and [l.split("build-x: c: ", 1)[-1] for l in lines[:2]] == ["not ok 1 A", "not ok 2 B"], str(lines))

# threads_http's layout: the daemon's whole log dumped on stderr, the points' diagnostics holding only a tail
# and the report's heading and SUMMARY (reports(d)): the report with its frames is the one shown.
frames_a = [f"    #{i} h{i} daemon/worker.c:{i} (hdrpostd+0x{i})" for i in range(4)]
log = ["info: started", "WARNING: ThreadSanitizer: data race (pid=9)", "  Read of size 8 at 0x1 by thread T5:",
       *frames_a, "SUMMARY: ThreadSanitizer: data race daemon/worker.c:0 in h0"]
rc, lines = run([{"name": "t", "result": "FAIL", "command": ["python3", "test_threads.py"],
                  "stdout": "not ok 1 the daemon answers\n# exit code 66\nnot ok 2 no report\n"
                            "# WARNING: ThreadSanitizer: data race (pid=9)\n"
                            "# SUMMARY: ThreadSanitizer: data race daemon/worker.c:0 in h0\n",
                  "stderr": "\n".join(log) + "\n"}])
reported = [l.split("build-x: t: ", 1)[1] for l in lines if l.startswith("REPORT ")]
point("threads_http's layout: the exit code after its check, the report from the dumped log with its frames",
      "not ok 1 the daemon answers | exit code 66" in "\n".join(lines) and len(reported) == 6
      and reported[2].startswith("#0 h0") and reported[4].startswith("#2 h2") and reported[5].startswith("SUMMARY"),
      "\n".join(lines))

# UBSan's heading, and a report longer than the lines shown: its SUMMARY is still there.
ubsan = ["api/x.c:3:9: runtime error: signed integer overflow", "    #0 f api/x.c:3 (hdrpostd+0x1)",
         "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior api/x.c:3:9 in"]
long_report = ["WARNING: ThreadSanitizer: data race (pid=1)"] + \
    [f"  Write of size 8 at 0x{k} by thread T{k}:\n    #0 w{k} a.c:{k} (x+0x1)" for k in range(20)] + \
    ["SUMMARY: ThreadSanitizer: data race a.c:0 in w0"]
rc, lines = run([{"name": "u", "result": "FAIL", "stdout": "not ok 1 u\n", "stderr": "\n".join(ubsan)},
                 {"name": "v", "result": "FAIL", "stdout": "not ok 1 v\n", "stderr": "\n".join(long_report)}])
u = [l for l in lines if l.startswith("REPORT ") and "build-x: u: " in l]
v = [l for l in lines if l.startswith("REPORT ") and "build-x: v: " in l]
point("UBSan's 'runtime error' report shown; a long report cut to 24 lines with its SUMMARY last",
      len(u) == 3 and "runtime error" in u[0] and len(v) == 24 and v[-1].endswith("SUMMARY: ThreadSanitizer: data race "
                                                                                  "a.c:0 in w0"), "\n".join(lines))
print(f"1..{n}")
