#!/usr/bin/env python3
"""Frames served under overload, two builds side by side (docs/BENCHMARKS.md, docs/SECURITY.md item 7).

More clients than the queue holds post a 4K ZIP EXR as the raw body, each retrying at once when answered 429,
for --seconds per round; rounds alternate between the builds (A, B, A, B) so that both see the same machine.
A build that decodes a frame before it finds the queue full spends the CPU that the admitted frames need;
one that admits from the headers does not. Prints, per build and route: frames answered 200 per second,
429s per second, and the 200s' latency p50/p99.

  overload_http.py HDRPOSTD_A HDRPOSTD_B MAKE_FRAME SOURCE_FRAME [--clients N] [--queue Q] [--seconds S]

Python standard library only; talks to 127.0.0.1 only; every wait is bounded."""
import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as bh  # noqa: E402


def overload(port, body, path, clients, seconds):
    """(200s, 429s, other, latencies of the 200s) from `clients` threads posting for `seconds`."""
    lock = threading.Lock()
    counts = {"ok": 0, "full": 0, "other": 0}
    latencies = []
    stop_at = time.monotonic() + seconds

    def client():
        conn = http.client.HTTPConnection(bh.HOST, port, timeout=120)
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            try:
                conn.request("POST", path, body=body)
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except OSError:
                conn.close()
                conn = http.client.HTTPConnection(bh.HOST, port, timeout=120)
                status = None
            with lock:
                if status == 200:
                    counts["ok"] += 1
                    latencies.append((time.monotonic() - t0) * 1e3)
                elif status == 429:
                    counts["full"] += 1
                else:
                    counts["other"] += 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 180)
    return counts, latencies


def start(exe, port, cache, queue, device, gpu_delay_ms):
    """The daemon with a short queue, ready; its log is not read (errors only)."""
    args = [exe, f"--listen={bh.HOST}:{port}", f"--pipeline_cache={cache}", "--log_level=error",
            f"--queue_depth={queue}", f"--test_gpu_delay_ms={gpu_delay_ms}"]
    if device:
        args.append(f"--device={device}")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            c = http.client.HTTPConnection(bh.HOST, port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{exe} did not become ready")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("make_frame")
    ap.add_argument("source")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--queue", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--device", default=os.environ.get("HDRPOST_DEVICE", ""))
    # A GPU that takes this long per frame (the test-only setting): the GPU, not the encoders, is then the
    # bottleneck, the queue fills and the 429 path is what the extra clients take.
    ap.add_argument("--gpu-delay-ms", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hdrpost-overload-") as tmp:
        frame = os.path.join(tmp, "frame.exr")
        subprocess.run([a.make_frame, a.source, frame, "4", "zip"], check=True, stdout=subprocess.DEVNULL)
        body = open(frame, "rb").read()
        results = {}
        for path in ("/v1/analyze", "/v1/render?output.format=png"):
            for rnd in range(2):
                for label, exe in (("A", a.a), ("B", a.b)):
                    port = bh.free_port()
                    proc = start(exe, port, os.path.join(tmp, f"cache-{label}"), a.queue, a.device, a.gpu_delay_ms)
                    counts, lat = overload(port, body, path, a.clients, a.seconds)
                    bh.stop(proc)
                    r = results.setdefault((path, label), {"ok": 0, "full": 0, "other": 0, "lat": [], "s": 0.0})
                    for k in ("ok", "full", "other"):
                        r[k] += counts[k]
                    r["lat"] += lat
                    r["s"] += a.seconds
        print(f"{a.clients} clients, queue_depth {a.queue}, test_gpu_delay_ms {a.gpu_delay_ms}, 4K ZIP EXR ({len(body)} bytes) as the body, 429s "
              f"retried at once; {a.seconds:g} s per round, 2 rounds per build, alternating\n")
        print("| route | build | 200/s | 429/s | other | 200 latency p50 ms | p99 ms |\n|---|---|---|---|---|---|---|")
        for (path, label), r in results.items():
            exe = a.a if label == "A" else a.b
            lat = sorted(r["lat"]) or [float("nan")]
            print(f"| {path} | {label} ({os.path.basename(exe)}) | {r['ok'] / r['s']:.1f} | {r['full'] / r['s']:.1f} | "
                  f"{r['other']} | {bh.pct(lat, 50):.0f} | {bh.pct(lat, 99):.0f} |")


if __name__ == "__main__":
    main()
