#!/usr/bin/env python3
"""Scale-out benchmark: 1, 2, 4 replicas of hdrpostd (one a GPU) on one host (issue 37, item 6).

For each N of --replicas: starts N replicas (each its own GPU by --list-devices' UUID, its own pipeline cache,
its share of the host's cores as deploy/replicas.py's CPUAffinity gives it, HAProxy as a trusted proxy, a
bearer token), then measures three paths with the same total of N x --clients-per-replica clients:
  - direct: each client a process of its own bound to one replica, the ceiling without a proxy;
  - HAProxy: the clients to HAProxy's front (deploy/replicas.py's configuration, per-server maxconn the
    replica's queue plus its frames in flight); frames/s, client p50/p99, how many requests HAProxy gave each
    replica (its stats socket);
  - hdrpost: `hdrpost render SHOT --server URL1,...,URLN --jobs N x clients --exposure frame` over a shot of
    --shot-frames links to the frame; frames/s over the summary's seconds and over the whole wall time, p50 of
    the per-frame ms it logs, and which server rendered how many (--json's servers).
Each window records the host's busy share (/proc/stat) and, where nvidia-smi is found, each GPU's busy share
(nvidia-smi sampled every 0.5 s). Prints a markdown table (scaling = frames/s at N / frames/s at N=1, per path)
and --json writes every figure. A path that cannot run (no haproxy, an error) is left out of the table with
the reason, the others still run. The replicas, HAProxy and every client are stopped at the end of each N,
on errors and on SIGTERM too; every wait is bounded.

Usage: scale_out.py HDRPOSTD HDRPOST MAKE_FRAME SOURCE [--replicas 1,2,4] [--clients-per-replica 16]
         [--seconds 10] [--warmup S] [--shot-frames 400] [--format png_gpu] [--factor 4] [--frame-arg ARG]...
         [--daemon-arg ARG]... [--haproxy PATH] [--same-device] [--json OUT]
--same-device puts every replica on the first device (lavapipe included): a smoke test on a machine of one.
Reuses bench/bench_http.py (daemon start, the raw-socket client, host CPU) and deploy/replicas.py (the
HAProxy configuration, the devices, the CPU split). Python standard library only; 127.0.0.1 only."""
import argparse
import http.client
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_http = _load("bench_http", os.path.join(HERE, "bench_http.py"))
replicas = _load("replicas", os.path.join(ROOT, "deploy", "replicas.py"))

HOST = bench_http.HOST
# Behind a proxy the replicas need a token (deploy/replicas.py): one made for this run, given to the daemons
# and to hdrpost through the environment (HDRPOST_AUTH_TOKEN, HDRPOST_TOKEN), not on a command line.
TOKEN = "scale-out-" + os.urandom(12).hex()
AUTH_LINE = f"Authorization: Bearer {TOKEN}\r\n".encode()
QUEUE_DEPTH = 256            # bench_http.start's --queue_depth
SOCKET_TIMEOUT_S = 300       # one request, as bench_http's clients
DRAIN_S = 330                # after a window: the last requests in flight finish within this
STOP_S = 60                  # SIGTERM to exit, then SIGKILL
HAPROXY_UP_S = 30
SMI_PERIOD_S = 0.5
# --format: the HTTP paths' query (bench_http.FORMATS) and hdrpost's arguments for the same output.
HDRPOST_FORMAT = {"webp": ["--format", "webp"],
                  "png": ["--format", "png", "--set", "output.png_encoder=cpu"],
                  "png_gpu": ["--format", "png", "--set", "output.png_encoder=gpu"]}


# SIGTERM (a batch runner's time limit) and SIGINT unwind like Ctrl-C: every finally stops what it started.
# While a replica starts, the signal waits for its process to be in hand (Replica).
INTERRUPT = {"defer": False, "pending": None}


def on_signal(signum, _frame):
    if INTERRUPT["defer"]:
        INTERRUPT["pending"] = signum
        return
    raise KeyboardInterrupt(f"signal {signum}")


