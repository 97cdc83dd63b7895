#!/usr/bin/env python3
"""hdrpostd end to end: start-up, health endpoints, error bodies, request ids, signals, the pipeline cache
and configuration errors, spoken over HTTP on 127.0.0.1.

Usage: test_daemon.py PATH/TO/hdrpostd. Prints TAP, one test point per behaviour. The daemon runs with
--validation; any validation-layer message on its stderr (or exit code 3) fails the run's test point.
HDRPOST_TEST_DEVICE, when set, is passed as --device. Standard library only.
"""

import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
HOST = "127.0.0.1"
# The plain build's deadlines: every wait stretches them by HDRPOST_TEST_TIME_FACTOR (harness.scaled; the
# harness's wait_line and wait_exit do it themselves, so they are given these as they are).
START_TIMEOUT_S = 30   # until the port answers
READY_TIMEOUT_S = 60   # until /readyz says 200
STOP_TIMEOUT_S = 60    # from the signal to the exit
CONFIG_EXIT_TIMEOUT_S = 15

from harness import Child, clean_env, device_args, free_port, json_body, point, scaled, validation_lines  # noqa: E402
import harness  # noqa: E402


def gpu_delay(ms):
    """--test_gpu_delay_ms for the points whose order of events is made by a sleep of the test against the GPU
    thread's sleep per frame (frames queued behind a lost one, a loss after the drain): both are stretched by
    HDRPOST_TEST_TIME_FACTOR, so that the order holds when a sanitizer build is slower to take a request. The
    delay is the test's pacing, not something under test; at factor 1 it is the value given."""
    return f"--test_gpu_delay_ms={int(ms * harness.TIME_FACTOR)}"


class Daemon(Child):
    """A child hdrpostd started with exactly these arguments."""

    def __init__(self, label, args, env=None):
        super().__init__(label, [EXE] + args, env)


def request(port, method, path, headers=None, timeout=5):
    return harness.request(port, method, path, None, headers, timeout)


def is_error_body(doc, code):
    """The one error shape: {"error": {"code": code, "message": non-empty, "field": null or string}}."""
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return False
    err = doc["error"]
    return (err.get("code") == code and isinstance(err.get("message"), str) and err["message"] != ""
            and "field" in err and (err["field"] is None or isinstance(err["field"], str)))


