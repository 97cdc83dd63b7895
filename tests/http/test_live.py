"""The routes a person's tools read (issue 18), end to end over HTTP on 127.0.0.1: GET /v1/stats (the last
minute), GET /v1/params (the parameter table as data), and the console's files with their headers and the
`console` setting. The page itself is tested in a browser by test_console.mjs.

Usage: test_live.py PATH/TO/hdrpostd. Prints TAP."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import free_port, json_body, point, request, run_suite, scaled, serving, start_ready  # noqa: E402

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TOKEN = "live-test-token"
CSP_MUST = ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'")


def data(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def stats(port, headers=None):
    status, _, body = request(port, "GET", "/v1/stats", headers=headers)
    return status, json_body(body) or {}


def live_window(d):
    """Frames and errors show up in the window, probes and polling do not."""
    s0, before = stats(d.port)
    point("/v1/stats answers 200 and says ready, the device and the queue", s0 == 200 and before.get("ready") is True
          and before.get("state") == "ready" and before.get("reason") is None and
          (before.get("device") or {}).get("name") and (before.get("queue") or {}).get("capacity") == 16 and
          before.get("window_s") == 60 and before.get("version"), f"{s0} {before}")
    frame = data("pmndrs_park.hdr")
    for _ in range(3):
        request(d.port, "POST", "/v1/render?output.format=png", frame, timeout=60)
    request(d.port, "POST", "/v1/render?tonemap.operator=nope", frame)
    for _ in range(5):  # polling and probes
        request(d.port, "GET", "/readyz")
        request(d.port, "GET", "/v1/stats")
    # A request is counted at its completion, which libmicrohttpd may reach just after the client has read
    # the answer (CI saw the refusal not yet counted once, under ASan): read until the counts come, at most 5 s
    # (harness.scaled).
    was = {k: sum((before.get("per_second") or {}).get(k) or []) for k in ("frames", "requests", "errors")}
    deadline = time.monotonic() + scaled(5)
    while True:
        s1, after = stats(d.port)
        ps = after.get("per_second") or {}
        frames = sum(ps.get("frames") or [])
        requests = sum(ps.get("requests") or [])
        errors = sum(ps.get("errors") or [])
        counted = (frames - was["frames"], requests - was["requests"], errors - was["errors"]) == (3, 4, 1)
        if counted or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    point("three renders and one refused request: 3 frames, 4 requests and 1 error in the last minute's seconds; "
          "the polling and the probes are not counted",
          s1 == 200 and counted and len(ps.get("frames") or []) == 60 and
          abs(after.get("frames_per_s", 0) * 60 - frames) < 1e-9,
          f"frames {frames} requests {requests} errors {errors} {ps.get('frames')}")
    recent = (after.get("recent_errors") or [{}])[0]
    point("the refusal is the newest recent error, with its code, message and path, and counted by code",
          recent.get("code") == "invalid_parameter" and "tonemap.operator" in recent.get("message", "") and
          recent.get("path") == "/v1/render" and recent.get("status") == 400 and
          (after.get("errors_by_code") or {}).get("invalid_parameter") == 1 and
          (after.get("status_counts") or {}).get("200", 0) >= 3, f"{after.get('recent_errors')} "
          f"{after.get('errors_by_code')} {after.get('status_counts')}")
    st = after.get("stages_ms") or {}
    series = (ps.get("stages_ms") or {}).get("total") or []
    point("each stage's p50 <= p99 over the frames, and the per-second mean of total for the seconds with frames",
          all(k in st and st[k]["count"] == 3 and 0 <= st[k]["p50"] <= st[k]["p99"] for k in
              ("recv", "decode", "upload", "reduce", "tonemap", "download", "encode", "total")) and
          len(series) == 60 and any(v is not None and v > 0 for v in series), f"{st} {series}")


def params_table(d):
    s, _, body = request(d.port, "GET", "/v1/params")
    doc = json_body(body) or {}
    params = {p.get("name"): p for p in doc.get("parameters") or []}
    # The defaults as the daemon applies them: a render's JSON answer echoes every parameter.
    s2, _, echo = request(d.port, "POST", "/v1/render", data("pmndrs_park.hdr"),
                          headers={"Accept": "application/json"}, timeout=60)
    effective = (json_body(echo) or {}).get("params") or {}

    def lookup(name):
        node = effective
        for part in name.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    wrong = [n for n, p in params.items() if p.get("default") != lookup(n)]
    point("GET /v1/params lists every parameter, each default equal to what a render applies",
          s == 200 and s2 == 200 and len(params) > 60 and not wrong, f"{s} {s2} {len(params)} wrong {wrong[:5]}")
    op = params.get("tonemap.operator") or {}
    key = params.get("exposure.key") or {}
    depth = params.get("output.bit_depth") or {}
    point("a choice lists its choices, a number its range and unit, an integer with a list its values",
          op.get("type") == "enum" and "agx" in op.get("choices", []) and op.get("group") == "tonemap" and
          key.get("type") == "number_or_auto" and ("minimum" in key or "exclusiveMinimum" in key) and
          depth.get("choices") == [8, 10, 12, 16] and all(p.get("description") for p in params.values()),
          f"{op} {key} {depth}")
    looks = {l.get("name"): l for l in doc.get("looks") or []}
    rules = doc.get("rules") or []
    point("the looks with what they set, and the rules across fields with the parameter each names",
          (looks.get("blender") or {}).get("sets", {}).get("tonemap.operator") == "agx" and "default" in looks and
          any(r.get("field") == "output.colorspace" for r in rules) and all(r.get("field") in params for r in rules),
          f"{list(looks)} {rules[:3]}")


def rebinding(d, token=None):
    """Without a token on loopback, only requests addressed to this machine's loopback names are answered: a page
    elsewhere that rebinds its own name to 127.0.0.1 still sends that name as Host (DNS rebinding)."""
    evil = request(d.port, "GET", "/v1/stats", headers={"Host": f"attacker.example:{d.port}"})
    local = [request(d.port, "GET", "/", headers={"Host": h})[0] for h in
             (f"localhost:{d.port}", f"127.0.0.1:{d.port}", "LOCALHOST", f"127.3.4.5:{d.port}")]
    if token:
        point("with a token, a request addressed to another name goes on to the token check (401)",
              evil[0] == 401, f"{evil[0]} {evil[2][:200]!r}")
        return
    err = (json_body(evil[2]) or {}).get("error") or {}
    point("without a token, a request addressed to another name (DNS rebinding) is 400 bad_host saying why; "
          "localhost, 127.0.0.0/8 and any port are answered",
          evil[0] == 400 and err.get("code") == "bad_host" and "rebinding" in err.get("message", "") and
          local == [200, 200, 200, 200], f"{evil[0]} {err} {local}")


def console_files(d, token=None):
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    rebinding(d, token)
    s, h, body = request(d.port, "GET", "/")
    csp = h.get("content-security-policy", "")
    point("GET / answers the console's page, without a token, with a strict CSP, nosniff and no framing",
          s == 200 and h.get("content-type", "").startswith("text/html") and b"<html" in body.lower() and
          all(c in csp for c in CSP_MUST) and h.get("x-content-type-options") == "nosniff" and
          h.get("x-frame-options") == "DENY", f"{s} {h}")
    etag = h.get("etag", "")
    s304, h304, b304 = request(d.port, "GET", "/", headers={"If-None-Match": etag})
    point("the page says Cache-Control no-cache with an ETag, and the same ETag back is 304 with no body",
          h.get("cache-control") == "no-cache" and len(etag) > 8 and s304 == 304 and b304 == b"" and
          h304.get("etag") == etag, f"{h.get('cache-control')} {etag} {s304} {b304[:100]!r}")
    s, h, _ = request(d.port, "HEAD", "/console/index.html")
    point("HEAD /console/index.html: 200 with the page's type", s == 200 and
          h.get("content-type", "").startswith("text/html"), f"{s} {h}")
    s, h, body = request(d.port, "GET", "/console/no-such-file.js")
    err = (json_body(body) or {}).get("error") or {}
    point("a file the console does not have: 404 not_found naming it", s == 404 and err.get("code") == "not_found"
          and "no-such-file.js" in err.get("message", ""), f"{s} {body[:200]!r}")
    s, _, _ = request(d.port, "POST", "/", b"x")
    point("POST / is 405", s == 405, f"{s}")
    if token:
        s1, _, _ = request(d.port, "GET", "/v1/stats")
        s2, _, _ = request(d.port, "GET", "/v1/params")
        s3, _, _ = request(d.port, "GET", "/v1/stats", headers=auth)
        point("with a token the console's files stay open, while /v1/stats and /v1/params need it (401, then 200)",
              s1 == 401 and s2 == 401 and s3 == 200, f"{s1} {s2} {s3}")


def probe_listener(exe):
    """The probe listener answers /livez and /readyz alone: not the console, whose files are open."""
    port = free_port()
    with serving(start_ready(exe, "probe listener", [f"--probe_listen=127.0.0.1:{port}", "--metrics_open"])) as d:
        if not d:
            return
        s1, _, _ = request(port, "GET", "/readyz")
        s2, _, _ = request(port, "GET", "/")
        s3, _, _ = request(port, "GET", "/console/index.html")
        s4, _, _ = request(port, "GET", "/metrics")
        point("the probe listener answers /readyz and 404 for the console's page, its files and an open /metrics",
              s1 == 200 and s2 == s3 == s4 == 404, f"{s1} {s2} {s3} {s4}")


def console_off(exe):
    with serving(start_ready(exe, "console off", ["--console=off"])) as d:
        if not d:
            return
        s, h, body = request(d.port, "GET", "/")
        err = (json_body(body) or {}).get("error") or {}
        point("console = off: GET / is 404 saying the console is off, and the API still answers",
              s == 404 and "console is off" in err.get("message", "") and
              request(d.port, "GET", "/v1/params")[0] == 200, f"{s} {body[:200]!r}")


def live(exe):
    with serving(start_ready(exe, "live")) as d:
        if d:
            live_window(d)
            params_table(d)
            console_files(d)


def live_with_token(exe):
    with serving(start_ready(exe, "live with a token", ["--auth_token=" + TOKEN])) as d:
        if d:
            console_files(d, TOKEN)


def console_auto(exe):
    """auto: on for loopback (above), off on any other address. Bound to every interface, but asked only
    through 127.0.0.1 like every test here."""
    port = free_port()
    with serving(start_ready(exe, "console auto on 0.0.0.0", [f"--listen=0.0.0.0:{port}",
                                                               "--auth_token=" + TOKEN], port=port)) as d:
        if d:
            s, _, body = request(d.port, "GET", "/")
            point("console = auto with listen on 0.0.0.0: no console (404)", s == 404, f"{s} {body[:200]!r}")


# Under HDRPOST_TEST_QUICK (the ThreadSanitizer pass): the probe listener, started beside the API's listener
# while that one already answers (where TSan found a race, docs/RELIABILITY.md "Threads").
QUICK = (probe_listener,)


def main():
    def body(tmp):
        for group in harness.groups((live, live_with_token, console_off, probe_listener, console_auto), QUICK):
            group(EXE)

    return run_suite([EXE], "hdrpost-live-", body)


if __name__ == "__main__":
    sys.exit(main())
