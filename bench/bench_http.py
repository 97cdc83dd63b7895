#!/usr/bin/env python3
"""End-to-end benchmark of hdrpostd over HTTP, for the GPU host (docs/BENCHMARKS.md, issue 4).

Makes a large EXR (ZIP, and PIZ) from a small real frame with tools/make_frame (by default 4 times larger,
RGBA half, bilinear; --factor and --frame-arg choose the size and the shape: --mirror keeps the source's own
texture, --float, --channels, --aovs), starts the daemon, and posts the frame:
  - start-up: exec to /readyz 200 without and with the pipeline cache; the first request's latency on
    the fresh daemon against the tenth's;
  - one client, --requests times per output format: the Server-Timing breakdown at p50 and p99, and
    "everything but the encoder" (total minus encode) per request;
  - 1, 4, 16 and 64 concurrent clients per compression and output format: frames per second and the
    client-side latency p50/p99; the daemon's resident memory (peak) and GPU memory (VK_EXT_memory_budget,
    from /v1/gpu) under the 64-client load.
--json PATH writes every figure for bench/plot_http.py.

Usage: bench_http.py HDRPOSTD MAKE_FRAME SOURCE_FRAME [--requests N] [--device D] [--seconds S] [--json P]
                    [--clients 1,4,16,64] [--formats webp,png] [--compressions zip,piz] [--client-processes]
--formats takes webp, png (the CPU's encoder) and png_gpu (output.png_encoder gpu).
Python standard library only; talks to 127.0.0.1 only; every wait is bounded."""
import argparse
import http.client
import json
import multiprocessing
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
FORMATS = {"webp": "?output.format=webp", "png": "?output.format=png&output.png_encoder=cpu",
           "png_gpu": "?output.format=png&output.png_encoder=gpu"}


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


DAEMON_ARGS = []  # --daemon-arg: settings every daemon of the run gets (an OCIO config, say)


def start(exe, port, cache, device):
    # Every client here is one address: 64 clients and the sampler's connection passed the default
    # max_connections_per_ip (64). Until 2026-11-30 the 65th was refused: a client's when the sampler connected
    # first (one "connection reset by peer" in the run, the only runs with a GPU memory figure), else the
    # sampler's (no figure). A farm's clients come from many addresses.
    args = [exe, f"--listen={HOST}:{port}", f"--pipeline_cache={cache}", "--log_level=warn", "--queue_depth=256",
            "--request_timeout_s=600", "--max_connections_per_ip=0", *DAEMON_ARGS]
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


