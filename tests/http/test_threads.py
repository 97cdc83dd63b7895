#!/usr/bin/env python3
"""The daemon's threads under the interleavings that end requests early (issue 38, docs/RELIABILITY.md
"Threads"): libmicrohttpd's polling threads, the GPU thread, the finishing pool, the early decoders, the
deferred replies' watch and the connection guard, all at once.

- Load with impatient clients: 12 clients at once for a number of rounds, each request one of: a render (PNG
  or WebP) read whole, an analysis with a params part, a render whose client hangs up at a random point (in
  its headers, halfway through its body, after its body while the frame waits or runs), a body trickled
  until the guard closes it, an idle connection the guard closes, and kept-alive GETs.
- A drain during load: SIGTERM while 8 clients post frames and others hang up; the daemon must answer or
  close each, and exit 0.

Every answer read whole must be well-formed: 200 with an image or JSON, or the API's JSON error. In the test
command's ThreadSanitizer pass (deploy/debian.sh) the daemon stops at the first report (halt_on_error), so a
race shows as a daemon that died or exited non-zero, and its report is in the log shown.

Usage: test_threads.py HDRPOSTD [ROUNDS]. TAP on stdout. Loopback only; every loop is bounded."""
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import HOST, json_body, multipart, point  # noqa: E402

EXE = sys.argv[1] if len(sys.argv) > 1 else ""
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
# The sanitizer builds run frames many times slower: room for them (and harness.Daemon stretches it by
# HDRPOST_TEST_TIME_FACTOR besides, as every wait below: harness.scaled).
READY_TIMEOUT_S = 300


