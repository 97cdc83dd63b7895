#!/usr/bin/env python3
"""A soak of hdrpostd (issue 16): many clients at once, for minutes, mixing good requests with malformed ones,
clients that hang up mid-upload and while their frame is queued, slow senders and kept-alive connections,
while a monitor samples the daemon's memory and file descriptors, scrapes /metrics and sends SIGHUP. At the
end: every answer a client read was complete and well-formed, the counts in /metrics are those the clients
saw, the memory requests hold is back to 0, resident memory after the warm-up grew less than a stated
bound, the file descriptors are back to their count before the load, and SIGTERM exits 0 with no
validation-layer message.

Usage: soak.py PATH/TO/hdrpostd [--seconds N | --minutes M] [--clients C] [--out DIR] [--seed S]
                                [--args "extra daemon flags"]

Defaults: 75 s, 8 clients (CI: 2 cores, lavapipe; the whole run stays near 90 s). The GPU-host run is
--minutes 10 --clients 64. Prints TAP (one point per check) and a summary as TAP comments; with --out DIR
it writes DIR/soak.json (the samples and the totals; tools/plot_soak.py draws it). The seed of the
clients' choices is printed; --seed repeats a run's choices (not its timing). Extra daemon flags come after
the soak's own and win over them (the last of a repeated flag counts), but leave log_level at info: the
soak reads the daemon's log (the SIGHUP lines, the frames taken out of the queue). Standard library only;
loopback only.
"""

import argparse
import collections
import http.client
import json
import math
import os
import random
import re
import shlex
import signal
import socket
import struct
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402
from harness import PngError, json_body, multipart, png_decode, point, webp_size  # noqa: E402

HOST = harness.HOST
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# The waits below are the plain build's, stretched by HDRPOST_TEST_TIME_FACTOR (harness.scaled, as in the HTTP
# suites; harness.request and start_ready do it themselves): the sanitizer passes of deploy/debian.sh set it.
# The soak's own pace (its length, the monitor's period, the SIGHUPs, the clients' choices and back-off) is not
# a wait and stays as it is.
READY_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 60   # one exchange, the whole way; a small frame takes well under a second even queued
SAMPLE_S = 0.5           # the monitor's period
HUP_EVERY_S = 10         # SIGHUP this often, the first at HUP_FIRST_S
HUP_FIRST_S = 5
HUP_LOG_WAIT_S = 5       # for the daemon's "received SIGHUP" line
WARMUP_FRACTION = 0.2    # of the run: memory growth is measured from its end
SETTLE_S = 10            # after the clients: for the counts, the budget and the descriptors to settle
CANCEL_LOG_WAIT_S = 5    # after that: for the cancellations counted queued and their log lines to agree
scaled = harness.scaled

# The daemon's settings for the soak. queue_depth: an eighth of the clients, at least 4 (8 for the GPU
# host's 64), so that the queue fills at times and 429 queue_full is answered under load, without most
# requests being refused (with 8 clients on 2 cores and lavapipe, some 3% are; on an H100 the 64 clients,
# one Python process, sent some 900 requests a second and none was refused with a queue of 8 or of 32: a
# shallower queue through --args is the way to have refusals there). max_inflight_mb=64: the memory
# requests in flight may hold (a 512x256 frame holds about 3 MiB: body, decoded pixels, image), so a flood
# cannot grow the process without bound (RSS_GROWTH_BOUND_MIB leans on it) and 503 memory_full with
# Retry-After is a legitimate answer. Every client comes from 127.0.0.1, so the per-address connection
# limit (64 by default) is lifted: it would refuse the 64 clients' connections beside the monitor's and
# those of clients that just hung up.
INFLIGHT_MB = 64


def daemon_args(clients):
    return [f"--queue_depth={max(4, clients // 8)}", f"--max_inflight_mb={INFLIGHT_MB}", "--max_connections_per_ip=0"]


# A client refused 429 or 503 waits this long (uniform) before its next request: it honours Retry-After
# loosely, more eagerly than told (1 s), to keep the pressure on without spinning on refusals.
BACKOFF_S = (0.05, 0.25)

# Resident memory may grow by at most this much from the end of the warm-up to the end of the load,
# comparing the median of the samples in the last tenth of the load with the median of those in the
# second tenth (the end of the warm-up): medians, so that the few MiB each request in flight holds for a
# moment do not count. The bound is max_inflight_mb: once its pools (host blocks, big buffers, the frame
# graph) are warm for the one frame size, what the daemon allocates per request is what the budget
# counts, and malloc keeps what was freed for reuse, so the resident set still creeps up as the load
# reaches rarer peaks of requests in flight at once, towards the warm-up's level plus what those
# requests may hold, and no further without a leak. (Measured: on 2 cores with lavapipe and 8 clients,
# +5 to +11 MiB in 75 s runs, +24 MiB in a 60 s run whose second core a fuzzer held, +7 MiB from 60 s to
# 300 s of a 5-minute run; on an H100 with 64 clients, +3 to +6 MiB over 1.5 and 3 minutes.) A leak of a
# body per request (154 KiB) passes the bound within about 420 requests, a frame's buffers (about 3 MiB)
# within about 20: a CI run makes some 4,000 after its warm-up; the GPU run, with many times more, catches
# leaks that many times smaller.
RSS_GROWTH_BOUND_MIB = INFLIGHT_MB
# Descriptors open once the load is over and connections are closed, against the count before the load
# (idle, after the reference requests): equal, give or take this many (a descriptor a library opens on
# first use under concurrency, never one per request).
FD_TOLERANCE = 2

ROUTES = ("/v1/render", "/v1/analyze", "other")  # the labels of hdrpost_requests_total the soak compares