class NotifySocket:
    """A systemd notify socket in the abstract namespace (the '@' form), collecting datagrams."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.name = f"@hdrpostd-test-{os.getpid()}-{time.monotonic_ns()}"
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.2)
        self.messages = []

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + scaled(timeout)
        while text not in self.messages and time.monotonic() < deadline:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            self.messages.extend(data.decode("utf-8", "replace").split("\n"))
        return text in self.messages

    def close(self):
        self.sock.close()


def wait_until_ready(daemon, port):
    """Polls /livez and /readyz together from the moment the port opens until /readyz says 200.
    Returns (samples, first_answer_s) where samples is [(livez_status, readyz_status, readyz_headers,
    readyz_body)], or (samples, None) when the port never answered."""
    samples = []
    deadline = time.monotonic() + scaled(START_TIMEOUT_S)
    while True:  # until the port accepts
        try:
            with socket.create_connection((HOST, port), timeout=scaled(1)):
                break
        except OSError:
            if daemon.proc.poll() is not None or time.monotonic() > deadline:
                return samples, None
            time.sleep(0.005)
    deadline = time.monotonic() + scaled(READY_TIMEOUT_S)
    while time.monotonic() < deadline and daemon.proc.poll() is None:
        try:
            live = request(port, "GET", "/livez")[0]
            status, headers, body = request(port, "GET", "/readyz")
        except OSError:
            time.sleep(0.02)
            continue
        samples.append((live, status, headers, body))
        if status == 200:
            break
        time.sleep(0.02)
    return samples, True


# --- The tests -------------------------------------------------------------------------------------------


def config_errors(tmp):
    """Bad configuration exits 2 before anything starts, with a message naming the setting."""
    conf = os.path.join(tmp, "bad.conf")
    with open(conf, "w") as f:
        f.write("# a comment\nlisten = 127.0.0.1:1\nnot_a_setting = 3\n")
    cases = [
        ("bad --listen exits 2 naming listen and the value", ["--listen=nonsense"], {}, [r"listen", r"nonsense"]),
        ("unknown flag exits 2 naming the flag", ["--bogus-flag=1"], {}, [r"bogus-flag"]),
        ("out-of-range int exits 2 naming the setting and the range", ["--http_threads", "0"], {},
         [r"http_threads", r"1 to 256"]),
        ("bad enum exits 2 listing the allowed values", ["--log_level=loud"], {},
         [r"log_level", r"error, warn, info, debug"]),
        ("bad --gpu_clock_hold exits 2 naming it, the value and auto, on, off", ["--gpu_clock_hold=maybe"], {},
         [r"gpu_clock_hold", r"maybe", r"auto, on, off"]),
        ("a negative --exr_zip_wide_chunks exits 2 naming it and the range", ["--exr_zip_wide_chunks=-5"], {},
         [r"exr_zip_wide_chunks", r"0 to 1048576"]),
        ("--exr_zip_gpu_batches=0 exits 2 naming it and the range", ["--exr_zip_gpu_batches=0"], {},
         [r"exr_zip_gpu_batches", r"1 to 8"]),
        ("--exr_zip_gpu_batches=9 exits 2 naming it and the range", ["--exr_zip_gpu_batches=9"], {},
         [r"exr_zip_gpu_batches", r"1 to 8"]),
        ("--exr_zip_gpu_share=1.5 exits 2 naming it and the range (1: every busy frame)",
         ["--exr_zip_gpu_share=1.5"], {}, [r"exr_zip_gpu_share", r"-1 to 1"]),
        ("bad environment value exits 2 naming the variable", [], {"HDRPOST_SHUTDOWN_TIMEOUT_S": "soon"},
         [r"HDRPOST_SHUTDOWN_TIMEOUT_S", r"shutdown_timeout_s"]),
        ("bad --warm_frame exits 2 naming the setting and what is allowed", ["--warm_frame=4096"], {},
         [r"warm_frame", r"4096", r"WIDTHxHEIGHT"]),
        ("--warm_frame past 16384 a side exits 2", ["--warm_frame=16385x8"], {}, [r"warm_frame", r"16385x8"]),
        ("unknown key in the config file exits 2 naming file and line", ["--config", conf], {},
         [re.escape(conf), r"line 3", r"not_a_setting"]),
    ]
    for name, args, env, patterns in cases:
        d = Daemon(name, args, env)
        try:
            rc = d.wait_exit(CONFIG_EXIT_TIMEOUT_S)
            log = d.log()
            ok = rc == 2 and all(re.search(p, log) for p in patterns)
            point(name, ok, f"exit code {rc}\n{log}")
        finally:
            d.kill()

    d = Daemon("help", ["--help"])
    try:
        rc = d.wait_exit(CONFIG_EXIT_TIMEOUT_S)
        out = "\n".join(d.stdout)
        names = ["listen", "device", "pipeline_cache", "validation", "log_level", "reduce_variant",
                 "http_threads", "shutdown_timeout_s"]
        missing = [n for n in names if f"--{n}" not in out or f"HDRPOST_{n.upper()}" not in out]
        point("--help exits 0 and lists every setting with its env var", rc == 0 and not missing,
              f"exit code {rc}, missing {missing}\n{out}")
    finally:
        d.kill()


def address_in_use(tmp=None):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        d = Daemon("address in use", [f"--listen={HOST}:{port}", "--pipeline_cache="] + device_args())
        try:
            rc = d.wait_exit(CONFIG_EXIT_TIMEOUT_S)
            log = d.log()
            point("a listen address in use exits 1 saying so", rc == 1 and re.search(r"in use", log, re.I)
                  and re.search(rf"{port}", log), f"exit code {rc}\n{log}")
        finally:
            d.kill()


def drain(d, port):
    """SIGTERM while a POST's body is half sent: the daemon must wait for it and answer it (the drain),
    and meanwhile answer /readyz 503 on a connection kept alive from before. Returns (request answered and
    exit 0 after it, readyz draining ok, detail)."""
    detail = []
    idle = socket.create_connection((HOST, port), timeout=scaled(10))
    slow = socket.create_connection((HOST, port), timeout=scaled(10))
    try:
        idle.sendall(b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n")
        detail.append(f"kept-alive warm-up: {harness.read_response(idle)[0]}")
        slow.sendall(b"POST /readyz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n12345")
        time.sleep(scaled(0.3))  # the daemon has the headers and half the body: the request is in flight
        d.proc.send_signal(signal.SIGTERM)
        seen = d.wait_line(r"received SIGTERM", 10) is not None
        idle.sendall(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        status, headers, body = harness.read_response(idle)
        doc = json_body(body)
        readyz_ok = (seen and status == 503 and is_error_body(doc, "not_ready")
                     and doc["error"]["message"].startswith("draining")
                     and headers.get("connection", "").lower() == "close")
        detail.append(f"readyz while draining: {status} {headers} {body!r}")
        time.sleep(scaled(0.5))  # longer only makes "still running" stricter
        waited = d.proc.poll() is None
        detail.append(f"still running while the body is pending: {waited}")
        slow.sendall(b"67890")
        status, headers, body = harness.read_response(slow)
        detail.append(f"in-flight POST: {status} {headers} {body!r}")
        rc = d.wait_exit(STOP_TIMEOUT_S)
        detail.append(f"exit code {rc}")
        answered = waited and status == 405 and is_error_body(json_body(body), "method_not_allowed") and rc == 0
        return answered, readyz_ok, "\n".join(detail) + "\n" + d.log()
    except OSError as e:
        detail.append(f"socket error: {e}")
        return False, False, "\n".join(detail) + "\n" + d.log()
    finally:
        idle.close()
        slow.close()


def first_start(tmp, cache):
    port = free_port()
    notify = NotifySocket()
    d = Daemon("first start", [f"--listen={HOST}:{port}", "--validation", f"--pipeline_cache={cache}",
                               "--log_level=info"] + device_args(), {"NOTIFY_SOCKET": notify.name})
    try:
        samples, answered = wait_until_ready(d, port)
        if not point("the port answers while starting", answered is not None, d.log()):
            return False
        warming = [s for s in samples if s[1] != 200]
        # Warming takes hundreds of milliseconds with the validation layer on, and the port is open
        # before it starts: a run that never saw it warming has lost the ordering, which is a failure.
        point("/livez answers 200 while the pipelines warm", bool(warming) and all(s[0] == 200 for s in warming),
              f"samples {[(s[0], s[1]) for s in samples]}")
        point("/readyz is 503 with a not_ready JSON error while warming",
              all(s[1] == 503 and is_error_body(json_body(s[3]), "not_ready")
                  and json_body(s[3])["error"]["message"].startswith("starting")
                  and s[2].get("content-type") == "application/json" for s in warming),
              "\n".join(f"{s[1]} {s[3]!r}" for s in warming[:5]))
        ready = bool(samples) and samples[-1][1] == 200 and json_body(samples[-1][3]) == {"status": "ready"}
        if not point('/readyz turns 200 {"status":"ready"} once warm', ready,
                     f"last samples {[(s[1], s[3]) for s in samples[-3:]]}\n{d.log()}"):
            return False
        line = d.wait_line(r"ready in \d+ ms: device", 5)  # not the warm-up's "frames ready in"
        point("the log says 'ready in N ms' with the device and cache state 'absent'",
              line is not None and "absent" in line and "device" in line, line or d.log())
        point("systemd gets READY=1 on an abstract NOTIFY_SOCKET", notify.wait_for("READY=1", 5),
              f"received {notify.messages}")

        status, headers, body = request(port, "GET", "/livez")
        point('GET /livez is 200 {"status":"alive"} with Content-Type application/json',
              status == 200 and json_body(body) == {"status": "alive"}
              and headers.get("content-type") == "application/json", f"{status} {headers} {body!r}")

        status, headers, body = request(port, "HEAD", "/readyz")
        point("HEAD /readyz answers like GET without a body",
              status == 200 and body == b"" and headers.get("content-type") == "application/json",
              f"{status} {headers} {body!r}")

        status, headers, body = request(port, "GET", "/no/such/endpoint?x=1")
        point("an unknown path is 404 with a not_found JSON error",
              status == 404 and is_error_body(json_body(body), "not_found")
              and headers.get("content-type") == "application/json", f"{status} {headers} {body!r}")

        status, headers, body = request(port, "POST", "/readyz")
        allow = [m.strip() for m in headers.get("allow", "").split(",")]
        point("a known path with the wrong method is 405 with Allow and a method_not_allowed JSON error",
              status == 405 and "GET" in allow and "HEAD" in allow
              and is_error_body(json_body(body), "method_not_allowed"), f"{status} {headers} {body!r}")

        status, headers, _ = request(port, "GET", "/livez", {"X-Request-Id": "render-farm.job-42/frame:7"})
        point("a client's X-Request-Id is echoed",
              headers.get("x-request-id") == "render-farm.job-42/frame:7", f"{status} {headers}")

        ids = [request(port, "GET", "/livez")[1].get("x-request-id") for _ in range(2)]
        ids.append(request(port, "GET", "/livez", {"X-Request-Id": "has spaces; and <junk>"})[1].get("x-request-id"))
        ids.append(request(port, "GET", "/livez", {"X-Request-Id": "x" * 500})[1].get("x-request-id"))
        point("without a sane X-Request-Id one is generated, different each time",
              all(i and re.fullmatch(r"[0-9a-f]{16}", i) for i in ids) and len(set(ids)) == len(ids), f"{ids}")

        line = d.wait_line(r"render-farm\.job-42/frame:7 GET /livez \d+ bytes 200 [\d.]+ ms", 5)
        point("each request is logged with its id, method, path, status and time", line is not None, d.log())

        drain_ok, readyz_draining, detail = drain(d, port)
        point("while draining, /readyz on a kept-alive connection is 503 not_ready 'draining' and closes it",
              readyz_draining, detail)
        point("a request in flight at SIGTERM is answered before the daemon exits", drain_ok, detail)

        rc = d.stop(signal.SIGTERM)
        point("SIGTERM exits 0 within a bounded time", rc == 0, f"exit code {rc}\n{d.log()}")
        point("systemd gets STOPPING=1", notify.wait_for("STOPPING=1", 2), f"received {notify.messages}")
        point("the pipeline cache is saved at exit, its directory created",
              os.path.isfile(cache) and os.path.getsize(cache) > 0, d.log())
        bad = validation_lines(d)
        point("first start: no validation-layer message and exit code not 3", rc != 3 and not bad, "\n".join(bad))
        return rc == 0
    finally:
        d.kill()
        notify.close()
        d.dump()


def second_start(tmp, cache):
    """Reads the cache; also checks precedence flag > environment > config file > default."""
    port = free_port()
    conf = os.path.join(tmp, "hdrpostd.conf")
    with open(conf, "w") as f:
        f.write("# precedence check\n"
                "listen = 127.0.0.1:1\n"
                "http_threads = 3\n"
                "log-level = info\n"
                f'pipeline_cache = "{cache}"\n')
    env = {"HDRPOST_CONFIG": conf, "HDRPOST_LISTEN": "127.0.0.1:2", "HDRPOST_HTTP_THREADS": "5"}
    d = Daemon("second start", [f"--listen={HOST}:{port}", "--validation"] + device_args(), env)
    try:
        samples, answered = wait_until_ready(d, port)
        ready = answered is not None and bool(samples) and samples[-1][1] == 200
        log = d.log()
        point("flags beat the environment, which beats the config file, which beats defaults",
              f'config: listen = "{HOST}:{port}" (flag)' in log
              and "config: http_threads = 5 (environment)" in log
              and "config: log_level = info (config file)" in log
              and "config: reduce_variant = single_pass (default)" in log, log)
        if not point("a second start becomes ready", ready, log):
            return
        line = d.wait_line(r"ready in \d+ ms: device", 5)  # not the warm-up's "frames ready in"
        point("a second start reads the saved cache (cache state 'loaded')",
              line is not None and "loaded" in line, line or d.log())
        rc = d.stop(signal.SIGINT)
        point("SIGINT exits 0 too", rc == 0, f"exit code {rc}\n{d.log()}")
        bad = validation_lines(d)
        point("second start: no validation-layer message and exit code not 3", rc != 3 and not bad, "\n".join(bad))
    finally:
        d.kill()
        d.dump()


def corrupt_cache(tmp, cache):
    garbage = b"not a pipeline cache " * 200
    with open(cache, "wb") as f:
        f.write(garbage)
    port = free_port()
    d = Daemon("corrupt cache", [f"--listen={HOST}:{port}", "--validation", f"--pipeline_cache={cache}",
                                 "--log_level=info"] + device_args())
    try:
        samples, answered = wait_until_ready(d, port)
        ready = answered is not None and bool(samples) and samples[-1][1] == 200
        point("with a corrupt cache file the daemon still becomes ready", ready, d.log())
        warn = d.wait_line(r" (warn|error) .*cache.*corrupt", 5)
        point("a corrupt cache is named as such in a warning", warn is not None and cache in warn, d.log())
        rc = d.stop(signal.SIGTERM)
        with open(cache, "rb") as f:
            replaced = f.read() != garbage
        point("the corrupt cache is replaced at exit", rc == 0 and replaced, f"exit code {rc}\n{d.log()}")
        bad = validation_lines(d)
        point("corrupt cache: no validation-layer message and exit code not 3", rc != 3 and not bad,
              "\n".join(bad))
    finally:
        d.kill()
        d.dump()


def tls(tmp):
    """HTTPS from tls_cert and tls_key: a self-signed certificate made with openssl."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                           "-days", "2", "-subj", "/CN=127.0.0.1"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=scaled(60))
    if not point("openssl made a test certificate", made.returncode == 0, made.stderr):
        return
    port = free_port()
    d = Daemon("tls", [f"--listen={HOST}:{port}", "--pipeline_cache=", "--validation", f"--tls_cert={cert}",
                       f"--tls_key={key}"] + device_args())
    try:
        import ssl
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        status = None
        deadline = time.monotonic() + scaled(READY_TIMEOUT_S)
        while time.monotonic() < deadline and d.proc.poll() is None:
            try:
                conn = http.client.HTTPSConnection(HOST, port, timeout=scaled(5), context=ctx)
                conn.request("GET", "/readyz")
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        point("with tls_cert and tls_key the API answers over HTTPS", status == 200, d.log())
        plain_ok = False
        try:
            request(port, "GET", "/readyz")
        except (OSError, http.client.HTTPException):
            plain_ok = True
        point("plain HTTP to the HTTPS port gets no answer", plain_ok)
        line = d.wait_line(r"listening on https://", 5)
        point("the log says https://", line is not None, d.log())
        d.stop()
        point("tls: exit code 0 and no validation message", d.proc.returncode == 0 and not validation_lines(d), d.log())
    finally:
        d.kill()
    bad = Daemon("tls-missing-key", [f"--listen={HOST}:{free_port()}", "--pipeline_cache=",
                                     f"--tls_cert={cert}"] + device_args())
    try:
        code = bad.wait_exit(30)
        point("tls_cert without tls_key fails start-up naming both", code == 1 and "tls_key" in bad.log(), bad.log())
    finally:
        bad.kill()


