#!/usr/bin/env python3
"""End-to-end benchmark of hdrpostd over HTTP, for the GPU host (docs/BENCHMARKS.md, issue 4).

Makes a 4K half-float EXR (ZIP, and PIZ) from a small real render with tools/make_frame, starts the
daemon, and posts the frame:
  - one client, --requests times per output format: the Server-Timing breakdown at p50 and p99, and
    "everything but the encoder" (total minus encode) per request;
  - 1, 4 and 16 concurrent clients: frames per second;
  - start-up: exec to /readyz 200 without and with the pipeline cache.

Usage: bench_http.py HDRPOSTD MAKE_FRAME SOURCE_FRAME [--requests N] [--device D] [--seconds S]
Python standard library only; talks to 127.0.0.1 only; every wait is bounded."""
import argparse
import http.client
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
PHASES = ["recv", "decode", "queue", "upload", "reduce", "tonemap", "download", "encode", "total"]


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start(exe, port, cache, device):
    args = [exe, f"--listen={HOST}:{port}", f"--pipeline_cache={cache}", "--log_level=warn", "--queue_depth=256",
            "--request_timeout_s=600"]
    if device:
        args.append(f"--device={device}")
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = t0 + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("hdrpostd exited: " + proc.stderr.read())
        try:
            c = http.client.HTTPConnection(HOST, port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return proc, time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.005)
    proc.kill()
    raise RuntimeError("hdrpostd did not become ready")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def post(conn, body, query):
    conn.request("POST", "/v1/render" + query, body=body, headers={"Content-Type": "application/octet-stream"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {data[:200]!r}")
    timing = {}
    for m in re.finditer(r"(\w+);dur=([\d.]+)", r.getheader("Server-Timing", "")):
        timing[m.group(1)] = float(m.group(2))
    return timing, len(data)


def pct(values, p):
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def latency(port, body, query, n):
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    post(conn, body, query)  # the first request of a size allocates its buffers: not counted
    rows, size = [], 0
    for _ in range(n):
        t, size = post(conn, body, query)
        t["total_minus_encode"] = t["total"] - t.get("encode", 0)
        rows.append(t)
    conn.close()
    return rows, size


def throughput(port, body, query, clients, seconds):
    done, errors = [0], []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client():
        conn = http.client.HTTPConnection(HOST, port, timeout=300)
        try:
            while time.monotonic() < stop_at:
                post(conn, body, query)
                with lock:
                    done[0] += 1
        except Exception as e:  # reported, not hidden
            errors.append(str(e))
        finally:
            conn.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 300)
    return done[0] / (time.monotonic() - t0), errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hdrpostd")
    ap.add_argument("make_frame")
    ap.add_argument("source")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--device", default=os.environ.get("HDRPOST_DEVICE", ""))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hdrpost-bench-") as tmp:
        frames = {}
        for comp in ("zip", "piz"):
            path = os.path.join(tmp, f"frame_{comp}.exr")
            subprocess.run([a.make_frame, a.source, path, "4", comp], check=True, stdout=subprocess.DEVNULL)
            with open(path, "rb") as f:
                frames[comp] = f.read()
        cache = os.path.join(tmp, "pipeline.cache")
        port = free_port()
        proc, cold = start(a.hdrpostd, port, cache, a.device)
        stop(proc)
        port = free_port()
        proc, warm = start(a.hdrpostd, port, cache, a.device)
        try:
            print(f"# bench_http: {time.strftime('%Y-%m-%d')}\n")
            print(f"start-up (exec to /readyz 200): {cold * 1000:.0f} ms without the pipeline cache, "
                  f"{warm * 1000:.0f} ms with it\n")
            for comp, body in frames.items():
                print(f"frame: 3840x2160 RGBA half, {comp.upper()}, {len(body) / 1e6:.1f} MB\n")
                print("| output | phase | p50 ms | p99 ms |\n|---|---|---|---|")
                for fmt, query in (("webp (defaults)", "?output.format=webp"), ("png (defaults)", "?output.format=png")):
                    rows, size = latency(port, body, query, a.requests)
                    for phase in PHASES + ["total_minus_encode"]:
                        vals = [r[phase] for r in rows if phase in r]
                        if vals:
                            print(f"| {fmt} | {phase} | {pct(vals, 50):.2f} | {pct(vals, 99):.2f} |")
                    print(f"| {fmt} | image bytes | {size} | |")
                print()
                if comp != "zip":
                    continue
                print("| output | clients | frames/s | errors |\n|---|---|---|---|")
                for fmt, query in (("webp", "?output.format=webp"), ("png", "?output.format=png")):
                    for clients in (1, 4, 16):
                        fps, errors = throughput(port, body, query, clients, a.seconds)
                        print(f"| {fmt} | {clients} | {fps:.2f} | {len(errors)} {errors[:1]} |")
                print()
        finally:
            stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