def helper_thread(target):
    """A daemon thread that leaves SIGTERM and SIGINT to the main thread: a signal taken by a thread blocked in
    a read would leave the main thread asleep in its wait, and the run would not end when told."""
    def run():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        target()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def log(msg):
    print(f"scale_out: {msg}", file=sys.stderr, flush=True)


# --- the replicas ----------------------------------------------------------------------------------------------

class Replica:
    """One hdrpostd started by bench_http.start with this process's affinity narrowed to its CPU share for the
    exec (the daemon sizes its threads by its affinity at start, as under systemd's CPUAffinity=); its stderr
    drained into a bounded tail (a full pipe would stall the daemon). It joins `started` as soon as it runs;
    SIGTERM and SIGINT wait (bounded by start's own 120 s) until then, so an interrupted start leaves no
    daemon that nobody stops."""

    def __init__(self, exe, index, port, cache, device, cpus, started):
        self.index, self.port, self.device, self.cpus = index, port, device, sorted(cpus)
        self.tail = deque(maxlen=40)
        saved = os.sched_getaffinity(0)
        INTERRUPT["defer"] = True
        os.sched_setaffinity(0, self.cpus)
        try:
            self.proc, self.startup_s = bench_http.start(exe, port, cache, device)
            started.append(self)
        finally:
            os.sched_setaffinity(0, saved)
            INTERRUPT["defer"] = False
            if INTERRUPT["pending"]:  # over a start's own failure too: the run is to end
                raise KeyboardInterrupt(f"signal {INTERRUPT['pending']}")
        self._drain = helper_thread(self._read)

    def _read(self):
        try:
            for line in self.proc.stderr:
                self.tail.append(line.rstrip())
        except (OSError, ValueError):
            pass

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def stop(self):
        stop_proc(self.proc)


def stop_proc(proc):
    """SIGTERM, a bounded wait, then SIGKILL: always returns."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    except OSError:
        pass


def pick_devices(hdrpostd, same_device):
    """[(uuid, name)] of the usable devices: the GPUs (replicas.devices), or with same_device every usable
    device, GPUs first (lavapipe is a CPU device)."""
    try:
        found = replicas.devices(hdrpostd, same_device)
    except SystemExit as e:  # replicas.devices exits with its message
        raise RuntimeError(str(e.code)) from None
    found.sort(key=lambda d: d[3].lower() == "cpu")
    return [(uuid, name) for _, uuid, _, _, name in found]


def cpu_shares(n):
    """This process's CPUs in n contiguous shares, as replicas.cpu_ranges splits a host's 0..cpus-1."""
    cpus = sorted(os.sched_getaffinity(0))
    return [cpus[k * len(cpus) // n:(k + 1) * len(cpus) // n] or cpus[:1] for k in range(n)]


def get_json(port, path):
    c = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
        return json.loads(body)
    finally:
        c.close()


# --- the load ----------------------------------------------------------------------------------------------------

class _AuthSocket:
    """A socket that writes the token into each request head: bench_http.raw_post, which sends none, unchanged."""

    def __init__(self, sock):
        self.sock = sock

    def sendall(self, data):
        if isinstance(data, bytes) and data.startswith(b"POST ") and data.endswith(b"\r\n\r\n"):
            data = data[:-2] + AUTH_LINE + b"\r\n"
        self.sock.sendall(data)

    def recv_into(self, *args):
        return self.sock.recv_into(*args)


def client_process(port, body, query, stop_at, queue):
    """One client: raw_post on a kept-alive connection until stop_at. A failed request (a 429, a 503 from a
    replica, a closed connection) is counted and the client connects again after a short pause, so one refusal
    does not end its share of the load."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends its clients itself
    lat, errors, n_errors = [], [], 0
    buf = bytearray(1 << 20)
    sock = None
    try:
        while time.monotonic() < stop_at:
            try:
                if sock is None:
                    sock = socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT_S)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                lat.append(bench_http.raw_post(_AuthSocket(sock), body, query, buf))
            except Exception as e:  # counted and shown, not hidden
                n_errors += 1
                if len(errors) < 5:
                    errors.append(str(e)[:200])
                if sock is not None:
                    sock.close()
                    sock = None
                time.sleep(0.2)
    finally:
        if sock is not None:
            sock.close()
        queue.put((lat, errors, n_errors))