def read_data(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


# --- Requests --------------------------------------------------------------------------------------------


def route_of(path):
    p = path.split("?", 1)[0]
    return p if p in ("/v1/render", "/v1/analyze") else "other"


class Template:
    """One kind of request: method POST, path, body, headers; what a good answer is (png, webp, stats) or,
    for a malformed one, the status and error code it must get."""

    def __init__(self, name, path, body, ctype=None, expect=None, status=None, code=None):
        self.name, self.path, self.body, self.expect, self.status, self.code = name, path, body, expect, status, code
        self.headers = {"Content-Type": ctype or "application/octet-stream"}
        self.route = route_of(path)


FRAME = read_data("pmndrs_park.exr")  # 512x256 RGB half DWAB, 157842 bytes
HDR = read_data("pmndrs_park.hdr")    # the same image as Radiance RGBE
WIDTH, HEIGHT = 512, 256
AGX_PNG = {"tonemap": {"operator": "agx"}, "output": {"format": "png"}}

GOOD = [
    Template("render_webp", "/v1/render", FRAME, expect="webp"),
    Template("render_png", "/v1/render?output.format=png", FRAME, expect="png"),
    Template("render_png_aces", "/v1/render?output.format=png&tonemap.operator=aces_hill&exposure.compensation_ev=-0.5",
             FRAME, expect="png"),
    Template("render_hdr_png", "/v1/render?output.format=png", HDR, expect="png"),
    Template("analyze_exr", "/v1/analyze", FRAME, expect="stats"),
    Template("analyze_hdr", "/v1/analyze", HDR, expect="stats"),
]
_form = multipart([("frame", FRAME, "frame.exr", "application/octet-stream"),
                   ("params", json.dumps(AGX_PNG).encode(), None, "application/json")])
MULTIPART = Template("multipart_agx_png", "/v1/render", _form[0], _form[1], expect="png")
_form_webp = multipart([("frame", FRAME, "frame.exr", "application/octet-stream")])
MULTIPART_WEBP = Template("multipart_webp", "/v1/render", _form_webp[0], _form_webp[1], expect="webp")
GOOD_RENDER = [t for t in GOOD if t.expect != "stats"]
GOOD_ANALYZE = [t for t in GOOD if t.expect == "stats"]
GOOD_RAW_EXR = [t for t in GOOD if t.body is FRAME]
GOOD_ALL = GOOD + [MULTIPART, MULTIPART_WEBP]


def malformed_templates():
    bad_json = multipart([("frame", FRAME, "frame.exr", "application/octet-stream"),
                          ("params", b"{not json", None, "application/json")])
    unknown = multipart([("frame", FRAME, "frame.exr", "application/octet-stream"),
                         ("thumbnail", b"xyz", "t.png", "image/png")])
    no_frame = multipart([("params", json.dumps(AGX_PNG).encode(), None, "application/json")])
    bad_type = multipart([("frame", FRAME, "frame.exr", "application/octet-stream"),
                          ("params", json.dumps({"output": {"quality": "high"}}).encode(), None, "application/json")])
    return [
        # The garbage body is made per request (random bytes after a prefix no format's magic starts with).
        Template("garbage_render", "/v1/render", None, status=415, code="unsupported_format"),
        Template("garbage_analyze", "/v1/analyze", None, status=415, code="unsupported_format"),
        Template("truncated_exr", "/v1/render", FRAME[:1000], status=400, code="malformed_image"),
        Template("bad_query_param", "/v1/render?tonemap.operator=nope", FRAME, status=400, code="invalid_parameter"),
        Template("bad_query_param_analyze", "/v1/analyze?analysis.nope=1", FRAME, status=400,
                 code="invalid_parameter"),
        Template("bad_json_params", "/v1/render", bad_json[0], bad_json[1], status=400, code="malformed_params"),
        Template("bad_param_type", "/v1/render", bad_type[0], bad_type[1], status=400, code="invalid_parameter"),
        Template("unknown_part", "/v1/render", unknown[0], unknown[1], status=400, code="unknown_part"),
        Template("missing_frame", "/v1/render", no_frame[0], no_frame[1], status=400, code="missing_frame"),
        Template("unknown_route", "/v1/renderer", FRAME[:4096], status=404, code="not_found"),
    ]


MALFORMED = malformed_templates()

# What each client chooses, by weight.
KINDS = [("good_render", 24), ("good_analyze", 10), ("good_multipart", 10), ("malformed", 16),
         ("cut_upload", 7), ("cut_queued", 9), ("slow_sender", 8), ("keepalive", 8)]
DISCONNECT_KINDS = ("cut_upload", "cut_queued")


def error_problem(status, body, want_status, want_code):
    """None when body is the one error shape {"error": {"code", "message", "field"}} with the status and
    code wanted, else what is wrong."""
    doc = json_body(body)
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return f"{status}: not a JSON error body: {body[:200]!r}"
    err = doc["error"]
    if set(err) != {"code", "message", "field"} or not isinstance(err["message"], str) or not err["message"]:
        return f"{status}: error object without code, message and field: {err}"
    if status != want_status or err["code"] != want_code:
        return f"{status} {err['code']}: expected {want_status} {want_code}: {err}"
    return None


def close_enough(a, b, rel=1e-4):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-30


class References:
    """Each good template's answer from an idle daemon before the load: the answers under load must be the
    same image or the same statistics (counts and histogram exact, the rest within 1e-4). A WebP must be the
    reference's very bytes: the encoder is deterministic for the same pixels and parameters (test_render's
    parallel point holds 32 concurrent answers to their serial ones byte for byte too), and the soak has no
    WebP decoder to compare values with, so a WebP that differs fails. A PNG whose bytes differ is decoded
    and must have none of its values off by more than 1 (a GPU may sum the frame's luminance in another
    order from run to run)."""

    def __init__(self):
        self.png, self.png_bytes, self.webp_bytes, self.stats = {}, {}, {}, {}
        self.lock = threading.Lock()
        self.png_same = self.png_decoded = 0  # PNGs under load: the reference's bytes, or decoded and compared
        self.webp_same = self.webp_differ = 0  # WebPs under load: the reference's bytes, or not

    def count(self, same, kind="png"):
        """One image under load: the reference's bytes (same), or not (PNGs: decoded and compared)."""
        name = {("png", True): "png_same", ("png", False): "png_decoded",
                ("webp", True): "webp_same", ("webp", False): "webp_differ"}[(kind, bool(same))]
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)

    def take(self, port):
        problems = []
        for t in GOOD_ALL:
            try:
                status, headers, body, _ = exchange_once(port, t, t.body, f"soak-ref-{t.name}")
            except (OSError, http.client.HTTPException, HalfAnswer) as e:
                problems.append(f"{t.name}: no complete answer: {type(e).__name__}: {e}")
                continue
            if status != 200:
                problems.append(f"{t.name}: {status} {body[:300]!r}")
                continue
            if t.expect == "png":
                self.png_bytes[t.name] = body
                try:
                    self.png[t.name] = png_decode(body)
                except PngError as e:
                    problems.append(f"{t.name}: PNG does not decode: {e}")
                    continue
                if self.png[t.name][:2] != (WIDTH, HEIGHT):
                    problems.append(f"{t.name}: PNG {self.png[t.name][:2]}, expected {(WIDTH, HEIGHT)}")
            elif t.expect == "webp":
                if webp_size(body) != (WIDTH, HEIGHT):
                    problems.append(f"{t.name}: not a {WIDTH}x{HEIGHT} WebP: {body[:64]!r}")
                else:
                    self.webp_bytes[t.name] = body
            else:
                doc = json_body(body)
                st = doc.get("stats") if isinstance(doc, dict) else None
                if not isinstance(st, dict) or st.get("pixels") != WIDTH * HEIGHT:
                    problems.append(f"{t.name}: no stats of {WIDTH * HEIGHT} pixels: {body[:300]!r}")
                else:
                    self.stats[t.name] = st
        return problems

    def check(self, t, headers, body):
        """None when a 200's body is the answer t must get, else what is wrong."""
        ctype = headers.get("content-type", "")
        if t.expect == "webp":
            if ctype != "image/webp":
                return f"Content-Type {ctype!r}, expected image/webp"
            ref = self.webp_bytes[t.name]
            same = body == ref
            self.count(same, "webp")
            if same:
                return None
            size = webp_size(body)
            first = next((i for i, (a, b) in enumerate(zip(body, ref)) if a != b), min(len(body), len(ref)))
            return (f"WebP differs from the reference answer: {len(body)} bytes against {len(ref)}, first "
                    f"difference at byte {first}, size {size} ({WIDTH}x{HEIGHT} wanted): {body[:32]!r}")
        if t.expect == "png":
            if ctype != "image/png":
                return f"Content-Type {ctype!r}, expected image/png"
            # The reference's very bytes (which png_decode decoded whole): the same image, and cheap (the
            # decoder in Python takes some 50 ms a frame, the client threads' time). Anything else is
            # decoded and compared value by value.
            if body == self.png_bytes[t.name]:
                self.count(True)
                return None
            self.count(False)
            try:
                w, h, ch, depth, samples = png_decode(body)
            except PngError as e:
                return f"PNG does not decode: {e}"
            rw, rh, rch, rdepth, ref = self.png[t.name]
            if (w, h, ch, depth) != (rw, rh, rch, rdepth):
                return f"PNG {w}x{h} {ch} channels {depth}-bit, the reference {rw}x{rh} {rch} channels {rdepth}-bit"
            if samples != ref:
                worst = max(abs(a - b) for a, b in zip(samples, ref))
                if worst > 1:
                    return f"PNG values differ from the reference by up to {worst}"
            return None
        if not ctype.startswith("application/json"):
            return f"Content-Type {ctype!r}, expected application/json"
        doc = json_body(body)
        st = doc.get("stats") if isinstance(doc, dict) else None
        ref = self.stats[t.name]
        if not isinstance(st, dict):
            return f"no stats: {body[:200]!r}"
        if any(st.get(k) != ref.get(k) for k in ("pixels", "finite_pixels", "nonfinite_pixels", "histogram")):
            return f"counts or histogram differ from the reference: {json.dumps(st)[:300]}"
        if not all(close_enough(st.get(k), ref.get(k)) for k in ("log_average", "mean", "min", "max")):
            return f"statistics differ from the reference: {json.dumps(st)[:300]}"
        return None