def warm_frame(tmp):
    """--warm_frame=WxH: two frames of the size go through the GPU before /readyz says 200, so the frame
    graph already holds the size and the host pool its blocks when the first request comes."""
    for value, want_sizes in (("96x64", 1), ("none", 0), ("200x100", 0)):
        port = free_port()
        # 200x100 is past --max_width=128: skipped, with a line that says why.
        d = Daemon(f"warm_frame {value}", [f"--listen={HOST}:{port}", "--validation", "--pipeline_cache=",
                                           f"--warm_frame={value}", "--max_width=128"] + device_args())
        try:
            samples, answered = wait_until_ready(d, port)
            ready = answered is not None and bool(samples) and samples[-1][1] == 200
            line = d.wait_line(r"warm-up: 96x64 frames ready in \d+ ms", 1) if want_sizes else None
            status, _, body = request(port, "GET", "/v1/gpu") if ready else (0, {}, b"")
            doc = json_body(body) if status == 200 else {}
            sizes = doc.get("frame_graph", {}).get("sizes_kept")
            kept = doc.get("host_memory", {}).get("kept_bytes", 0)
            # Two frames in flight at once: two RGBA16F frames (8 bytes a pixel) and two images
            # (hp_tone_output_max_bytes: 8 bytes a pixel at this size) kept by the pool.
            if want_sizes:
                point("--warm_frame=96x64: ready after the warm-up, the frame graph holds the size and the host "
                      "pool two frames' and two images' memory before any request",
                      ready and line is not None and sizes == 1 and kept >= 4 * 96 * 64 * 8,
                      f"ready {ready}, log line {line!r}, /v1/gpu {status} {doc}\n{d.log()}")
            elif value == "none":
                point("--warm_frame=none: nothing warmed, no size kept",
                      ready and sizes == 0 and "warm-up" not in d.log(), f"/v1/gpu {status} {doc}\n{d.log()}")
            else:
                skipped = d.wait_line(r"warm-up of 200x100 frames skipped: the size limits", 1)
                point("--warm_frame past the size limits: skipped with a line saying why, no size kept",
                      ready and sizes == 0 and skipped is not None, f"/v1/gpu {status} {doc}\n{d.log()}")
            rc = d.stop(signal.SIGTERM)
            bad = validation_lines(d)
            point(f"--warm_frame={value}: SIGTERM exits 0, no validation-layer message", rc == 0 and not bad,
                  f"exit code {rc}\n" + "\n".join(bad))
        finally:
            d.kill()
            d.dump()


