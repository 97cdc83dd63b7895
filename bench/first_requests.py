#!/usr/bin/env python3
"""The first requests on a fresh daemon, phase by phase: what the first request of a frame size pays
that the later ones do not (issue 6: "first request no slower than the tenth"). bench_http.py reports
the totals of the first ten; this prints every Server-Timing phase of each, since the totals move with
libwebp's encode by more than the first request's own costs.

  first_requests.py HDRPOSTD FRAME.exr [N] [DEVICE] [--format webp|png]

Starts the daemon as bench_http.py does (a fresh pipeline cache directory), posts FRAME N times (default
10) from one client and prints one line per request."""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as bh  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("frame")
    ap.add_argument("n", type=int, nargs="?", default=10)
    ap.add_argument("device", nargs="?", default=os.environ.get("HDRPOST_DEVICE", ""))
    ap.add_argument("--format", default="webp")
    a = ap.parse_args()
    with open(a.frame, "rb") as f:
        body = f.read()
    with tempfile.TemporaryDirectory(prefix="hdrpost-first-") as tmp:
        port = bh.free_port()
        proc, _ = bh.start(a.exe, port, os.path.join(tmp, "cache"), a.device)
        try:
            conn = bh.http.client.HTTPConnection(bh.HOST, port, timeout=300)
            for i in range(a.n):
                t, _ = bh.post(conn, body, f"?output.format={a.format}")
                print(i + 1, " ".join(f"{k}={v:.1f}" for k, v in t.items()), flush=True)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