class GpuSampler:
    """nvidia-smi's utilization.gpu of every GPU every SMI_PERIOD_S while running: the mean per GPU. Without
    nvidia-smi (or when it fails) .result() says why."""

    def __init__(self, smi):
        self.smi, self.samples, self.uuids, self.error = smi, {}, {}, None if smi else "no nvidia-smi"
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        if self.smi:
            self._thread = helper_thread(self._run)
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run([self.smi, "--query-gpu=index,uuid,utilization.gpu",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
                if out.returncode != 0:
                    self.error = f"nvidia-smi exit {out.returncode}: {out.stderr.strip()[:200]}"
                    return
                for line in out.stdout.splitlines():
                    f = [x.strip() for x in line.split(",")]
                    if len(f) >= 3 and f[2].replace(".", "", 1).isdigit():
                        self.samples.setdefault(int(f[0]), []).append(float(f[2]))
                        self.uuids[int(f[0])] = f[1]
            except (OSError, subprocess.TimeoutExpired, ValueError) as e:
                self.error = f"nvidia-smi: {e}"
                return
            self._stop.wait(SMI_PERIOD_S)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        return self.result()

    def result(self):
        if not self.samples:
            return {"error": self.error or "no samples"}
        return {"per_gpu": {str(i): {"uuid": self.uuids.get(i), "busy_pct": sum(v) / len(v), "samples": len(v)}
                            for i, v in sorted(self.samples.items())}}


def drive(ports, per_port, body, query, seconds, smi):
    """per_port client processes on each of ports for seconds: frames/s (frames over the wall time to the last
    client's end, as bench_http.throughput), client latency p50/p99, the host's busy share, the GPUs'."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    stop_at = time.monotonic() + seconds
    procs = [ctx.Process(target=client_process, args=(port, body, query, stop_at, queue), daemon=True)
             for port in ports for _ in range(per_port)]
    h0, t0 = bench_http.host_cpu(), time.monotonic()
    finished, gpus = False, None
    try:
        for p in procs:  # forked before this window's sampler thread starts
            p.start()
        gpus = GpuSampler(smi).start()
        lat, errors, n_errors, missing = [], [], 0, 0
        deadline = stop_at + DRAIN_S
        for _ in procs:
            got = None
            while got is None and time.monotonic() < deadline:
                try:  # a second at a time: a signal is acted on within one
                    got = queue.get(timeout=1.0)
                except Exception:  # queue.Empty
                    if not any(p.is_alive() for p in procs):
                        break  # every client has ended: what they sent is in already
            if got is None:  # a client that gave no result (died, or hung past the bound)
                missing += 1
                continue
            p_lat, p_err, p_n = got
            lat += p_lat
            n_errors += p_n
            errors += p_err[:max(0, 5 - len(errors))]
        wall = time.monotonic() - t0
        h1 = bench_http.host_cpu()
        gpu = gpus.stop()
        finished = True
    finally:  # clients that gave their result end at once; the rest (an interruption, a hung one) are killed
        if gpus:
            gpus.stop()
        started = [p for p in procs if p.pid is not None]
        end = time.monotonic() + (10 if finished else 0)
        for p in started:
            p.join(timeout=max(0.01, end - time.monotonic()))
        for p in started:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    if missing:
        errors.append(f"{missing} client process(es) gave no result")
    return {"frames": len(lat), "wall_s": wall, "fps": len(lat) / wall if wall > 0 else 0,
            "p50_ms": bench_http.pct(lat, 50) if lat else None, "p99_ms": bench_http.pct(lat, 99) if lat else None,
            "clients": len(procs), "errors": n_errors + missing, "error_samples": errors,
            "host_busy_pct": 100 * (h1[0] - h0[0]) / max(h1[1] - h0[1], 1), "gpu": gpu}


# --- HAProxy -----------------------------------------------------------------------------------------------------

def haproxy_stat(sock_path):
    """{server: (status, total sessions, max queued)} of the backend from HAProxy's stats socket; {} if none."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(sock_path)
            s.sendall(b"show stat\n")
            chunks = []
            while True:
                d = s.recv(65536)
                if not d:
                    break
                chunks.append(d)
    except OSError:
        return {}
    out = {}
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == "replicas" and f[1].startswith("gpu"):
            out[f[1]] = (f[17].split(" ")[0], int(f[7] or 0), int(f[3] or 0))
    return out


class HAProxy:
    def __init__(self, exe, tmp, reps, maxconn):
        self.port = bench_http.free_port()
        self.sock = os.path.join(tmp, f"haproxy-{len(reps)}.sock")
        cfg = os.path.join(tmp, f"haproxy-{len(reps)}.cfg")
        with open(cfg, "w") as f:
            servers = [(r.port, r.device, f"replica {r.index}") for r in reps]
            f.write(replicas.haproxy_cfg(f"{HOST}:{self.port}", servers, maxconn, log="stdout format raw",
                                         stats_socket=self.sock, drop_root=False))
        self.log_path = os.path.join(tmp, f"haproxy-{len(reps)}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([exe, "-f", cfg, "-db"], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        try:
            self._wait_up({f"gpu{k}" for k in range(len(reps))})
        except BaseException:
            self.stop()
            raise

    def _wait_up(self, want):
        deadline = time.monotonic() + HAPROXY_UP_S
        got = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited {self.proc.returncode}: {self.log_tail()}")
            got = haproxy_stat(self.sock)
            if {k for k, v in got.items() if v[0] == "UP"} == want:
                return
            time.sleep(0.2)
        raise RuntimeError(f"haproxy's servers not all UP after {HAPROXY_UP_S} s: "
                           f"{ {k: v[0] for k, v in got.items()} }; {self.log_tail()}")

    def log_tail(self):
        try:
            self.log.flush()
            with open(self.log_path, errors="replace") as f:
                return f.read()[-1500:]
        except OSError:
            return ""

    def stop(self):
        stop_proc(self.proc)
        self.log.close()


def find_haproxy(given):
    if given:
        return (given, None) if os.access(given, os.X_OK) else (None, f"--haproxy {given}: not an executable")
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy")
                                             if os.access(p, os.X_OK)), None)
    return (found, None) if found else (None, "haproxy not found (PATH, /usr/sbin; --haproxy PATH)")


# --- hdrpost -----------------------------------------------------------------------------------------------------

LINE = re.compile(r"^hdrpost: (\S+) rendered(?: by (\S+))? \((\d+(?:\.\d+)?) ms\)$")


def hdrpost_path(exe, shot, out, reps, jobs, fmt, timeout, smi):
    """hdrpost render over the shot with every replica in --server: frames/s, p50 of its per-frame ms, which
    server rendered how many."""
    cmd = [exe, "render", shot, "-o", out, "--server", ",".join(r.url for r in reps), "--jobs", str(jobs),
           "--exposure", "frame", "--json", *HDRPOST_FORMAT[fmt]]
    env = dict(os.environ, HDRPOST_TOKEN=TOKEN)
    h0, t0 = bench_http.host_cpu(), time.monotonic()
    gpus = GpuSampler(smi).start()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        wall, h1 = time.monotonic() - t0, bench_http.host_cpu()
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"hdrpost render did not end within {timeout} s (killed)") from None
    finally:
        gpu = gpus.stop()
    try:
        summary = json.loads(run.stdout)
    except ValueError:
        raise RuntimeError(f"hdrpost render exit {run.returncode}, no --json summary: {run.stderr[-1500:]}") from None
    ms = [float(m.group(3)) for m in map(LINE.match, run.stderr.splitlines()) if m]
    rendered = int(summary.get("rendered", 0))
    seconds = float(summary.get("seconds") or 0)
    by_server = {s.get("url"): s.get("rendered", 0) for s in summary.get("servers", [])}
    if not by_server and len(reps) == 1:
        by_server = {reps[0].url: rendered}
    return {"exit": run.returncode, "rendered": rendered, "failed": summary.get("failed"),
            "frames": summary.get("frames"), "seconds": seconds, "wall_s": wall,
            "fps": rendered / seconds if seconds > 0 else 0, "fps_wall": rendered / wall if wall > 0 else 0,
            "p50_ms": bench_http.pct(ms, 50) if ms else None, "p99_ms": bench_http.pct(ms, 99) if ms else None,
            "frames_logged": len(ms), "by_server": by_server, "retries": summary.get("retries"),
            "jobs": jobs, "host_busy_pct": 100 * (h1[0] - h0[0]) / max(h1[1] - h0[1], 1), "gpu": gpu,
            "stderr_tail": run.stderr[-600:] if run.returncode else ""}