def metrics_open(tmp):
    """--metrics_open with --auth_token: /metrics answers without the token (a Prometheus scraping by pod
    annotations cannot send one), every other route but the health checks still needs it."""
    port = free_port()
    d = Daemon("metrics_open", [f"--listen={HOST}:{port}", "--pipeline_cache=", "--warm_frame=none",
                                "--auth_token=s3cret", "--metrics_open"] + device_args())
    try:
        samples, answered = wait_until_ready(d, port)
        ready = answered is not None and bool(samples) and samples[-1][1] == 200
        metrics = request(port, "GET", "/metrics") if ready else (0, {}, b"")
        gpu = request(port, "GET", "/v1/gpu") if ready else (0, {}, b"")
        keyed = request(port, "GET", "/v1/gpu", {"Authorization": "Bearer s3cret"}) if ready else (0, {}, b"")
        point("--metrics_open: /metrics is 200 without the token, /v1/gpu still 401 without it and 200 with it",
              metrics[0] == 200 and b"hdrpost_" in metrics[2] and is_error_body(json_body(gpu[2]), "unauthorized")
              and gpu[0] == 401 and keyed[0] == 200, f"metrics {metrics[0]}, gpu {gpu[0]} {gpu[2]!r}, keyed {keyed[0]}")
        text = metrics[2].decode("utf-8", "replace")
        point("/metrics says hdrpost_ready 1 and hdrpost_state ready once ready",
              "\nhdrpost_ready 1\n" in text and 'hdrpost_state{state="ready"} 1' in text
              and 'hdrpost_state{state="starting"} 0' in text, text[:1500])
        rc = d.stop(signal.SIGTERM)
        point("--metrics_open: SIGTERM exits 0", rc == 0, f"exit code {rc}\n{d.log()}")
    finally:
        d.kill()
        d.dump()


