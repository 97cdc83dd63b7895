#!/usr/bin/env python3
"""End-to-end benchmark of hdrpostd over HTTP, for the GPU host (docs/BENCHMARKS.md, issue 4).

Makes a 4K half-float EXR (ZIP, and PIZ) from a small real render with tools/make_frame, starts the
daemon, and posts the frame:
  - start-up: exec to /readyz 200 without and with the pipeline cache; the first request's latency on
    the fresh daemon against the tenth's;
  - one client, --requests times per output format: the Server-Timing breakdown at p50 and p99, and
    "everything but the encoder" (total minus encode) per request;
  - 1, 4, 16 and 64 concurrent clients per compression and output format: frames per second and the
    client-side latency p50/p99; the daemon's resident memory (peak) and GPU memory (VK_EXT_memory_budget,
    from /v1/gpu) under the 64-client load.
--json PATH writes every figure for bench/plot_http.py.

Usage: bench_http.py HDRPOSTD MAKE_FRAME SOURCE_FRAME [--requests N] [--device D] [--seconds S] [--json P]
                    [--clients 1,4,16,64] [--formats webp,png] [--compressions zip,piz]
--formats takes webp, png (the CPU's encoder) and png_gpu (output.png_encoder gpu).
Python standard library only; talks to 127.0.0.1 only; every wait is bounded."""
import argparse
import http.client
import json
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
PHASES = ["recv", "decode", "queue", "upload", "reduce", "tonemap", "png_gpu", "download", "encode", "encode_cpu",
          "total"]
# --formats: the outputs by name; png_gpu is PNG with the GPU encoder (issue 20, output.png_encoder).
FORMATS = {"webp": "?output.format=webp", "png": "?output.format=png",
           "png_gpu": "?output.format=png&output.png_encoder=gpu"}


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


def memory_kb(pid):
    """VmRSS and VmHWM (peak) of a process, kB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def gpu_usage(port):
    """The device-local heaps' usage as /v1/gpu reports it (VK_EXT_memory_budget), bytes; None without."""
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    c.request("GET", "/v1/gpu")
    doc = json.loads(c.getresponse().read())
    heaps = [h for h in doc.get("memory_heaps", []) if h.get("device_local") and "usage_bytes" in h]
    return sum(h["usage_bytes"] for h in heaps) if heaps else None


def throughput(port, body, query, clients, seconds, pid=None):
    done, errors, lat = [0], [], []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    rss = [0]
    gpu = [None]

    def client():
        conn = http.client.HTTPConnection(HOST, port, timeout=300)
        try:
            while time.monotonic() < stop_at:
                t = time.monotonic()
                post(conn, body, query)
                with lock:
                    done[0] += 1
                    lat.append((time.monotonic() - t) * 1000)
        except Exception as e:  # reported, not hidden
            errors.append(str(e))
        finally:
            conn.close()

    def sampler():  # resident memory and GPU memory while the clients run
        while time.monotonic() < stop_at:
            try:
                rss[0] = max(rss[0], memory_kb(pid).get("VmRSS", 0))
                g = gpu_usage(port)
                gpu[0] = g if gpu[0] is None or (g or 0) > gpu[0] else gpu[0]
            except (OSError, ValueError):
                pass
            time.sleep(0.25)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    if pid:
        threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 300)
    fps = done[0] / (time.monotonic() - t0)
    return {"fps": fps, "errors": errors, "p50_ms": pct(lat, 50) if lat else None,
            "p99_ms": pct(lat, 99) if lat else None, "rss_peak_kb": rss[0] or None, "gpu_bytes_peak": gpu[0]}


def first_requests(port, body, query, n=10):
    """Client-side latency of the first n requests on a fresh daemon, ms."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    out = []
    for _ in range(n):
        t = time.monotonic()
        timing, _ = post(conn, body, query)
        out.append({"client_ms": (time.monotonic() - t) * 1000, **timing})
    conn.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hdrpostd")
    ap.add_argument("make_frame")
    ap.add_argument("source")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--device", default=os.environ.get("HDRPOST_DEVICE", ""))
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--formats", default="webp,png", help="of " + ", ".join(FORMATS))
    ap.add_argument("--compressions", default="zip,piz")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    result = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "latency": {}, "throughput": [],
              "first_requests": {}}
    with tempfile.TemporaryDirectory(prefix="hdrpost-bench-") as tmp:
        frames = {}
        formats = [(f, FORMATS[f]) for f in a.formats.split(",")]
        for comp in a.compressions.split(","):
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
        result["startup_ms"] = {"cold": cold * 1000, "warm": warm * 1000}
        try:
            print(f"# bench_http: {time.strftime('%Y-%m-%d')}\n")
            print(f"start-up (exec to /readyz 200): {cold * 1000:.0f} ms without the pipeline cache, "
                  f"{warm * 1000:.0f} ms with it\n")
            print("| first requests on the fresh daemon (ZIP, webp) | client ms | server total ms |\n|---|---|---|")
            first = first_requests(port, frames["zip"], "?output.format=webp")
            result["first_requests"] = first
            for i, r in enumerate(first):
                print(f"| request {i + 1} | {r['client_ms']:.1f} | {r.get('total', 0):.1f} |")
            print()
            for comp, body in frames.items():
                print(f"frame: 3840x2160 RGBA half, {comp.upper()}, {len(body) / 1e6:.1f} MB\n")
                print("| output | phase | p50 ms | p99 ms |\n|---|---|---|---|")
                for fmt, query in formats:
                    rows, size = latency(port, body, query, a.requests)
                    result["latency"][f"{comp} {fmt}"] = rows
                    for phase in PHASES + ["total_minus_encode"]:
                        vals = [r[phase] for r in rows if phase in r]
                        if vals:
                            print(f"| {fmt} | {phase} | {pct(vals, 50):.2f} | {pct(vals, 99):.2f} |")
                    print(f"| {fmt} | image bytes | {size} | |")
                print()
                print("| frame | output | clients | frames/s | p50 ms | p99 ms | peak RSS MB | GPU memory MB | errors |\n"
                      "|---|---|---|---|---|---|---|---|---|")
                for fmt, query in formats:
                    for clients in (int(c) for c in a.clients.split(",")):
                        r = throughput(port, body, query, clients, a.seconds, proc.pid)
                        result["throughput"].append({"frame": comp, "output": fmt, "clients": clients, **r})
                        mb = lambda v, k=1024: f"{v / k:.0f}" if v else "-"  # noqa: E731
                        print(f"| {comp} | {fmt} | {clients} | {r['fps']:.2f} | {r['p50_ms'] or 0:.0f} | "
                              f"{r['p99_ms'] or 0:.0f} | {mb(r['rss_peak_kb'])} | {mb(r['gpu_bytes_peak'], 1 << 20)} | "
                              f"{len(r['errors'])} {r['errors'][:1]} |")
                print()
            hwm = memory_kb(proc.pid).get("VmHWM")
            result["rss_hwm_kb"] = hwm
            print(f"daemon peak resident memory over the whole run (VmHWM): {hwm / 1024:.0f} MB\n")
        finally:
            stop(proc)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
