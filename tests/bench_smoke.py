"""The benchmark programs run on the GPU host, not in CI; this runs their --smoke modes (small buffers,
few runs) once on whatever device the tests use (lavapipe in CI), so the benchmarks' own code cannot rot
unseen: their results against the CPU reference (bench_reduce's table, timeline and --after-upload modes,
bench_tone, bench_dof, bench_png_gpu's streams), the timeline's consistency, and the validation layer,
which a benchmark turns on when HDRPOST_BENCH_VALIDATION is set. Times are printed as diagnostics only, never judged here
(performance is measured on the GPU host, docs/BENCHMARKS.md).

Usage: bench_smoke.py BENCH_REDUCE BENCH_TONE BENCH_DOF BENCH_PNG_GPU"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402  (its TAP points)


def run(args):
    if os.environ.get("HDRPOST_TEST_DEVICE"):
        args = args + ["--device", os.environ["HDRPOST_TEST_DEVICE"]]
    env = dict(os.environ, HDRPOST_BENCH_VALIDATION="1")
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    return done.returncode, out, out.splitlines()


def main():
    bench_reduce, bench_tone, bench_dof, bench_png_gpu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    rc, out, lines = run([bench_reduce, "--smoke", "--timeline"])
    harness.point("bench_reduce --smoke --timeline exits 0", rc == 0, out)
    reference = [l for l in lines if l.startswith("check against the CPU reference:")]
    harness.point("the timeline module's statistics match the CPU reference after both flushes",
                  len(reference) == 2 and all(l.endswith(": ok") for l in reference), "\n".join(reference) or out)
    timeline = [l for l in lines if l.startswith("check of the timeline")]
    harness.point("every dispatched workgroup recorded its phases in order, and one combined",
                  len(timeline) == 2 and all(l.endswith(": ok") for l in timeline), "\n".join(timeline) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_reduce: validation layer reported nothing", not validation, "\n".join(validation))
    for l in lines:
        if l.startswith("| dispatch") or l.startswith("| first start"):
            print(f"# {l}")

    rc, out, lines = run([bench_reduce, "--smoke"])
    harness.point("bench_reduce --smoke (the table) exits 0", rc == 0, out)
    rows = [l for l in lines if l.startswith("| 1080p |") and "prefetch" in l]
    harness.point("bench_reduce: every configuration's statistics match the CPU reference (2 formats x 2 variants"
                  " x 2 flushes)", len(rows) == 8 and all(l.endswith("| ok |") for l in rows), "\n".join(rows) or out)
    shape = [l for l in lines if re.match(r"\| 1080p \| rgba(16|32)f \| [0-9.]+ \| [0-9.]+ \| \d+% \|", l)]
    harness.point("bench_reduce: the read probe ran in the default's launch shape for both formats", len(shape) == 2,
                  "\n".join(shape) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_reduce (the table): validation layer reported nothing", not validation, "\n".join(validation))

    rc, out, lines = run([bench_reduce, "--smoke", "--after-upload"])
    harness.point("bench_reduce --smoke --after-upload exits 0", rc == 0, out)
    rows = [l for l in lines if l.startswith("| 1080p |")]
    harness.point("bench_reduce --after-upload: both formats' statistics match the CPU reference after either upload",
                  len(rows) == 2 and all(l.endswith("| ok |") for l in rows), "\n".join(rows) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_reduce --after-upload: validation layer reported nothing", not validation,
                  "\n".join(validation))

    rc, out, lines = run([bench_tone, "--smoke"])
    harness.point("bench_tone --smoke exits 0", rc == 0, out)
    rows = [l for l in lines if l.startswith("| 320x180 |")]
    checked = [l for l in rows if "| ok (" in l]
    harness.point("bench_tone: every look's image matches the CPU reference (both formats)",
                  len(rows) >= 2 and len(checked) == len(rows), "\n".join(rows) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_tone: validation layer reported nothing", not validation, "\n".join(validation))

    rc, out, lines = run([bench_dof, "--smoke"])
    harness.point("bench_dof --smoke exits 0", rc == 0, out)
    rows = [l for l in lines if l.startswith("| 320x180 |")]
    harness.point("bench_dof: every configuration ran on both inputs (5 x 2 rows)", len(rows) == 10,
                  "\n".join(rows) or out)
    sprites = [re.search(r"\| (\d+) of (\d+) \|$", l) for l in rows if "bokeh" in l]
    harness.point("bench_dof: the bokeh configurations drew every sprite they found",
                  len(sprites) == 4 and all(m and m.group(1) == m.group(2) and int(m.group(1)) > 0 for m in sprites),
                  "\n".join(l for l in rows if "bokeh" in l) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_dof: validation layer reported nothing", not validation, "\n".join(validation))

    rc, out, lines = run([bench_png_gpu, "--quick"])
    harness.point("bench_png_gpu --quick exits 0", rc == 0, out)
    harness.point("bench_png_gpu: the four deflate variants' streams inflate to the CPU reference's filtered bytes",
                  any("streams inflate exactly" in l for l in lines), out)
    gpu = [l for l in lines if l.strip().startswith("| GPU") and "GPU timestamps" in l]
    names = {l.split("|")[1].strip() for l in gpu}
    cpu = [l for l in lines if "| CPU encoder," in l or "| libdeflate level 1," in l]
    harness.point("bench_png_gpu: four different GPU variants and the two all-core CPU coders each give a row",
                  len(gpu) == 4 and len(names) == 4 and len(cpu) == 2, "\n".join(gpu + cpu) or out)
    validation = [l for l in lines if "validation" in l.lower()]
    harness.point("bench_png_gpu: validation layer reported nothing", not validation, "\n".join(validation))

    print(f"1..{harness.count()}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