# A 2 x 2 grey PFM (little-endian: scale -1), posted as the raw body by the device_lost groups.
GREY_PFM = b"PF\n2 2\n-1.0\n" + struct.pack("<12f", *([0.18] * 12))


def device_lost(tmp):
    """A lost device (simulated by --test_lose_device_after=1: the first frame the GPU finishes is reported
    as a frame past its fence's timeout is): that frame is answered 503 device_lost, then the daemon is out
    of rotation (/readyz 503) and asks to be restarted (/livez 503), takes no frame, and still exits on
    SIGTERM. What a supervisor or Kubernetes needs to replace it (docs/DEPLOY.md)."""
    port = free_port()
    d = Daemon("device lost", [f"--listen={HOST}:{port}", "--validation", "--pipeline_cache=", "--warm_frame=none",
                               "--test_lose_device_after=1"] + device_args())
    pfm = GREY_PFM
    try:
        samples, answered = wait_until_ready(d, port)
        ready = answered is not None and bool(samples) and samples[-1][1] == 200
        status, _, body = harness.request(port, "POST", "/v1/render?output.format=png", pfm) if ready else (0, {}, b"")
        point("a frame the device is lost on is answered 503 device_lost",
              status == 503 and is_error_body(json_body(body), "device_lost"), f"{status} {body[:300]!r}\n{d.log()}")
        ready_status, ready_headers, ready_body = request(port, "GET", "/readyz")
        live_status, _, live_body = request(port, "GET", "/livez")
        point("then /readyz is 503 (out of rotation, no Retry-After: it does not come back) and /livez 503 "
              "device_lost (restart it)",
              ready_status == 503 and "device lost" in ready_body.decode("utf-8", "replace")
              and "retry-after" not in ready_headers
              and live_status == 503 and is_error_body(json_body(live_body), "device_lost"),
              f"readyz {ready_status} {ready_body!r}, livez {live_status} {live_body!r}")
        _, _, metrics = request(port, "GET", "/metrics")
        text = metrics.decode("utf-8", "replace")
        point("/metrics says hdrpost_ready 0 and hdrpost_state device_lost",
              "\nhdrpost_ready 0\n" in text and 'hdrpost_state{state="device_lost"} 1' in text
              and 'hdrpost_state{state="ready"} 0' in text, text[:1500])
        status, _, body = harness.request(port, "POST", "/v1/render?output.format=png", pfm)
        point("and a new frame is refused 503 not_ready, naming the state",
              status == 503 and is_error_body(json_body(body), "not_ready") and b"device_lost" in body,
              f"{status} {body[:300]!r}")
        rc = d.stop(signal.SIGTERM)
        bad = validation_lines(d)
        point("device lost: SIGTERM still exits 0, no validation-layer message", rc == 0 and not bad,
              f"exit code {rc}\n" + "\n".join(bad) + "\n" + d.log())
    finally:
        d.kill()
        d.dump()