def frame(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


EXR, HDR = frame("pmndrs_park.exr"), frame("pmndrs_park.hdr")


def well_formed(status, headers, body):
    """An answer a client may get under this load: an image, the analysis, or the API's JSON error."""
    ctype = headers.get("content-type", "")
    if status == 200:
        return (ctype == "image/png" and body.startswith(b"\x89PNG")) or \
               (ctype == "image/webp" and body[:4] == b"RIFF") or \
               (ctype.startswith("application/json") and isinstance(json_body(body), dict))
    err = (json_body(body) or {}).get("error")
    return status in (400, 413, 429, 499, 503, 504) and isinstance(err, dict) and isinstance(err.get("code"), str)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.kinds, self.bad = {}, []

    def add(self, kind, ok, detail=""):
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            if not ok:
                self.bad.append(f"{kind}: {detail}"[:300])


def whole(port, tally, kind, path, body, headers):
    try:
        status, hdrs, data = harness.request(port, "POST", path, body, headers, 300)
    except OSError as e:  # a drain may close a connection before its answer
        tally.add(kind + " (closed)", True, str(e))
        return
    tally.add(kind, well_formed(status, hdrs, data), f"{status} {data[:200]!r}")


def hang_up(port, tally, rng):
    """A render whose client goes away at a random point of its request, or while its frame waits or runs."""
    head = (f"POST /v1/render?output.format=png HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(EXR)}\r\n"
            "\r\n").encode()
    where = rng.choice(["headers", "body", "waiting"])
    try:
        with socket.create_connection((HOST, port), timeout=harness.scaled(30)) as s:
            if where == "headers":
                s.sendall(head[:rng.randrange(1, len(head))])
            elif where == "body":
                s.sendall(head + EXR[:rng.randrange(1, len(EXR))])
            else:
                s.sendall(head + EXR)
                time.sleep(rng.uniform(0.0, 0.6))
            time.sleep(rng.uniform(0.0, 0.05))
    except OSError:
        pass
    tally.add("hang up " + where, True)


def guard_closes(port, tally, rng):
    """A body trickled, or a connection left idle: the guard (header deadline 1 s, slow body) closes it."""
    try:
        with socket.create_connection((HOST, port), timeout=harness.scaled(10)) as s:
            if rng.random() < 0.5:
                s.sendall(b"POST /v1/render HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n")
                for _ in range(40):
                    s.sendall(b"\0")
                    time.sleep(0.1)
            else:
                s.sendall(b"GET /livez HTTP/1.1\r\nHost: local")
            s.settimeout(harness.scaled(8))
            while s.recv(65536):
                pass
    except OSError:
        pass
    tally.add("closed by the guard", True)


def keep_alive(port, tally):
    ok = True
    try:
        with socket.create_connection((HOST, port), timeout=harness.scaled(30)) as s:
            for path in ("/v1/stats", "/metrics", "/livez", "/v1/gpu"):
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
                status, _, _ = harness.read_response(s)
                ok = ok and status == 200
    except OSError as e:
        ok = "closed" in str(e) or ok
    tally.add("kept alive", ok)


def client(port, tally, seed, count):
    rng = random.Random(seed)
    body, ctype = multipart([("frame", HDR, "f.hdr"), ("params", b'{"exposure":{"mode":"auto"}}', None)])
    for _ in range(count):
        kind = rng.choice(["png", "webp", "analyze", "hang up", "hang up", "guard", "kept alive"])
        if kind == "png" or kind == "webp":
            whole(port, tally, kind, f"/v1/render?output.format={kind}", EXR, {})
        elif kind == "analyze":
            whole(port, tally, kind, "/v1/analyze", body, {"Content-Type": ctype})
        elif kind == "hang up":
            hang_up(port, tally, rng)
        elif kind == "guard":
            guard_closes(port, tally, rng)
        else:
            keep_alive(port, tally)


def daemon(label):
    d = harness.Daemon(EXE, label, ["--warm_frame=none", "--header_timeout_s=1", "--queue_depth=6",
                                    "--min_body_rate_kbs=8", "--shutdown_timeout_s=20"], None, READY_TIMEOUT_S)
    if harness.point(f"{label}: the daemon becomes ready", d.wait_ready(), d.log()):
        return d
    d.kill()
    d.dump()
    return None


def reports(d):
    return [l for l in d.log().splitlines() if "ThreadSanitizer" in l or "AddressSanitizer" in l]


def impatient_load():
    d = daemon("impatient clients")
    if not d:
        return
    tally = Tally()
    try:
        for r in range(ROUNDS):
            threads = [threading.Thread(target=client, args=(d.port, tally, r * 100 + i, 3)) for i in range(12)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        alive = d.alive()
        point(f"{ROUNDS} rounds of 12 clients ({sum(tally.kinds.values())} requests: "
              f"{', '.join(f'{k} {n}' for k, n in sorted(tally.kinds.items()))}): every answer read whole is "
              "well-formed", not tally.bad, "\n".join(tally.bad[:20]))
        # the exit code first (CI's tail shows a check's first diagnostic line), then the log's last lines
        point("... and the daemon answers after them", alive,
              "\n".join([f"exit code {d.proc.poll()} (None: it runs but does not answer)"] +
                        d.log().splitlines()[-38:]))
        held = harness.metric(d.port, "hdrpost_inflight_bytes")
        deadline = time.monotonic() + harness.scaled(30)
        while held != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            held = harness.metric(d.port, "hdrpost_inflight_bytes")
        point("... and every request's memory is given back", held == 0, str(held))
        # The paths the load is for were taken: the watch cancelled frames whose clients left, the guard closed
        # connections that trickled or idled.
        cancelled = sum(harness.metric(d.port, f'hdrpost_frames_cancelled_total{{stage="{st}"}}') or 0
                        for st in ("arriving", "queued", "running"))
        closed = sum(harness.metric(d.port, f'hdrpost_connections_closed_total{{reason="{r}"}}') or 0
                     for r in ("header_timeout", "slow_body"))
        point("... clients that left had their frames cancelled, and the guard closed the slow ones",
              cancelled > 0 and closed > 0, f"cancelled {cancelled}, closed by the guard {closed}")
    finally:
        rc = d.stop(timeout=120)
        bad = reports(d)
        point("impatient clients: SIGTERM exits 0, no sanitizer report", rc == 0 and not bad,
              f"exit {rc}\n" + "\n".join(bad[:10] or d.log().splitlines()[-40:]))
        d.kill()
        if rc != 0 or bad:
            d.dump()


def drain_during_load():
    d = daemon("drain")
    if not d:
        return
    tally = Tally()
    threads = [threading.Thread(target=client, args=(d.port, tally, 7000 + i, 4)) for i in range(10)]
    for t in threads:
        t.start()
    time.sleep(harness.scaled(2.0))  # the load under way: frames queued and running when the signal comes
    rc = d.stop(timeout=120)
    for t in threads:
        t.join(timeout=harness.scaled(300))
    bad = reports(d)
    point("SIGTERM during a load of 10 clients (frames queued, running, clients hanging up): exit 0, no sanitizer "
          "report", rc == 0 and not bad, f"exit {rc}\n" + "\n".join(bad[:10] or d.log().splitlines()[-40:]))
    point("... every answer read whole was well-formed, the rest closed", not tally.bad, "\n".join(tally.bad[:20]))
    drained = re.search(r"drain|stopped", d.log()) is not None
    point("... the log says it drained and stopped", drained, d.log()[-2000:])
    d.kill()
    if rc != 0 or bad:
        d.dump()


def main():
    def suite(tmp):
        impatient_load()
        drain_during_load()

    return harness.run_suite([EXE], "hdrpostd-threads-", suite)


if __name__ == "__main__":
    sys.exit(main())