def raw_post(sock, body, query, buf):
    """One request on a kept-alive socket, as lean as a client can be: the body sent from memory without a
    copy, the answer read into a buffer made once. Returns the client's ms for the whole exchange."""
    t0 = time.monotonic()
    head = (f"POST /v1/render{query} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head)
    sock.sendall(memoryview(body))
    got = 0
    view = memoryview(buf)
    while True:  # the headers
        n = sock.recv_into(view[got:], 65536)
        if n == 0:
            raise RuntimeError("the daemon closed the connection")
        got += n
        end = bytes(buf[:got]).find(b"\r\n\r\n")
        if end >= 0:
            break
    headers = bytes(buf[:end]).decode("latin-1")
    if not headers.startswith("HTTP/1.1 200"):
        raise RuntimeError(headers.split("\r\n")[0])
    length = int(re.search(r"(?im)^content-length:\s*(\d+)", headers).group(1))
    want = end + 4 + length
    if want > len(buf):  # grown once per size: the next answers of it reuse the buffer
        view.release()
        buf.extend(bytes(want - len(buf)))
        view = memoryview(buf)
    while got < want:
        n = sock.recv_into(view[got:want])
        if n == 0:
            raise RuntimeError("the daemon closed the connection")
        got += n
    return (time.monotonic() - t0) * 1000


def latency(port, body, query, n):
    """Server-Timing of n requests after a first one (a size's first allocates its buffers: not counted),
    then the client's ms of n more from a raw-socket client (raw_post), without http.client's own costs."""
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    post(conn, body, query)
    rows, size = [], 0
    for _ in range(n):
        t, size = post(conn, body, query)
        t["total_minus_encode"] = t["total"] - t.get("encode", 0)
        rows.append(t)
    conn.close()
    buf = bytearray(max(size, 1) + (1 << 20))
    with socket.create_connection((HOST, port), timeout=120) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = [raw_post(sock, body, query, buf) for _ in range(n)]
    for r, ms in zip(rows, client):
        r["client"] = ms
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


TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
GPU_THREAD_STATES = ("idle", "decode_wait", "gpu_wait", "encoder_wait", "work")


def thread_cpu_ms(pid):
    """CPU time (user + system) of the process, its system part, and of its live threads by name (the daemon
    names its own: hp-gpu, hp-finish, hp-exr-decode, ...; libmicrohttpd's are MHD-*), ms."""
    def ticks(path):
        with open(path) as f:
            text = f.read()
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        return name, (int(fields[11]) + int(fields[12])) * TICK_MS, int(fields[12]) * TICK_MS
    _, total, system = ticks(f"/proc/{pid}/stat")
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, ms, _ = ticks(f"/proc/{pid}/task/{tid}/stat")
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        by_name[name] = by_name.get(name, 0) + ms
    return total, by_name, system


def host_cpu():
    """(busy, all) jiffies of every core together, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle, iowait
    return sum(v) - idle, sum(v)


def metric_counters(port):
    """/metrics' counters the runs report: the GPU thread's seconds by state, the EXR ZIP frames by decoder
    (zip:NAME), the host pool's blocks made (on a request's path, and ahead by the pool's own thread) and freed,
    and the seconds making them (pool:NAME)."""
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for m in re.finditer(r'^hdrpost_gpu_thread_seconds_total\{state="(\w+)"\} ([0-9.eE+-]+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    for m in re.finditer(r'^hdrpost_exr_zip_frames_total\{decoder="(\w+)"\} ([0-9.eE+-]+)$', text, re.M):
        out["zip:" + m.group(1)] = float(m.group(2))
    for m in re.finditer(r'^hdrpost_exr_cpu_frames_total\{reason="(\w+)"\} ([0-9.eE+-]+)$', text, re.M):
        out["zip:cpu_because_" + m.group(1)] = float(m.group(2))
    for m in re.finditer(r'^hdrpost_exr_zip_gpu_(batches_total\{inflate="\w+"\}|batches_beside_total|'
                         r'batch_frames_sum|batch_frames_count|batch_gpu_seconds_total\{inflate="\w+"\}) '
                         r'([0-9.eE+-]+)$', text, re.M):
        out["batch:" + re.sub(r'\{inflate="(\w+)"\}', r':\1', m.group(1).replace("_total", ""))] = float(m.group(2))
    for m in re.finditer(r'^hdrpost_stage_duration_seconds_(sum|count)\{stage="(\w+)"\} ([0-9.eE+-]+)$', text, re.M):
        out[f"stage:{m.group(2)}:{m.group(1)}"] = float(m.group(3))
    pool = r'^hdrpost_host_memory_(blocks_made|blocks_freed|make_seconds|blocks_made_ahead|make_ahead_seconds)_total'
    for m in re.finditer(pool + r' ([0-9.eE+-]+)$', text, re.M):
        out["pool:" + m.group(1)] = float(m.group(2))
    return out


def client_loop(port, body, query, stop_at, report):
    """One client: requests until stop_at, each a raw_post on one kept-alive connection (a client's own CPU,
    which shares the host, as small as Python makes it); report(latency_ms) after each, or report(None,
    error)."""
    buf = bytearray(1 << 20)  # raw_post grows it to the largest answer
    try:
        with socket.create_connection((HOST, port), timeout=300) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while time.monotonic() < stop_at:
                report(raw_post(sock, body, query, buf))
    except Exception as e:  # reported, not hidden
        report(None, str(e))


def client_process(port, body, query, stop_at, queue):
    lat, errors = [], []
    client_loop(port, body, query, stop_at, lambda ms, e=None: lat.append(ms) if e is None else errors.append(e))
    queue.put((lat, errors))


def throughput(port, body, query, clients, seconds, pid=None, processes=False):
    """Frames per second with `clients` at once for `seconds`, with what each frame cost in CPU: the daemon's
    (by thread), the clients', the whole host's busy share, and the GPU thread's time by state (/metrics).
    processes: each client a process of its own (no interpreter lock between them)."""
    done, errors, lat = [0], [], []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    rss = [0]
    gpu = [None]

    def report(ms, error=None):
        with lock:
            if error is None:
                done[0] += 1
                lat.append(ms)
            else:
                errors.append(error)

    def client():
        client_loop(port, body, query, stop_at, report)

    def sampler():  # resident memory and GPU memory while the clients run
        while time.monotonic() < stop_at:
            try:
                rss[0] = max(rss[0], memory_kb(pid).get("VmRSS", 0))
                g = gpu_usage(port)
                gpu[0] = g if gpu[0] is None or (g or 0) > gpu[0] else gpu[0]
            except (OSError, ValueError):
                pass
            time.sleep(0.25)

    d0, h0, g0, c0 = thread_cpu_ms(pid) if pid else (0, {}, 0), host_cpu(), metric_counters(port), os.times()
    t0 = time.monotonic()
    threads = [] if processes else [threading.Thread(target=client) for _ in range(clients)]
    procs, queue = [], None
    if processes:
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        procs = [ctx.Process(target=client_process, args=(port, body, query, stop_at, queue)) for _ in range(clients)]
    for p in procs:  # forked before this process starts its sampler thread: no lock of its is inherited
        p.start()
    if pid:
        threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for _ in procs:
        try:
            p_lat, p_err = queue.get(timeout=seconds + 300)
        except Exception as e:  # a client process that died: reported, not hidden
            report(None, f"a client process gave no result: {e!r}")
            continue
        for ms in p_lat:
            report(ms)
        for e in p_err:
            report(None, e)
    for t in threads + procs:
        t.join(timeout=seconds + 300)
    wall = time.monotonic() - t0
    d1, h1, g1, c1 = thread_cpu_ms(pid) if pid else (0, {}, 0), host_cpu(), metric_counters(port), os.times()
    fps = done[0] / wall
    frames = max(done[0], 1)
    by_name = {k: (v - d0[1].get(k, 0)) / frames for k, v in d1[1].items() if v - d0[1].get(k, 0) > 0}
    # Threads that ended during the run (the EXR decoder's, the PNG strips') are in the process's total only.
    by_name["(ended threads)"] = max(0.0, (d1[0] - d0[0]) / frames - sum(by_name.values()))
    client_s = (c1.user + c1.system + c1.children_user + c1.children_system) - \
               (c0.user + c0.system + c0.children_user + c0.children_system)
    g_total = sum(g1.get(k, 0) - g0.get(k, 0) for k in GPU_THREAD_STATES) or 1
    return {"fps": fps, "errors": errors, "p50_ms": pct(lat, 50) if lat else None,
            "p99_ms": pct(lat, 99) if lat else None, "rss_peak_kb": rss[0] or None, "gpu_bytes_peak": gpu[0],
            "daemon_cpu_ms_per_frame": (d1[0] - d0[0]) / frames, "daemon_threads_ms_per_frame": by_name,
            "daemon_system_ms_per_frame": (d1[2] - d0[2]) / frames,
            "client_cpu_ms_per_frame": client_s * 1000 / frames,
            "host_busy_pct": 100 * (h1[0] - h0[0]) / max(h1[1] - h0[1], 1),
            "gpu_thread_share": {k: (g1.get(k, 0) - g0.get(k, 0)) / g_total for k in GPU_THREAD_STATES},
            "host_pool_churn": {k[5:]: g1[k] - g0.get(k, 0) for k in g1 if k.startswith("pool:")},
            "exr_zip_frames": {k[4:]: g1[k] - g0.get(k, 0) for k in g1 if k.startswith("zip:") and g1[k] > g0.get(k, 0)},
            "exr_zip_batches": {k[6:]: g1[k] - g0.get(k, 0) for k in g1 if k.startswith("batch:")},
            "stage_mean_ms": stage_means(g0, g1)}


def stage_means(g0, g1):
    """Each phase's mean over the run, ms, from /metrics' hdrpost_stage_duration_seconds (the GPU stages' from
    their timestamp queries): what a phase takes under the run's load, where the first table is one client's."""
    out = {}
    for k in g1:
        if k.startswith("stage:") and k.endswith(":count"):
            name = k[6:-6]
            n = g1[k] - g0.get(k, 0)
            if n > 0:
                out[name] = 1000 * (g1[f"stage:{name}:sum"] - g0.get(f"stage:{name}:sum", 0)) / n
    return out


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
    ap.add_argument("--warmup", type=float, default=0,
                    help="seconds of the same load before each throughput run, not measured (the pools fill)")
    ap.add_argument("--factor", default="4", help="make_frame's: the source this many times larger")
    ap.add_argument("--frame-arg", action="append", default=[],
                    help="one more argument to make_frame (--mirror, --float, --channels rgb, --aovs), repeatable")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--client-processes", action="store_true",
                    help="each throughput client a process of its own, not a thread of this one")
    ap.add_argument("--daemon-arg", action="append", default=[], help="a setting for the daemon, repeatable")
    ap.add_argument("--format-query", action="append", default=[],
                    help="NAME=QUERY: one more output to measure, its query string (an OCIO view, say), repeatable")
    a = ap.parse_args()
    DAEMON_ARGS.extend(a.daemon_arg)
    for fq in a.format_query:
        name, query = fq.split("=", 1)
        FORMATS[name] = query
    result = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "latency": {}, "throughput": [],
              "first_requests": {}}
    with tempfile.TemporaryDirectory(prefix="hdrpost-bench-") as tmp:
        frames = {}
        formats = [(f, FORMATS[f]) for f in a.formats.split(",")]
        for comp in a.compressions.split(","):
            path = os.path.join(tmp, f"frame_{comp}.exr")
            made = subprocess.run([a.make_frame, a.source, path, a.factor, comp] + a.frame_arg, check=True,
                                  capture_output=True, text=True).stdout.strip()
            with open(path, "rb") as f:
                frames[comp] = f.read()
            result.setdefault("frames", {})[comp] = made
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
            print("| first requests on the fresh daemon (ZIP, else the first compression; webp) | client ms | server total ms |\n|---|---|---|")
            first = first_requests(port, frames.get("zip", next(iter(frames.values()))), "?output.format=webp")
            result["first_requests"] = first
            for i, r in enumerate(first):
                print(f"| request {i + 1} | {r['client_ms']:.1f} | {r.get('total', 0):.1f} |")
            print()
            for comp, body in frames.items():
                print(f"frame: {result['frames'][comp]} ({os.path.basename(a.source)}), {len(body) / 1e6:.1f} MB\n")
                print("| output | phase | p50 ms | p99 ms |\n|---|---|---|---|")
                for fmt, query in formats:
                    rows, size = latency(port, body, query, a.requests)
                    result["latency"][f"{comp} {fmt}"] = rows
                    for phase in PHASES + ["total_minus_encode", "client"]:
                        vals = [r[phase] for r in rows if phase in r]
                        if vals:
                            print(f"| {fmt} | {phase} | {pct(vals, 50):.2f} | {pct(vals, 99):.2f} |")
                    print(f"| {fmt} | image bytes | {size} | |")
                print()
                print("| frame | output | clients | frames/s | p50 ms | p99 ms | peak RSS MB | GPU memory MB | errors |\n"
                      "|---|---|---|---|---|---|---|---|---|")
                for fmt, query in formats:
                    for clients in (int(c) for c in a.clients.split(",")):
                        if a.warmup > 0:
                            throughput(port, body, query, clients, a.warmup, proc.pid, a.client_processes)
                        r = throughput(port, body, query, clients, a.seconds, proc.pid, a.client_processes)
                        result["throughput"].append({"frame": comp, "output": fmt, "clients": clients, **r})
                        mb = lambda v, k=1024: f"{v / k:.0f}" if v else "-"  # noqa: E731
                        print(f"| {comp} | {fmt} | {clients} | {r['fps']:.2f} | {r['p50_ms'] or 0:.0f} | "
                              f"{r['p99_ms'] or 0:.0f} | {mb(r['rss_peak_kb'])} | {mb(r['gpu_bytes_peak'], 1 << 20)} | "
                              f"{len(r['errors'])} {r['errors'][:1]} |")
                print()
                print("| output | clients | daemon CPU ms/frame (of it in the kernel; by thread) | client CPU ms/frame | "
                      "host busy | GPU thread: idle / decode wait / GPU wait / encoder wait / work |\n"
                      "|---|---|---|---|---|---|")
                for r in (r for r in result["throughput"] if r["frame"] == comp):
                    threads = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["daemon_threads_ms_per_frame"].items(),
                                                                           key=lambda kv: -kv[1]) if v >= 0.05)
                    share = " / ".join(f"{100 * r['gpu_thread_share'][k]:.0f}%" for k in GPU_THREAD_STATES)
                    print(f"| {r['output']} | {r['clients']} | {r['daemon_cpu_ms_per_frame']:.1f} "
                          f"({r['daemon_system_ms_per_frame']:.1f}; {threads}) | "
                          f"{r['client_cpu_ms_per_frame']:.1f} | {r['host_busy_pct']:.0f}% | {share} |")
                print()
                for r in (r for r in result["throughput"] if r["frame"] == comp and r["exr_zip_frames"]):
                    print(f"EXR ZIP frames of {r['output']}, {r['clients']} clients, by where they were inflated: " +
                          ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["exr_zip_frames"].items())))
                for r in (r for r in result["throughput"] if r["frame"] == comp and
                          r["exr_zip_batches"].get("batch_frames_count")):
                    b = r["exr_zip_batches"]
                    n = b["batch_frames_count"]
                    print(f"EXR ZIP batches on the GPU of {r['output']}, {r['clients']} clients: {n:.0f}, "
                          f"{b.get('batch_frames_sum', 0) / n:.1f} frames each; serial "
                          f"{b.get('batches:serial', 0):.0f} ({1000 * b.get('batch_gpu_seconds:serial', 0):.0f} ms of "
                          f"GPU), wide {b.get('batches:wide', 0):.0f} "
                          f"({1000 * b.get('batch_gpu_seconds:wide', 0):.0f} ms); begun beside another "
                          f"{b.get('batches_beside', 0):.0f}")
                for r in (r for r in result["throughput"] if r["frame"] == comp and r["stage_mean_ms"]):
                    print(f"phases of {r['output']}, {r['clients']} clients, mean ms over the run: " +
                          ", ".join(f"{k} {v:.2f}" for k, v in r["stage_mean_ms"].items()))
                for r in (r for r in result["throughput"] if r["frame"] == comp and r["host_pool_churn"]):
                    c = r["host_pool_churn"]
                    print(f"host memory blocks of {r['output']}, {r['clients']} clients, during the run: made "
                          f"{c.get('blocks_made', 0):.0f}, freed {c.get('blocks_freed', 0):.0f}, making them "
                          f"{1000 * c.get('make_seconds', 0):.0f} ms; made ahead {c.get('blocks_made_ahead', 0):.0f}, "
                          f"{1000 * c.get('make_ahead_seconds', 0):.0f} ms")
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