def device_lost_queued(tmp):
    """Frames queued behind the one the device is lost on are not run: answered device_lost at once. Each frame
    waits 1 s on the GPU thread; three are sent 0.2 s apart, so the third is still queued when the first
    reports the loss (the second may already be on the GPU: two frames are in flight). Both times stretch
    by HDRPOST_TEST_TIME_FACTOR (gpu_delay, scaled), keeping that order."""
    pfm = GREY_PFM
    port = free_port()
    d = Daemon("device lost, queued frames", [f"--listen={HOST}:{port}", "--pipeline_cache=", "--warm_frame=none",
                                             "--test_lose_device_after=1", gpu_delay(1000)]
               + device_args())
    try:
        samples, answered = wait_until_ready(d, port)
        answers = [None] * 3

        def post(i):
            try:
                answers[i] = harness.request(port, "POST", "/v1/render?output.format=png", pfm, timeout=30)
            except OSError as e:
                answers[i] = (str(e), {}, b"")

        threads = []
        for i in range(3):
            threads.append(threading.Thread(target=post, args=(i,)))
            threads[-1].start()
            time.sleep(scaled(0.2))
        for t in threads:
            t.join(timeout=scaled(40))
        codes = [(a[0], (json_body(a[2]) or {}).get("error", {}).get("code")) if a else None for a in answers]
        point("the frames queued behind the lost one are answered 503 device_lost without running",
              codes[0] == (503, "device_lost") and codes[2] == (503, "device_lost")
              and b"before this frame ran" in answers[2][2], f"{d.log()}\n{codes} {answers[2]}")
        rc = d.stop(signal.SIGTERM)
        point("queued frames after the loss: SIGTERM exits 0", rc == 0, f"exit code {rc}")
    finally:
        d.kill()
        d.dump()


def device_lost_after_drain(tmp):
    """Lost after the HTTP server is gone: a frame still on the GPU thread when a short drain ends reports the
    loss after hp_http_destroy. The worker must tell nobody then (in an AddressSanitizer build, telling the
    freed server was a use after free)."""
    pfm = GREY_PFM
    port = free_port()
    d = Daemon("device lost after the drain", [f"--listen={HOST}:{port}", "--pipeline_cache=", "--warm_frame=none",
                                               "--test_lose_device_after=1", gpu_delay(2000),
                                               "--shutdown_timeout_s=0.3"] + device_args())
    try:
        samples, answered = wait_until_ready(d, port)
        answer = {}

        def post_one():
            try:
                answer["status"] = harness.request(port, "POST", "/v1/render?output.format=png", pfm, timeout=30)[0]
            except OSError as e:
                answer["status"] = str(e)

        t = threading.Thread(target=post_one)
        t.start()
        time.sleep(scaled(0.5))  # the frame on the GPU thread, in its delay (gpu_delay: at any factor)
        rc = d.stop(signal.SIGTERM)
        t.join(timeout=scaled(30))
        lost = d.wait_line(r"device lost: test_lose_device_after", 1)
        point("a loss reported after the HTTP drain ended: the daemon still exits 0 (no use of the freed server)",
              rc == 0 and lost is not None and "AddressSanitizer" not in d.log(),
              f"exit code {rc}, answer {answer}\n{d.log()}")
    finally:
        d.kill()
        d.dump()


def device_lost_in_warmup(tmp):
    """Lost during the warm-up: never ready, /livez 503, and the log says why."""
    port = free_port()
    d = Daemon("device lost in the warm-up", [f"--listen={HOST}:{port}", "--pipeline_cache=", "--warm_frame=16x16",
                                              "--test_lose_device_after=1"] + device_args())
    try:
        line = d.wait_line(r"not ready after the warm-up: device_lost", START_TIMEOUT_S + READY_TIMEOUT_S)
        ready_status = request(port, "GET", "/readyz")[0] if line else 0
        live_status, _, live_body = request(port, "GET", "/livez") if line else (0, {}, b"")
        point("a device lost during the warm-up: the log says so, /readyz stays 503 and /livez is 503 device_lost",
              line is not None and ready_status == 503 and live_status == 503
              and is_error_body(json_body(live_body), "device_lost"),
              f"line {line!r}, readyz {ready_status}, livez {live_status} {live_body!r}\n{d.log()}")
        rc = d.stop(signal.SIGTERM)
        point("lost in the warm-up: SIGTERM exits 0", rc == 0, f"exit code {rc}")
    finally:
        d.kill()
        d.dump()