def make_shot(frame_path, tmp, count):
    shot = os.path.join(tmp, "shot")
    os.makedirs(shot)
    for k in range(count):
        dst = os.path.join(shot, f"shot.{1001 + k}.exr")
        try:
            os.link(frame_path, dst)
        except OSError:
            shutil.copyfile(frame_path, dst)
    return shot


# --- one N ---------------------------------------------------------------------------------------------------------

def measure(row, a, n, devs, frame, query, shot, tmp, haproxy, haproxy_why, maxconn, smi):
    """Fills row (already in the result: an interrupted N keeps what it measured)."""
    row.update({"replicas": n, "clients": n * a.clients_per_replica})
    if not a.same_device and len(devs) < n:
        row["error"] = f"{n} replicas need {n} GPUs; --list-devices has {len(devs)} (--same-device for a smoke test)"
        return
    shares = cpu_shares(n)
    reps, hp = [], None
    try:
        for k in range(n):
            uuid, name = devs[0 if a.same_device else k]
            cache = os.path.join(tmp, f"cache-{k}", "pipeline.cache")  # replica k's, kept from one N to the next
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            try:
                Replica(a.hdrpostd, k, bench_http.free_port(), cache, uuid, shares[k], reps)
            except RuntimeError as e:
                raise RuntimeError(f"replica {k} did not start: {e}") from None
            log(f"N={n}: replica {k} on {uuid} ({name}), CPUs {_ranges(shares[k])}, "
                f"ready in {reps[-1].startup_s:.2f} s")
        row["replica"] = [{"url": r.url, "device": r.device, "cpus": _ranges(r.cpus), "startup_s": r.startup_s}
                          for r in reps]
        try:
            gpu = get_json(reps[0].port, "/v1/gpu")
            row["gpu_info"] = {k: gpu.get(k) for k in ("device", "driver", "driver_info", "uuid")}
        except (OSError, RuntimeError, ValueError) as e:
            row["gpu_info"] = {"error": str(e)}
        ports = [r.port for r in reps]

        def path(name, fn):
            try:
                row[name] = fn()
                r = row[name]
                bad = r["errors"] if "errors" in r else len(r.get("failed") or [])
                log(f"N={n}: {name}: {r['fps']:.2f} frames/s, p50 {_ms(r.get('p50_ms'))} ms, {bad} failed")
            except Exception as e:  # this path is left out with its reason; the others still run
                row[name] = {"error": f"{type(e).__name__}: {e}"}
                log(f"N={n}: {name} failed: {row[name]['error']}")

        def direct():
            if a.warmup > 0:
                drive(ports, a.clients_per_replica, frame, query, a.warmup, None)
            return drive(ports, a.clients_per_replica, frame, query, a.seconds, smi)

        path("direct", direct)

        def through_haproxy():
            nonlocal hp
            if not haproxy:
                raise RuntimeError(haproxy_why)
            hp = HAProxy(haproxy, tmp, reps, maxconn)
            if a.warmup > 0:
                drive([hp.port], n * a.clients_per_replica, frame, query, a.warmup, None)
            s0 = haproxy_stat(hp.sock)
            r = drive([hp.port], n * a.clients_per_replica, frame, query, a.seconds, smi)
            s1 = haproxy_stat(hp.sock)
            r["sessions_by_server"] = {k: s1[k][1] - s0.get(k, ("", 0, 0))[1] for k in sorted(s1)}
            r["max_queued_by_server"] = {k: s1[k][2] for k in sorted(s1)}
            r["maxconn_per_server"] = maxconn
            return r

        path("haproxy", through_haproxy)
        if hp:
            hp.stop()
            hp = None

        def through_hdrpost():
            out = os.path.join(tmp, f"out-{n}")
            try:
                return hdrpost_path(a.hdrpost, shot, out, reps, n * a.clients_per_replica, a.format,
                                    a.hdrpost_timeout, smi)
            finally:
                shutil.rmtree(out, ignore_errors=True)

        path("hdrpost", through_hdrpost)
        for r in reps:
            if r.proc.poll() is not None:
                row.setdefault("replica_exits", []).append(
                    f"replica {r.index} exited {r.proc.returncode}: " + " | ".join(list(r.tail)[-5:]))
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"
        log(f"N={n}: {row['error']}")
    finally:
        if hp:
            hp.stop()
        for r in reps:
            r.stop()


