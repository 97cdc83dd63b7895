#!/usr/bin/env python3
"""Two builds of hdrpostd side by side in one run: the same frame posted to each in turn, one request at
a time, so that both see the same machine at the same moment. Run-to-run differences between GPU hosts
(receive alone moved 11 -> 17 ms between two runs of unchanged code) are larger than some changes worth
measuring; alternating requests cancels them.

  ab_http.py HDRPOSTD_A HDRPOSTD_B MAKE_FRAME SOURCE_FRAME [--requests N] [--device D] [--formats webp,png]

Prints, per output format, the p50 and p99 of each Server-Timing phase for A and for B, and B/A."""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as bh  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("make_frame")
    ap.add_argument("source")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--device", default=os.environ.get("HDRPOST_DEVICE", ""))
    ap.add_argument("--formats", default="webp,png")
    ap.add_argument("--compression", default="zip")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hdrpost-ab-") as tmp:
        path = os.path.join(tmp, "frame.exr")
        subprocess.run([a.make_frame, a.source, path, "4", a.compression], check=True, stdout=subprocess.DEVNULL)
        with open(path, "rb") as f:
            body = f.read()
        procs, conns = [], []
        try:
            for exe in (a.a, a.b):
                port = bh.free_port()
                proc, _ = bh.start(exe, port, os.path.join(tmp, f"cache-{len(procs)}"), a.device)
                procs.append(proc)
                conns.append(bh.http.client.HTTPConnection(bh.HOST, port, timeout=300))
            for fmt in a.formats.split(","):
                query = f"?output.format={fmt}"
                for c in conns:  # the first request of a size allocates: not counted
                    bh.post(c, body, query)
                rows = ([], [])
                for _ in range(a.requests):
                    for k, c in enumerate(conns):
                        t, _ = bh.post(c, body, query)
                        t["total_minus_encode"] = t["total"] - t.get("encode", 0)
                        rows[k].append(t)
                print(f"\n{a.compression.upper()} 4K -> {fmt}, {a.requests} requests each, alternating\n")
                print("| phase | A p50 | A p99 | B p50 | B p99 | B/A p50 |\n|---|---|---|---|---|---|")
                for phase in bh.PHASES + ["total_minus_encode"]:
                    va = [r[phase] for r in rows[0] if phase in r]
                    vb = [r[phase] for r in rows[1] if phase in r]
                    if va and vb:
                        pa, pb = bh.pct(va, 50), bh.pct(vb, 50)
                        print(f"| {phase} | {pa:.2f} | {bh.pct(va, 99):.2f} | {pb:.2f} | {bh.pct(vb, 99):.2f} | "
                              f"{pb / pa if pa else float('nan'):.2f} |")
        finally:
            for c in conns:
                c.close()
            for p in procs:
                bh.stop(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