def starts(tmp):
    """The first start (its drain: a body pending at SIGTERM, /readyz on a kept-alive connection), then the
    second start and the corrupt cache, which need the first's cache."""
    cache = os.path.join(tmp, "cache", "sub", "pipeline.cache")  # directories made by the daemon
    if first_start(tmp, cache):
        second_start(tmp, cache)
        corrupt_cache(tmp, cache)


def cache_by_convention(tmp):
    """pipeline_cache's default, auto: under systemd's CacheDirectory= the cache goes in $CACHE_DIRECTORY
    (daemon/cache_dir.h; the other rules are tests/test_cache_dir.c's)."""
    cache_dir = os.path.join(tmp, "systemd-cache")
    os.makedirs(cache_dir)
    port = free_port()
    d = Daemon("cache by convention", [f"--listen={HOST}:{port}", "--log_level=info"] + device_args(),
               {"CACHE_DIRECTORY": cache_dir})
    try:
        samples, _ = wait_until_ready(d, port)
        line = d.wait_line(r"pipeline cache: .* does not exist yet", 5)
        want = os.path.join(cache_dir, "pipeline.cache")
        point("pipeline_cache auto: the daemon looks for $CACHE_DIRECTORY/pipeline.cache",
              line is not None and want in line, line or d.log())
        rc = d.stop(signal.SIGTERM)
        point("pipeline_cache auto: the cache is written there at exit", rc == 0 and os.path.isfile(want),
              f"exit code {rc}, {os.listdir(cache_dir)}\n{d.log()}")
    finally:
        d.kill()
        d.dump()


UUID_RX = r"GPU-[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}"


def gpu_of(d, port, args):
    """/v1/gpu's document once the daemon is ready, or None."""
    wait_until_ready(d, port)
    try:
        status, _, body = request(port, "GET", "/v1/gpu")
        return json.loads(body) if status == 200 else None
    except (OSError, ValueError):
        return None


