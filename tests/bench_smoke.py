"""The benchmark programs run on the GPU host, not in CI; this runs bench_reduce's --timeline mode once on
whatever device the tests use (lavapipe in CI), so the benchmark's own code cannot rot unseen: its
results against the CPU reference, its timeline's consistency, and the validation layer, which the
benchmark turns on when HDRPOST_BENCH_VALIDATION is set. Times are printed as diagnostics only: never
judged here (performance is measured on the GPU host, docs/BENCHMARKS.md).

Usage: bench_smoke.py BENCH_REDUCE"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402  (its TAP points)


def main():
    bench = sys.argv[1]
    args = [bench, "--quick", "--timeline", "--runs", "10"]
    if os.environ.get("HDRPOST_TEST_DEVICE"):
        args += ["--device", os.environ["HDRPOST_TEST_DEVICE"]]
    env = dict(os.environ, HDRPOST_BENCH_VALIDATION="1")
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    lines = out.splitlines()
    harness.point("bench_reduce --quick --timeline exits 0", run.returncode == 0, out)
    reference = [l for l in lines if l.startswith("check against the CPU reference:")]
    harness.point("the timeline module's statistics match the CPU reference after both flushes",
                  len(reference) == 2 and all(l.endswith(": ok") for l in reference), "\n".join(reference) or out)
    timeline = [l for l in lines if l.startswith("check of the timeline")]
    harness.point("every dispatched workgroup recorded its phases in order, and one combined",
                  len(timeline) == 2 and all(l.endswith(": ok") for l in timeline), "\n".join(timeline) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("validation layer reported nothing", not validation, "\n".join(validation))
    for l in lines:
        if l.startswith("| dispatch") or l.startswith("| first start"):
            print(f"# {l}")
    print(f"1..{harness.count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