REFS = References()


class HalfAnswer(Exception):
    """An answer whose status line and headers came but whose body ended before its Content-Length (or its
    last chunk): http.client's IncompleteRead, with what the answer was."""

    def __init__(self, status, headers, partial, expected, seconds):
        self.status, self.headers, self.partial, self.expected, self.seconds = (status, headers, partial, expected,
                                                                                seconds)
        more = f", {expected} more expected" if expected is not None else ""
        super().__init__(f"status {status}, Content-Length {headers.get('content-length')!r}: the connection ended "
                         f"after {len(partial)} bytes of the body{more}")


def exchange_once(port, t, body, rid, conn=None, body_iter=None):
    """One request of template t on conn (or a fresh connection, closed after): (status, lower-cased
    headers, body, seconds). http.client reads exactly Content-Length bytes of the body or raises
    IncompleteRead, which is raised again as HalfAnswer (the status and headers came, the body fell
    short); other failures raise what http.client raises."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection(HOST, port, timeout=scaled(REQUEST_TIMEOUT_S))
    headers = dict(t.headers)
    headers["X-Request-Id"] = rid
    start = time.monotonic()
    try:
        if body_iter is not None:
            headers["Content-Length"] = str(len(body))
            conn.request("POST", t.path, body=body_iter, headers=headers)
        else:
            conn.request("POST", t.path, body=body, headers=headers)
        resp = conn.getresponse()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        try:
            data = resp.read()
        except http.client.IncompleteRead as e:
            raise HalfAnswer(resp.status, hdrs, e.partial, e.expected, time.monotonic() - start) from e
        return resp.status, hdrs, data, time.monotonic() - start
    finally:
        if own:
            conn.close()


# --- The clients -----------------------------------------------------------------------------------------


class Tally:
    """What the clients did, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records = []  # one dict per request: kind, template, route, status, seconds, problem
        self.done = 0

    def add(self, rec):
        with self.lock:
            self.records.append(rec)
            self.done += 1


def judge(t, status, headers, body, rid):
    """None when (status, headers, body) is an answer t may get, else what is wrong. Good and malformed
    requests to the frame routes may both be refused from their headers under load: 429 queue_full or 503
    memory_full, each with Retry-After."""
    if headers.get("x-request-id") != rid:
        return f"X-Request-Id {headers.get('x-request-id')!r}, sent {rid!r}"
    # The body is framed by Content-Length (the daemon answers from a buffer, with its length). Its bytes are
    # all there: exchange_once raises HalfAnswer when fewer came, and answered() records that as a failure.
    length = headers.get("content-length")
    if length is None or not length.isdigit() or "transfer-encoding" in headers:
        return (f"not framed by Content-Length: Content-Length {length!r}, Transfer-Encoding "
                f"{headers.get('transfer-encoding')!r}")
    if t.route != "other" and status in (429, 503):
        code = "queue_full" if status == 429 else "memory_full"
        problem = error_problem(status, body, status, code)
        if problem:
            return problem
        if not headers.get("retry-after", "").isdigit():
            return f"{status} {code} without Retry-After: {headers}"
        return None
    if t.expect:
        if status != 200:
            return f"{status}: {body[:300]!r}"
        return REFS.check(t, headers, body)
    return error_problem(status, body, t.status, t.code)