def which_gpu(tmp):
    """Which GPU (issue 37): /v1/gpu, /metrics' hdrpost_gpu_info and the start-up log name the device by its
    UUID (as nvidia-smi -L prints it) and its PCI address where the driver tells it; --device takes the UUID
    spelled any of the usual ways, or a PCI address; a UUID or an address no device has stops the start naming
    what device= takes."""
    port = free_port()
    d = Daemon("which gpu", [f"--listen={HOST}:{port}", "--log_level=info"] + device_args())
    try:
        doc = gpu_of(d, port, [])
        uuid = doc.get("uuid", "") if doc else ""
        pci = doc.get("pci_address") if doc else None
        using = d.wait_line(r"vulkan: using device", 1) or ""
        point("/v1/gpu names the device by its UUID, its PCI address (null where the driver has none, as lavapipe) "
              "and its Vulkan index, and the start-up log says the same UUID",
              doc is not None and re.fullmatch(UUID_RX, uuid) is not None and uuid in using
              and (pci is None or re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", pci) is not None)
              and isinstance(doc.get("vulkan_index"), int), f"{doc and {k: doc.get(k) for k in ('uuid', 'pci_address', 'vulkan_index')}} {using!r}")
        _, _, text = request(port, "GET", "/metrics")
        text = text.decode(errors="replace")
        info = [ln for ln in text.splitlines() if ln.startswith("hdrpost_gpu_info{")]
        point("/metrics: hdrpost_gpu_info carries the same UUID, PCI address and index as labels, value 1",
              len(info) == 1 and f'uuid="{uuid}"' in info[0] and f'pci_address="{pci or ""}"' in info[0]
              and f'vulkan_index="{doc.get("vulkan_index") if doc else ""}"' in info[0] and info[0].endswith("} 1"),
              f"{info}")
    finally:
        d.stop()
        d.kill()
    if not uuid:
        return
    lister = Daemon("--list-devices", ["--list-devices"])
    rc = lister.wait_exit(CONFIG_EXIT_TIMEOUT_S * 4)
    rows = [ln.split("\t") for ln in lister.stdout if ln and not ln.startswith("#")]
    mine = [r for r in rows if len(r) == 6 and r[1] == uuid]
    point("--list-devices exits 0 with a tab-separated line a device: index, UUID, PCI address, type, usable, name; "
          "the daemon's own GPU among them, usable, at its Vulkan index",
          rc == 0 and lister.stdout and lister.stdout[0].startswith("# index\tuuid") and len(mine) == 1
          and mine[0][0] == str(doc.get("vulkan_index")) and mine[0][2] == (pci or "-") and mine[0][4] == "usable",
          f"exit {rc}\n" + "\n".join(lister.stdout) + lister.log())
    lister.kill()
    spellings = [uuid, uuid[4:].replace("-", "").upper()] + ([pci, "0000" + pci] if pci else [])
    for want in spellings:
        port = free_port()
        d = Daemon(f"device={want}", [f"--listen={HOST}:{port}", f"--device={want}"])
        try:
            got = gpu_of(d, port, [])
            point(f"--device={want}: the daemon holds that GPU", got is not None and got.get("uuid") == uuid,
                  f"{got and got.get('uuid')}\n{d.log()}")
        finally:
            d.stop()
            d.kill()
    for want in ("GPU-00000000-0000-0000-0000-000000000000", "0000:ff:1f.7"):
        d = Daemon(f"device={want}", [f"--listen={HOST}:{free_port()}", f"--device={want}"])
        try:
            rc = d.wait_exit(CONFIG_EXIT_TIMEOUT_S * 4)
            log = d.log()
            point(f"--device={want} (no such GPU): exit 1, naming the value and what device= takes",
                  rc == 1 and f'device="{want}"' in log and "UUID" in log and "PCI address" in log, f"exit {rc}\n{log}")
        finally:
            d.kill()


def held_then_live(port, held):
    """Opens `held` idle connections, then asks /livez on one more; the answer's status (0: none) and how many of
    the held ones are still open."""
    socks = []
    try:
        for _ in range(held):
            socks.append(socket.create_connection((HOST, port), timeout=5))
        time.sleep(0.3)
        try:
            status = request(port, "GET", "/livez")[0]
        except OSError:
            status = 0
        still = 0
        for s in socks:
            s.setblocking(False)
            try:
                still += s.recv(1) != b""  # data would be odd; b"" is a close
            except BlockingIOError:
                still += 1  # nothing to read: open
            except OSError:
                pass
        return status, still
    finally:
        for s in socks:
            s.close()


def trusted_proxies(tmp):
    """trusted_proxies (issue 37): a trusted proxy's connections are not held to max_connections_per_ip (they carry
    many clients), and a request's log line names the client it passes on in X-Forwarded-For; without the setting
    the same header is ignored and the limit holds; a bad value exits 2 naming the setting."""
    for trusted in (False, True):
        port = free_port()
        args = [f"--listen={HOST}:{port}", "--log_level=info", "--max_connections_per_ip=2"] + device_args()
        d = Daemon(f"trusted_proxies {'127.0.0.1' if trusted else 'none'}",
                   args + (["--trusted_proxies=127.0.0.1, 10.0.0.0/8"] if trusted else []))
        try:
            wait_until_ready(d, port)
            status, still = held_then_live(port, 4)
            for _ in range(20):  # the held connections' ends reach the daemon's count a moment after they close
                try:
                    if request(port, "GET", "/livez", {"X-Forwarded-For": "198.51.100.9, 203.0.113.7"})[0] == 200:
                        break
                except OSError:
                    time.sleep(0.1)
            line = d.wait_line(r"GET /livez .* for 203\.0\.113\.7", 2 if trusted else 0.5)
            if trusted:
                point("a trusted proxy (127.0.0.1) holds 4 idle connections and a fifth is answered, past "
                      "max_connections_per_ip 2; the log names the client it passed on (203.0.113.7)",
                      status == 200 and still == 4 and line is not None, f"/livez {status}, open {still}, {line!r}")
                gs, _, gb = request(port, "GET", "/v1/gpu")
                rs = request(port, "GET", "/readyz")[0]
                point("without an auth_token, a request a trusted proxy relays (it may come from anywhere) is 403 "
                      "proxy_needs_token; the health routes still answer, for the proxy's checks",
                      gs == 403 and b"proxy_needs_token" in gb and b"auth_token" in gb and rs == 200,
                      f"/v1/gpu {gs} {gb[:300]!r}, /readyz {rs}")
            else:
                # Of the five, at most two stay open: the rest are refused as they come, or an idle one is
                # closed to make room for the next (the guard's eviction), whichever the timing gives.
                point("no trusted proxy: the same client is held to max_connections_per_ip 2 (at most two of its "
                      "connections open), and its X-Forwarded-For is not believed (the log names no client)",
                      still + (status == 200) <= 2 and line is None, f"/livez {status}, open {still}, {line!r}")
        finally:
            d.stop()
            d.kill()
    d = Daemon("bad trusted_proxies", ["--trusted_proxies=10.0.0.0/33"])
    try:
        rc = d.wait_exit(CONFIG_EXIT_TIMEOUT_S)
        point("--trusted_proxies=10.0.0.0/33 exits 2 naming the setting and what it takes",
              rc == 2 and "trusted_proxies" in d.log() and "prefix length" in d.log(), f"exit {rc}\n{d.log()}")
    finally:
        d.kill()


# Under HDRPOST_TEST_QUICK (the ThreadSanitizer pass): the device lost after the drain has freed the HTTP
# server, a frame still on the GPU thread (the worker and the server's end, on two threads).
QUICK = (device_lost_after_drain,)


def main():
    def suite(tmp):
        for group in harness.groups((config_errors, address_in_use, starts, cache_by_convention, which_gpu, trusted_proxies, tls, warm_frame,
                                     device_lost,
                                     device_lost_queued, device_lost_after_drain, device_lost_in_warmup,
                                     metrics_open), QUICK):
            group(tmp)

    return harness.run_suite([EXE], "hdrpostd-test-", suite)


if __name__ == "__main__":
    sys.exit(main())