def _ranges(cpus):
    """[0,1,2,5] -> '0-2,5'."""
    out, start, prev = [], None, None
    for c in sorted(cpus) + [None]:
        if start is not None and c != prev + 1:
            out.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = None
        if start is None and c is not None:
            start = c
        prev = c
    return ",".join(out)


def _cell(text):
    """One line of text that a markdown table cell takes."""
    return " ".join(str(text).split()).replace("|", "/")


def _ms(v):
    return "-" if v is None else f"{v:.0f}"


# --- the report -------------------------------------------------------------------------------------------------

def commit():
    """HP_COMMIT first: the GPU host's copy of the tree may carry a stale .git."""
    if os.environ.get("HP_COMMIT"):
        return os.environ["HP_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.environ.get("HP_COMMIT", "unknown (no git; set HP_COMMIT)")


def table(result):
    rows = result["runs"]
    base_n = min((r["replicas"] for r in rows), default=1)
    base = next((r for r in rows if r["replicas"] == base_n), {})

    def ok(r, p):
        return isinstance(r.get(p), dict) and "fps" in r[p]

    def scale(r, p):
        if not ok(r, p) or not ok(base, p) or not base[p]["fps"]:
            return "-"
        return f"{r[p]['fps'] / base[p]['fps']:.2f}x"

    def fps(r, p):
        return f"{r[p]['fps']:.2f}" if ok(r, p) else "-"

    def gpu(r):
        p = "haproxy" if ok(r, "haproxy") else "direct"
        g = r.get(p, {}).get("gpu") if ok(r, p) else None
        if not g:
            return "-"
        if "per_gpu" not in g:
            return "n/a"
        return (" ".join(f"{i}:{v['busy_pct']:.0f}%" for i, v in g["per_gpu"].items())
                + ("" if p == "haproxy" else " (direct)"))

    lines = [f"# scale_out: {result['date']}, commit {result['commit']}, {result['cores']} cores",
             "",
             f"device (replica 0's /v1/gpu): {result.get('device_line', '-')}",
             f"frame: {result['frame']}, {result['frame_bytes'] / 1e6:.1f} MB; output {result['format']}; "
             f"{result['clients_per_replica']} clients per replica, {result['seconds']:.0f} s windows "
             f"(warm-up {result['warmup']:.0f} s); hdrpost: a shot of {result['shot_frames']} frames, "
             "--jobs = the clients" + ("; --same-device: every replica on one device" if result["same_device"] else ""),
             "",
             "| N | direct frames/s | HAProxy frames/s | HAProxy p50 / p99 ms | hdrpost frames/s (wall) | hdrpost p50 ms "
             "| host busy (direct / HAProxy / hdrpost) | GPU busy (HAProxy) | scaling vs N=%d (direct / HAProxy / hdrpost) |"
             % base_n,
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r and not any(ok(r, p) for p in ("direct", "haproxy", "hdrpost")):
            lines.append(f"| {r['replicas']} | {_cell(r['error'])} | | | | | | | |")
            continue
        busy = " / ".join(f"{r[p]['host_busy_pct']:.0f}%" if ok(r, p) else "-"
                          for p in ("direct", "haproxy", "hdrpost"))
        hp = f"{_ms(r['haproxy']['p50_ms'])} / {_ms(r['haproxy']['p99_ms'])}" if ok(r, "haproxy") else "-"
        hd = f"{r['hdrpost']['fps']:.2f} ({r['hdrpost']['fps_wall']:.2f})" if ok(r, "hdrpost") else "-"
        hd50 = _ms(r["hdrpost"]["p50_ms"]) if ok(r, "hdrpost") else "-"
        lines.append(f"| {r['replicas']} | {fps(r, 'direct')} | {fps(r, 'haproxy')} | {hp} | {hd} | {hd50} | {busy} "
                     f"| {gpu(r)} | {scale(r, 'direct')} / {scale(r, 'haproxy')} / {scale(r, 'hdrpost')} |")
    notes = []
    for r in rows:
        n = r["replicas"]
        for p, what in (("direct", "direct"), ("haproxy", "HAProxy"), ("hdrpost", "hdrpost")):
            v = r.get(p)
            if isinstance(v, dict) and "error" in v:
                notes.append(f"N={n}, {what}: left out: {v['error']}")
            elif ok(r, p) and v.get("errors"):
                notes.append(f"N={n}, {what}: {v['errors']} failed requests or lost clients, e.g. "
                             f"{v.get('error_samples', [])[:2]}")
        if ok(r, "haproxy"):
            notes.append(f"N={n}, HAProxy: requests by server {r['haproxy']['sessions_by_server']}, most queued in "
                         f"HAProxy {r['haproxy']['max_queued_by_server']} (maxconn {r['haproxy']['maxconn_per_server']})")
        if ok(r, "hdrpost"):
            h = r["hdrpost"]
            notes.append(f"N={n}, hdrpost: exit {h['exit']}, {h['rendered']} of {h['frames']} rendered in "
                         f"{h['seconds']:.2f} s (its summary; wall {h['wall_s']:.2f} s with start-up and probe), "
                         f"by server {h['by_server']}, p99 {_ms(h['p99_ms'])} ms"
                         + (f"; {h['stderr_tail']!r}" if h.get("stderr_tail") else ""))
        g = next((r[p]["gpu"].get("per_gpu") for p in ("haproxy", "direct", "hdrpost") if ok(r, p)), None)
        if g and r.get("replica"):
            at = {v["uuid"].lower(): i for i, v in g.items() if v.get("uuid")}
            notes.append(f"N={n}: the replicas on nvidia-smi's GPUs " +
                         ", ".join(at.get(x["device"].lower(), "?") for x in r["replica"]))
        for e in r.get("replica_exits", []):
            notes.append(f"N={n}: {e}")
        if "error" in r and any(ok(r, p) for p in ("direct", "haproxy", "hdrpost")):
            notes.append(f"N={n}: {r['error']}")
    gpu_why = next((r[p]["gpu"]["error"] for r in rows for p in ("haproxy", "direct")
                    if ok(r, p) and r[p].get("gpu", {}).get("error")), None)
    if gpu_why:
        notes.append(f"GPU busy n/a: {gpu_why}")
    lines.append("")
    lines += [f"- {_cell(x)}" for x in notes]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hdrpostd")
    ap.add_argument("hdrpost")
    ap.add_argument("make_frame")
    ap.add_argument("source")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--clients-per-replica", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=1,
                    help="seconds of the same load before the direct and the HAProxy windows, not measured")
    ap.add_argument("--shot-frames", type=int, default=400)
    ap.add_argument("--format", default="png_gpu", choices=sorted(HDRPOST_FORMAT))
    ap.add_argument("--factor", default="4", help="make_frame's: the source this many times larger")
    ap.add_argument("--frame-arg", action="append", default=[],
                    help="one more argument to make_frame (--mirror, --float, ...), repeatable")
    ap.add_argument("--compression", default="zip", help="make_frame's compression")
    ap.add_argument("--daemon-arg", action="append", default=[], help="a setting for every replica, repeatable")
    ap.add_argument("--haproxy", help="HAProxy's executable (default: PATH, then /usr/sbin/haproxy)")
    ap.add_argument("--same-device", action="store_true",
                    help="every replica on the first device (lavapipe too): a smoke test on a machine of one")
    ap.add_argument("--hdrpost-timeout", type=float, default=900, help="seconds hdrpost's shot may take (then killed)")
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    counts = [int(x) for x in a.replicas.split(",") if x.strip()]
    if not counts or min(counts) < 1 or a.clients_per_replica < 1 or a.shot_frames < 1:
        ap.error("--replicas, --clients-per-replica and --shot-frames must be positive")
    for exe in (a.hdrpostd, a.hdrpost, a.make_frame):
        if not os.access(exe, os.X_OK):
            ap.error(f"{exe}: not an executable")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    os.environ["HDRPOST_AUTH_TOKEN"] = TOKEN  # the replicas' token (bench_http.start passes the environment on)
    bench_http.DAEMON_ARGS[:] = ["--trusted_proxies=127.0.0.1", *a.daemon_arg]
    depth = QUEUE_DEPTH
    for arg in a.daemon_arg:  # a --queue_depth of --daemon-arg comes after bench_http's and wins
        m = re.match(r"--queue_depth=(\d+)$", arg)
        depth = int(m.group(1)) if m else depth
    maxconn = depth + replicas.IN_FLIGHT
    haproxy, haproxy_why = find_haproxy(a.haproxy)
    if not haproxy:
        log(f"the HAProxy path is left out: {haproxy_why}")
    smi = shutil.which("nvidia-smi")
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "commit": commit(), "cores": len(os.sched_getaffinity(0)),
              "format": a.format, "clients_per_replica": a.clients_per_replica, "seconds": a.seconds,
              "warmup": a.warmup, "shot_frames": a.shot_frames, "same_device": a.same_device,
              "haproxy": haproxy or None, "haproxy_missing": haproxy_why, "nvidia_smi": smi, "runs": []}
    query = bench_http.FORMATS[a.format]
    with tempfile.TemporaryDirectory(prefix="hdrpost-scale-") as tmp:
        try:
            frame_path = os.path.join(tmp, "frame.exr")
            made = subprocess.run([a.make_frame, a.source, frame_path, a.factor, a.compression, *a.frame_arg],
                                  capture_output=True, text=True, timeout=600)
            if made.returncode != 0:
                sys.exit(f"scale_out: make_frame failed (exit {made.returncode}): {made.stderr.strip()}")
            with open(frame_path, "rb") as f:
                frame = f.read()
            desc = made.stdout.strip().replace(f"make_frame: {frame_path}, ", "")
            result["frame"] = f"{desc} (from {os.path.basename(a.source)}, factor {a.factor}" + \
                              (", " + " ".join(a.frame_arg) if a.frame_arg else "") + ")"
            result["frame_bytes"] = len(frame)
            shot = make_shot(frame_path, tmp, a.shot_frames)
            devs = pick_devices(a.hdrpostd, a.same_device)
            if not devs:
                sys.exit("scale_out: no usable GPU in hdrpostd --list-devices (--same-device takes any device)")
            result["devices"] = [{"uuid": u, "name": nm} for u, nm in devs]
            log(f"devices: {', '.join(f'{u} ({nm})' for u, nm in devs)}; frame {result['frame']}, {len(frame)} bytes")
            for n in counts:
                row = {"replicas": n}
                result["runs"].append(row)
                measure(row, a, n, devs, frame, query, shot, tmp, haproxy, haproxy_why, maxconn, smi)
                info = row.get("gpu_info", {})
                if "device_line" not in result and info and "error" not in info:
                    result["device_line"] = (f"{info.get('device')}, driver {info.get('driver')} "
                                             f"{info.get('driver_info') or ''}, uuid {info.get('uuid')}")
        except KeyboardInterrupt as e:
            result["interrupted"] = str(e) or "interrupted"
            log(f"interrupted ({result['interrupted']}): everything started was stopped")
        finally:
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(result, f, indent=1)
    if "frame" in result:
        print(table(result))
    if result.get("interrupted"):
        at = result["runs"][-1]["replicas"] if result["runs"] else counts[0]
        print(f"\n- interrupted ({result['interrupted']}) during N={at}: what it had measured is above, "
              "the rest not measured")
    measured = any(isinstance(r.get(p), dict) and "fps" in r[p]
                   for r in result["runs"] for p in ("direct", "haproxy", "hdrpost"))
    return 0 if measured and not result.get("interrupted") else 1


if __name__ == "__main__":
    sys.exit(main())