class Client(threading.Thread):
    def __init__(self, index, port, seed, t_end, tally, mix):
        super().__init__(daemon=True, name=f"client-{index}")
        self.index, self.port, self.t_end, self.tally, self.mix = index, port, t_end, tally, mix
        self.rng = random.Random(seed * 1000 + index)
        self.seq = 0
        self.failure = None
        self.problems = []  # what is wrong beyond one request's answer

    def rid(self, kind):
        self.seq += 1
        return f"soak-c{self.index}-{self.seq}-{kind}"

    def record(self, kind, t, status, seconds, problem, **extra):
        rec = {"kind": kind, "template": t.name, "route": t.route, "status": status, "seconds": seconds,
               "problem": problem}
        rec.update(extra)
        self.tally.add(rec)

    def body_of(self, t):
        if t.body is None:  # garbage: no format starts with this prefix
            return b"NOT AN IMAGE, SOAK GARBAGE\n" + self.rng.randbytes(self.rng.randint(512, 16384))
        return t.body

    def answered(self, kind, t, conn=None, body_iter_of=None, **extra):
        """One request that the client reads the answer of, judged and recorded."""
        rid = self.rid(kind)
        body = self.body_of(t)
        try:
            status, headers, data, seconds = exchange_once(self.port, t, body, rid, conn,
                                                           body_iter_of(body) if body_iter_of else None)
        except HalfAnswer as e:  # answered (the daemon counts its status), but not in full: a failure
            self.record(kind, t, e.status, e.seconds, f"{rid}: half an answer: {e}", **extra)
            return None
        except Exception as e:  # noqa: BLE001 - every failure is recorded
            self.record(kind, t, None, None, f"{rid}: no complete answer: {type(e).__name__}: {e}", **extra)
            return None
        problem = judge(t, status, headers, data, rid)
        self.record(kind, t, status, seconds, f"{rid}: {problem}" if problem else None, **extra)
        if status in (429, 503):
            time.sleep(self.rng.uniform(*BACKOFF_S))
        return headers

    def cut(self, kind, t):
        """A client that sends the headers and part of the body (cut_upload) or all of it (cut_queued), then
        closes its end without reading. The close is an orderly one (FIN): the daemon reads every byte sent
        before it sees the end, so it has seen the request's headers and counts the request. (An abortive
        close, RST, would discard bytes not yet read, and with them perhaps the request.)"""
        rid = self.rid(kind)
        body = t.body
        n = len(body) if kind == "cut_queued" else self.rng.randint(len(body) // 10, len(body) * 9 // 10)
        head = (f"POST {t.path} HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: {rid}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        try:
            with socket.create_connection((HOST, self.port), timeout=scaled(REQUEST_TIMEOUT_S)) as s:
                s.sendall(head + body[:n])
                # Mid-upload: long enough for the early decoder to start on what came. Queued: the frame is
                # decoded and waits in the queue, or runs, or is done, as the load has it.
                time.sleep(self.rng.uniform(0.05, 0.3) if kind == "cut_upload" else self.rng.uniform(0, 0.05))
        except OSError as e:
            self.record(kind, t, None, None, f"{rid}: sending failed: {type(e).__name__}: {e}")
            return
        self.record(kind, t, None, None, None)

    def slow_iter(self, pieces, pause):
        def make(body):
            step = (len(body) + pieces - 1) // pieces

            def gen():
                for i in range(0, len(body), step):
                    yield body[i:i + step]
                    time.sleep(pause)
            return gen()
        return make

    def keepalive(self):
        """2 to 4 requests, one after the other on one HTTP/1.1 connection; now and then a malformed one
        among them (an error answer keeps the connection). Each request after the first must go on the
        same connection unless the answer before it said Connection: close."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=scaled(REQUEST_TIMEOUT_S))
        try:
            prev = None  # (local port, whether the answer said close)
            for i in range(self.rng.randint(2, 4)):
                t = self.rng.choice(MALFORMED) if self.rng.random() < 0.2 else self.rng.choice(GOOD_ALL)
                port_before = conn.sock.getsockname()[1] if conn.sock else None
                reused = i > 0 and prev is not None and not prev[1] and port_before == prev[0]
                expected_reuse = i > 0 and prev is not None and not prev[1]
                if expected_reuse and not reused:
                    self.problems.append(f"keep-alive: the connection was gone before request {i + 1} though the "
                                         "answer before did not say Connection: close")
                headers = self.answered("keepalive", t, conn, reused=reused)
                if headers is None:
                    return
                local = conn.sock.getsockname()[1] if conn.sock else None
                prev = (local, headers.get("connection", "").lower() == "close" or conn.sock is None)
        finally:
            conn.close()

    def run(self):
        kinds, weights = zip(*self.mix)
        try:
            while time.monotonic() < self.t_end:
                kind = self.rng.choices(kinds, weights)[0]
                if kind == "good_render":
                    self.answered(kind, self.rng.choice(GOOD_RENDER))
                elif kind == "good_analyze":
                    self.answered(kind, self.rng.choice(GOOD_ANALYZE))
                elif kind == "good_multipart":
                    self.answered(kind, self.rng.choice([MULTIPART, MULTIPART_WEBP]))
                elif kind == "malformed":
                    self.answered(kind, self.rng.choice(MALFORMED))
                elif kind in DISCONNECT_KINDS:
                    self.cut(kind, self.rng.choice(GOOD_RAW_EXR))
                elif kind == "slow_sender":
                    # 8-16 pieces 30-80 ms apart: 0.3-1.3 s for 154 KiB, over 100 KiB/s, above the default
                    # min_body_rate_kbs=64 (which applies only after a body's first 10 s anyway).
                    pieces, pause = self.rng.randint(8, 16), self.rng.uniform(0.03, 0.08)
                    self.answered(kind, self.rng.choice(GOOD_RAW_EXR), body_iter_of=self.slow_iter(pieces, pause))
                else:
                    self.keepalive()
        except Exception:  # noqa: BLE001 - reported as a failed check
            self.failure = traceback.format_exc()


# --- The monitor -----------------------------------------------------------------------------------------

METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
                         r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)?\})? (\S+)$')


def parse_metrics(text):
    """{name or name{labels}: value} and the lines that are not `name{labels} value` (comments and blank
    lines aside) or whose value is not a number."""
    values, bad = {}, []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        if not m:
            bad.append(line)
            continue
        try:
            values[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        except ValueError:
            bad.append(line)
    return values, bad


def scrape(port):
    status, _, body = harness.request(port, "GET", "/metrics", timeout=10)
    values, bad = parse_metrics(body.decode("utf-8", "replace"))
    if status != 200:
        bad.insert(0, f"status {status}")
    return values, bad


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def hup_lines(d):
    with d.cond:
        return sum("received SIGHUP" in l for l in d.lines)


class Monitor(threading.Thread):
    """Every SAMPLE_S: the daemon's RSS and descriptors, /livez, a /metrics scrape (which must parse); every
    HUP_EVERY_S a SIGHUP, whose log line must come while the daemon goes on serving."""

    def __init__(self, d, t0, tally):
        super().__init__(daemon=True, name="monitor")
        self.d, self.t0, self.tally = d, t0, tally
        self.stop = threading.Event()
        self.samples = []
        self.livez_failures, self.metrics_problems, self.hup_problems = [], [], []
        self.hups_sent = 0
        self.hup_lock = threading.Lock()  # hup() from the monitor and, for a short run, from the main thread
        self.scrapes = 0
        self.died_at = None
        self.failure = None

    def run(self):
        try:
            self.loop()
        except Exception:  # noqa: BLE001 - reported as a failed check
            self.failure = traceback.format_exc()

    def loop(self):
        next_hup = HUP_FIRST_S
        while not self.stop.is_set():
            tick = time.monotonic()
            t = tick - self.t0
            pid = self.d.proc.pid
            if self.d.proc.poll() is not None:
                self.died_at = t
                return
            sample = {"t": round(t, 3), "rss_kib": rss_kib(pid), "fds": fd_count(pid), "requests": self.tally.done}
            try:
                status = harness.request(self.d.port, "GET", "/livez", timeout=10)[0]
            except OSError as e:
                status = f"{type(e).__name__}: {e}"
            if status != 200:
                self.livez_failures.append(f"t={t:.1f} s: /livez {status}")
            try:
                values, bad = scrape(self.d.port)
                self.scrapes += 1
                if bad:
                    self.metrics_problems.append(f"t={t:.1f} s: " + "; ".join(bad[:5]))
                sample["queue_depth"] = values.get("hdrpost_queue_depth")
                sample["inflight_bytes"] = values.get("hdrpost_inflight_bytes")
            except OSError as e:
                self.metrics_problems.append(f"t={t:.1f} s: /metrics: {type(e).__name__}: {e}")
            self.samples.append(sample)
            if t >= next_hup:
                next_hup += HUP_EVERY_S
                self.hup()
            self.stop.wait(max(0.0, SAMPLE_S - (time.monotonic() - tick)))

    def hup(self):
        """One SIGHUP: the daemon logs "received SIGHUP: ..." (one line per signal) and still answers /livez.
        One at a time (hup_lock): a signal sent while another's line is awaited would make both counts race."""
        with self.hup_lock:
            self._hup()

    def _hup(self):
        t = time.monotonic() - self.t0
        self.d.proc.send_signal(signal.SIGHUP)
        self.hups_sent += 1
        deadline = time.monotonic() + scaled(HUP_LOG_WAIT_S)
        while hup_lines(self.d) < self.hups_sent and time.monotonic() < deadline and self.d.proc.poll() is None:
            time.sleep(0.05)
        seen = hup_lines(self.d)
        alive = self.d.alive()
        if seen != self.hups_sent or not alive:
            self.hup_problems.append(f"t={t:.1f} s: SIGHUP {self.hups_sent} sent, {seen} 'received SIGHUP' line(s) "
                                     f"logged, /livez {'200' if alive else 'not 200'}, exit code {self.d.proc.poll()}")


# --- The checks ------------------------------------------------------------------------------------------


def server_counts(values):
    """{route: {status: count}} of hdrpost_requests_total."""
    out = {r: collections.Counter() for r in ROUTES}
    rx = re.compile(r'^hdrpost_requests_total\{route="([^"]*)",status="(\d+)"\}$')
    for key, v in values.items():
        m = rx.match(key)
        if m and m.group(1) in out:
            out[m.group(1)][int(m.group(2))] = int(v)
    return out


def client_counts(records):
    """Per route: the statuses of the answers the clients read, the requests cut off (headers sent, answer
    never read) and the requests that failed without an answer (their fate at the daemon unknown)."""
    answered = {r: collections.Counter() for r in ROUTES}
    cut = {k: collections.Counter() for k in DISCONNECT_KINDS}
    unknown = collections.Counter()
    for rec in records:
        if rec["kind"] in DISCONNECT_KINDS:
            cut[rec["kind"]][rec["route"]] += 1
        elif rec["status"] is not None:
            answered[rec["route"]][rec["status"]] += 1
        elif "no complete answer" in (rec["problem"] or ""):
            unknown[rec["route"]] += 1
    return answered, cut, unknown


def counts_problems(server, before, answered, cut, unknown):
    """The rule for hdrpost_requests_total{route, status}, counted by the daemon once per request whose
    headers it read, when the request ends (api/http/http.c, on_completed), with the status it answered, or 0
    when it answered nothing:
    - a request a client read the answer of is counted once, with that answer's status;
    - a request cut off mid-upload (headers and part of the body, then the client closes) is counted 0:
      the daemon saw the end of the stream before the body was in, and a refusal decided from the headers
      (429, 503) is sent only once the body is in;
    - a request cut off after its whole body (cut_queued) is counted 499 (the frame was taken out of the
      queue, or finished for nobody), 0 (the daemon saw the close before it could answer), or the status
      of the answer it wrote before it noticed (200, or a refusal, 429 or 503);
    so per route: the daemon's total is the clients' answered requests plus those cut off, exactly; per
    status, the daemon's count is at least the clients', and at most that plus the requests cut off after
    their body; status 0 at least the requests cut off mid-upload; statuses 0 and 499 together at most the
    requests cut off. Requests that failed without an answer (none should) are allowed either way."""
    problems = []
    for r in ROUTES:
        srv = collections.Counter({s: n - before[r].get(s, 0) for s, n in server[r].items()})
        cli, up, q, u = answered[r], cut["cut_upload"][r], cut["cut_queued"][r], unknown[r]
        total_s, total_c = sum(srv.values()), sum(cli.values())
        if not (total_c + up + q <= total_s <= total_c + up + q + u):
            problems.append(f"{r}: the daemon counted {total_s} request(s), the clients read {total_c} answer(s) "
                            f"and cut off {up} mid-upload and {q} after the body"
                            + (f" ({u} without an answer)" if u else ""))
        for s in sorted(set(srv) | set(cli)):
            if s == 0:
                continue
            if not cli[s] <= srv[s] <= cli[s] + q + u:
                problems.append(f"{r} status {s}: the daemon counted {srv[s]}, the clients read {cli[s]} "
                                f"(with {q} cut off after the body)")
        if not up <= srv[0] or srv[0] + srv[499] > up + q + u:
            problems.append(f"{r}: {srv[0]} counted 0 and {srv[499]} counted 499, for {up} cut off mid-upload "
                            f"and {q} after the body")
    return problems


def poll(fn, timeout, period=0.1):
    """fn() until it returns a true value or timeout seconds (harness.scaled) pass; its last value."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        v = fn()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(period)


def pct(sorted_values, p):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(round(p * (len(sorted_values) - 1))))]


def median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def soak(args, tmp):
    seconds = args.minutes * 60 if args.minutes is not None else args.seconds
    seed = args.seed if args.seed is not None else int(time.time()) % 1000000
    extra = shlex.split(args.args or "")
    flags = daemon_args(args.clients) + extra
    print(f"# soak: {seconds:g} s, {args.clients} clients, seed {seed} (repeat with --seed {seed}), daemon flags "
          f"{' '.join(flags)}", flush=True)
    d = harness.start_ready(args.hdrpostd, "soak daemon", flags, ready_timeout=READY_TIMEOUT_S)
    if not d:
        return
    try:
        run_soak(args, d, seconds, seed, extra)
    finally:
        harness.stop_clean(d)  # check 7: SIGTERM exits 0, no validation-layer message


def run_soak(args, d, seconds, seed, extra):
    status, _, body = harness.request(d.port, "GET", "/v1/gpu", timeout=10)
    device = (json_body(body) or {}).get("device", "unknown device") if status == 200 else "unknown device"
    print(f"# device: {device}", flush=True)

    problems = REFS.take(d.port)
    if not point("the reference answers of every good request, one at a time before the load (200, a "
                 f"{WIDTH}x{HEIGHT} PNG or WebP, or statistics)", not problems, "\n".join(problems)):
        return
    # Idle after the reference requests: the descriptors to come back to, and the counts before the load.
    time.sleep(scaled(0.5))
    fds_start = poll(lambda: fd_count(d.proc.pid), 1)
    values_before = scrape(d.port)[0]
    before = server_counts(values_before)
    cancelled_before = {k: v for k, v in values_before.items() if k.startswith("hdrpost_frames_cancelled_total")}
    log_mark = len(d.lines)
    rss_start = rss_kib(d.proc.pid)

    tally = Tally()
    t0 = time.monotonic()
    t_end = t0 + seconds
    monitor = Monitor(d, t0, tally)
    clients = [Client(i, d.port, seed, t_end, tally, args.mix) for i in range(args.clients)]
    monitor.start()
    for c in clients:
        c.start()
    next_note = t0 + 15
    for c in clients:
        while c.is_alive() and time.monotonic() < t_end + scaled(REQUEST_TIMEOUT_S + 30):
            c.join(timeout=1)
            if time.monotonic() >= next_note and time.monotonic() < t_end:
                next_note += 15
                s = monitor.samples[-1] if monitor.samples else {}
                print(f"# t={time.monotonic() - t0:.0f} s: {tally.done} requests, RSS "
                      f"{(s.get('rss_kib') or 0) / 1024:.1f} MiB, {s.get('fds')} fds", flush=True)
    load_s = time.monotonic() - t0
    hung = [c.name for c in clients if c.is_alive()]
    monitor.stop.set()
    monitor.join(timeout=scaled(30))
    # A run shorter than HUP_FIRST_S: one all the same, once the monitor has stopped (hup() takes hup_lock
    # besides, should the monitor still be running after the 30 s).
    if monitor.hups_sent == 0 and d.proc.poll() is None:
        monitor.hup()
    records = list(tally.records)

    # 1: alive throughout.
    alive_end = d.proc.poll() is None and d.alive()
    point("the daemon stayed alive and answered /livez 200 at every sample (and after the load)",
          monitor.died_at is None and not monitor.livez_failures and alive_end and monitor.failure is None,
          f"died at {monitor.died_at}, exit code {d.proc.poll()}; /livez failures {monitor.livez_failures[:20]}; "
          f"monitor: {monitor.failure}\n" + d.log()[-3000:])
    point(f"every /metrics scrape ({monitor.scrapes}) parsed: each line a comment or `name{{labels}} value`",
          monitor.scrapes > 0 and not monitor.metrics_problems, "\n".join(monitor.metrics_problems[:20]))
    point(f"SIGHUP ({monitor.hups_sent} sent, one every {HUP_EVERY_S} s): each logged 'received SIGHUP' once, "
          "the daemon kept serving", monitor.hups_sent > 0 and not monitor.hup_problems,
          "\n".join(monitor.hup_problems))

    # 2: every answer complete and well-formed.
    bad = [r["problem"] for r in records if r["problem"]]
    bad += [f"{c.name} stopped: {c.failure}" for c in clients if c.failure]
    bad += [f"{c.name}: {p}" for c in clients for p in c.problems]
    bad += [f"{name} still waiting {scaled(REQUEST_TIMEOUT_S + 30):g} s after the end" for name in hung]
    server_errors = [r for r in records if r["status"] is not None and r["status"] >= 500 and r["status"] != 503]
    point("every request a client completed got a complete, well-formed answer of the statuses its kind allows "
          "(good: 200 with the reference's image or statistics; malformed: its 4xx error code; either: 429 "
          "queue_full or 503 memory_full with Retry-After), no 5xx but 503",
          not bad and not server_errors,
          f"{len(bad)} problem(s), {len(server_errors)} 5xx other than 503\n" + "\n".join(bad[:40]))
    kinds_seen = {r["kind"] for r in records}
    good_200 = sum(1 for r in records if r["kind"] not in ("malformed",) and r["status"] == 200)
    point("every kind of client ran, and good requests were answered 200",
          kinds_seen >= {k for k, w in args.mix if w > 0} and good_200 > 0,
          f"kinds run {sorted(kinds_seen)}, good renders answered 200: {good_200}")

    # 3: /metrics counts what the clients saw (once every request has ended at the daemon).
    answered, cut, unknown = client_counts(records)
    want_total = {r: sum(answered[r].values()) + sum(cut[k][r] for k in DISCONNECT_KINDS) for r in ROUTES}

    def settled():
        vals = scrape(d.port)[0]
        srv = server_counts(vals)
        done = all(sum(srv[r].values()) - sum(before[r].values()) >= want_total[r] for r in ROUTES)
        return (srv, vals) if done else None

    got = poll(settled, SETTLE_S, 0.2)
    vals = got[1] if got else scrape(d.port)[0]
    server = got[0] if got else server_counts(vals)
    problems = counts_problems(server, before, answered, cut, unknown)
    table = "\n".join(f"{r}: daemon {dict(sorted((s, n - before[r].get(s, 0)) for s, n in server[r].items()))}, "
                      f"clients {dict(sorted(answered[r].items()))}, cut off mid-upload {cut['cut_upload'][r]}, "
                      f"after the body {cut['cut_queued'][r]}" for r in ROUTES)
    point("hdrpost_requests_total by route and status equals what the clients saw (cut-off requests: counted "
          "0, 499, or what was answered before the close was seen)", not problems, "\n".join(problems) + "\n" + table)

    # Cancellations: each frame the log says was taken out of the queue or dropped before it ran is counted
    # queued; each 499 is a cancelled frame; no more frames cancelled than clients cut off. The daemon logs
    # "took a queued frame out of the queue" after it unlocks the queue, and the pool may answer the frame
    # and count it first, so a scrape can show a count whose log line has not been read yet: scrapes (the
    # clients are done and every request has ended, above) and the log are read again until the daemon is
    # idle (nothing queued or in flight) and the two agree, or CANCEL_LOG_WAIT_S pass; the last is judged.
    def cancellations():
        v = scrape(d.port)[0]
        with d.cond:
            lines = d.lines[log_mark:]
        taken = sum("took a queued frame out of the queue" in l for l in lines)
        dropped = sum("dropped a queued frame whose client went away" in l for l in lines)
        c = {st: v.get(f'hdrpost_frames_cancelled_total{{stage="{st}"}}', 0)
             - cancelled_before.get(f'hdrpost_frames_cancelled_total{{stage="{st}"}}', 0)
             for st in ("arriving", "queued", "running")}
        return v, c, taken, dropped

    cancel_state = None

    def cancel_agrees():
        nonlocal cancel_state
        cancel_state = cancellations()
        v, c, taken, dropped = cancel_state
        idle_now = all(v.get(k) == 0 for k in ("hdrpost_queue_depth", "hdrpost_frames_in_flight"))
        return idle_now and c["queued"] == taken + dropped

    poll(cancel_agrees, CANCEL_LOG_WAIT_S, 0.2)
    cvals, cancelled, taken, dropped = cancel_state
    cserver = server_counts(cvals)
    n499 = sum(cserver[r].get(499, 0) - before[r].get(499, 0) for r in ROUTES)
    n_cut = sum(sum(c.values()) for c in cut.values())
    point("hdrpost_frames_cancelled_total is consistent: queued = the frames the log says were taken out of the "
          "queue or dropped for a client gone; 499 answers <= queued + running; all stages <= requests cut off",
          cancelled["queued"] == taken + dropped and n499 <= cancelled["queued"] + cancelled["running"]
          and sum(cancelled.values()) <= n_cut + sum(unknown.values()),
          f"cancelled {cancelled}; log: {taken} taken out of the queue, {dropped} dropped before running; "
          f"499 answers {n499}; cut off {n_cut}")

    # 4: the memory requests hold is given back, nothing queued or on the GPU.
    keys = ("hdrpost_inflight_bytes", "hdrpost_queue_depth", "hdrpost_frames_in_flight", "hdrpost_host_memory_blocks")
    last = {}

    def idle():
        nonlocal last
        v = scrape(d.port)[0]
        last = {k: v.get(k) for k in keys}
        return all(last[k] == 0 for k in keys)

    point("once the clients are done: hdrpost_inflight_bytes 0, nothing queued or on the GPU, no host block in use",
          poll(idle, SETTLE_S, 0.2), f"{last}")

    # 6: descriptors back to their count before the load.
    def fds_back():
        n = fd_count(d.proc.pid)
        return n if n is not None and n <= fds_start + FD_TOLERANCE else None

    fds_end = poll(fds_back, SETTLE_S, 0.2) or fd_count(d.proc.pid)
    fd_detail = ""
    if fds_end is None or fds_end > fds_start + FD_TOLERANCE:
        try:
            fd_detail = "\n".join(sorted(os.readlink(f"/proc/{d.proc.pid}/fd/{n}")
                                         for n in os.listdir(f"/proc/{d.proc.pid}/fd")))
        except OSError:
            pass

    # 5: resident memory after the warm-up.
    rss_end = rss_kib(d.proc.pid)
    samples = monitor.samples
    def in_window(a, b):
        """The RSS samples from a * seconds to b * seconds; in a run too short to have one there, the sample
        nearest the window's middle."""
        got = [s["rss_kib"] for s in samples if a * seconds <= s["t"] < b * seconds]
        if not got and samples:
            got = [min(samples, key=lambda s: abs(s["t"] - (a + b) / 2 * seconds))["rss_kib"]]
        return got

    rss_warm = median(in_window(0.1, WARMUP_FRACTION))
    rss_late = median(in_window(0.9, 1.0))
    rss_peak = max([s["rss_kib"] or 0 for s in samples] + [rss_start or 0, rss_end or 0])
    growth = (rss_late - rss_warm) if rss_warm is not None and rss_late is not None else None
    # The trend after the warm-up, by least squares over the samples (MiB per minute): for the record.
    pts = [(s["t"], s["rss_kib"]) for s in samples if WARMUP_FRACTION * seconds <= s["t"] < seconds and s["rss_kib"]]
    slope = None
    if len(pts) >= 2:
        mt, mr = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
        var = sum((p[0] - mt) ** 2 for p in pts)
        slope = sum((p[0] - mt) * (p[1] - mr) for p in pts) / var * 60 / 1024 if var else None
    point(f"resident memory grew less than {RSS_GROWTH_BOUND_MIB} MiB after the warm-up (median of the last tenth "
          f"of the load against that of the second tenth)",
          growth is not None and growth < RSS_GROWTH_BOUND_MIB * 1024,
          f"warm {rss_warm} KiB, late {rss_late} KiB, growth {growth} KiB; start {rss_start}, peak {rss_peak}, "
          f"end {rss_end} KiB")
    point(f"file descriptors back to their count before the load (within {FD_TOLERANCE}) once the clients are done",
          fds_end is not None and fds_end <= fds_start + FD_TOLERANCE,
          f"{fds_start} before, {fds_end} after\n{fd_detail}")

    # The summary.
    by_kind = collections.defaultdict(collections.Counter)
    for r in records:
        by_kind[r["kind"]]["sent" if r["kind"] in DISCONNECT_KINDS else
                           (r["status"] if r["status"] is not None else "no answer")] += 1
    good_lat = sorted(r["seconds"] * 1000 for r in records
                      if r["kind"] in ("good_render", "good_multipart") and r["status"] == 200)
    reused = sum(1 for r in records if r.get("reused"))
    fds_all = [s["fds"] for s in samples if s["fds"] is not None]
    log_lines = d.lines[log_mark:]
    warns = sum(" warn " in l for l in log_lines)
    errors = sum(" error " in l for l in log_lines)
    print(f"# summary: {len(records)} requests in {load_s:.1f} s ({len(records) / load_s:.1f}/s), "
          f"{args.clients} clients, device {device}, seed {seed}", flush=True)
    for k, _ in args.mix:
        print(f"#   {k:15s} {sum(by_kind[k].values()):6d}  " +
              ", ".join(f"{s}: {n}" for s, n in sorted(by_kind[k].items(), key=lambda kv: str(kv[0]))), flush=True)
    frames_200 = sum(1 for r in records if r["status"] == 200)
    print(f"# answered 200: {frames_200} ({frames_200 / load_s:.1f}/s); keep-alive requests on a reused "
          f"connection: {reused}; PNGs the reference's bytes: {REFS.png_same}, decoded and compared: "
          f"{REFS.png_decoded}; WebPs the reference's bytes: {REFS.webp_same}, differing: {REFS.webp_differ}",
          flush=True)
    print(f"# good renders (200): p50 {pct(good_lat, 0.5):.1f} ms, p99 {pct(good_lat, 0.99):.1f} ms, "
          f"max {good_lat[-1] if good_lat else float('nan'):.1f} ms over {len(good_lat)}", flush=True)
    print(f"# RSS: start {(rss_start or 0) / 1024:.1f} MiB, after warm-up {(rss_warm or 0) / 1024:.1f} MiB, late "
          f"{(rss_late or 0) / 1024:.1f} MiB, peak {rss_peak / 1024:.1f} MiB, end {(rss_end or 0) / 1024:.1f} MiB; "
          f"growth {(growth or 0) / 1024:+.1f} MiB (bound {RSS_GROWTH_BOUND_MIB} MiB), trend after warm-up "
          f"{slope if slope is None else f'{slope:+.2f}'} MiB/min", flush=True)
    print(f"# fds: start {fds_start}, peak {max(fds_all) if fds_all else None}, end {fds_end}", flush=True)
    print(f"# cancelled frames {cancelled}; 499 answers {n499}; SIGHUPs {monitor.hups_sent}; /metrics scrapes "
          f"{monitor.scrapes}; daemon log during the load: {len(log_lines)} lines, {warns} warn, {errors} error",
          flush=True)

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        doc = {
            "device": device, "clients": args.clients, "seconds": seconds, "load_seconds": round(load_s, 3),
            "seed": seed, "daemon_args": daemon_args(args.clients) + extra, "warmup_fraction": WARMUP_FRACTION,
            "rss_growth_bound_mib": RSS_GROWTH_BOUND_MIB,
            "samples": samples + [{"t": round(time.monotonic() - t0, 3), "rss_kib": rss_end, "fds": fds_end,
                                   "requests": len(records), "idle": True}],
            "totals": {
                "requests": len(records), "per_second": round(len(records) / load_s, 2),
                "by_kind": {k: {str(s): n for s, n in v.items()} for k, v in by_kind.items()},
                "answered_200": frames_200, "keepalive_reused": reused,
                "png_same_bytes": REFS.png_same, "png_decoded": REFS.png_decoded,
                "webp_same_bytes": REFS.webp_same, "webp_differ": REFS.webp_differ,
                "daemon_counts": {r: {str(s): n - before[r].get(s, 0) for s, n in server[r].items()} for r in ROUTES},
                "cut_off": {k: dict(v) for k, v in cut.items()}, "cancelled": cancelled, "answers_499": n499,
                "good_render_ms": {"p50": pct(good_lat, 0.5), "p99": pct(good_lat, 0.99),
                                   "max": good_lat[-1] if good_lat else None, "count": len(good_lat)},
                "rss_kib": {"start": rss_start, "warm": rss_warm, "late": rss_late, "peak": rss_peak, "end": rss_end,
                            "growth": growth, "trend_mib_per_min": slope},
                "fds": {"start": fds_start, "peak": max(fds_all) if fds_all else None, "end": fds_end},
                "sighups": monitor.hups_sent, "scrapes": monitor.scrapes, "problems": len(bad),
            },
        }
        path = os.path.join(args.out, "soak.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"# wrote {path}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hdrpostd")
    span = ap.add_mutually_exclusive_group()
    # HDRPOST_SOAK_SECONDS: the default for a run meson starts (the ThreadSanitizer pass of deploy/debian.sh
    # runs a shorter soak: its daemon answers many times slower, and the pass has minutes, not hours).
    span.add_argument("--seconds", type=float, default=float(os.environ.get("HDRPOST_SOAK_SECONDS") or 75.0),
                      help="how long the clients run (default 75, or HDRPOST_SOAK_SECONDS)")
    span.add_argument("--minutes", type=float, help="the same in minutes")
    ap.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    ap.add_argument("--out", help="a directory for soak.json (samples and totals; tools/plot_soak.py draws it)")
    ap.add_argument("--seed", type=int, help="the seed of the clients' choices (default: from the clock, printed)")
    ap.add_argument("--args", default="", help="extra daemon flags, after the soak's own")
    ap.add_argument("--mix", help="the clients' choices by weight, KIND=WEIGHT,... (default: "
                    + ",".join(f"{k}={w}" for k, w in KINDS) + "); a kind left out is not chosen")
    args = ap.parse_args()
    if args.mix:
        mix = dict(KINDS)
        chosen = {}
        for item in args.mix.split(","):
            k, _, w = item.partition("=")
            if k not in mix or not w.isdigit():
                ap.error(f"--mix: {item!r} is not KIND=WEIGHT with KIND one of {', '.join(mix)}")
            chosen[k] = int(w)
        args.mix = [(k, w) for k, w in chosen.items() if w > 0]
        if not args.mix:
            ap.error("--mix: no kind with a weight above 0")
    else:
        args.mix = list(KINDS)
    t = time.monotonic()
    rc = harness.run_suite([args.hdrpostd], "hdrpostd-soak-", lambda tmp: soak(args, tmp))
    print(f"# {time.monotonic() - t:.1f} s", flush=True)
    return rc if rc else (1 if harness.failed() else 0)


if __name__ == "__main__":
    sys.exit(main())
