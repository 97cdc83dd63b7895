#!/usr/bin/env python3
"""hdrpostd's request path under hostile input (docs/SECURITY.md): one group of test points per item of the
hardening list there, each against the real daemon on 127.0.0.1 (lavapipe in CI, the validation layer on).

Usage: test_security.py PATH/TO/hdrpostd. Prints TAP. Every daemon must answer /livez after each attack
and stop on SIGTERM with exit code 0 and no validation-layer message. Connections and bytes sent are
bounded; only the loopback address is used. Standard library only.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
HOST = "127.0.0.1"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60

from harness import Child, device_args, free_port, json_body, point, validation_lines  # noqa: E402
import harness  # noqa: E402

TOKEN = "s3cret-token-never-logged-7f3a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Daemon(Child):
    """hdrpostd on a free loopback port with the validation layer on and no pipeline cache."""

    def __init__(self, label, args=(), env=None, port=None):
        self.port = port or free_port()
        super().__init__(label, [EXE, f"--listen={HOST}:{self.port}", "--validation", "--pipeline_cache=",
                                 *device_args(), *args], env)

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if harness.request(self.port, "GET", "/readyz", timeout=2)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def alive(self):
        try:
            return harness.request(self.port, "GET", "/livez", timeout=5)[0] == 200
        except OSError:
            return False


def start(label, args=(), env=None):
    """A daemon that is ready, or None after a failed test point."""
    d = Daemon(label, args, env)
    if point(f"{label}: the daemon becomes ready", d.wait_ready(), d.log()):
        return d
    d.kill()
    d.dump()
    return None


def stop(d):
    rc = d.stop()
    bad = validation_lines(d)
    point(f"{d.label}: SIGTERM exits 0 with no validation-layer message", rc == 0 and not bad,
          f"exit code {rc}\n" + "\n".join(bad or d.log().splitlines()[-20:]))
    d.kill()
    d.dump()


def post(port, path, body, headers=None, timeout=60):
    h = dict(AUTH)
    h.update(headers or {})
    return harness.request(port, "POST", path, body, h, timeout)


def multipart(parts):
    """parts: [(name, bytes, filename or None)] -> (body, Content-Type)."""
    boundary = "hdrpostd-sec-" + os.urandom(8).hex()
    out = []
    for name, data, filename in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.append(f"--{boundary}\r\nContent-Disposition: {disp}\r\n\r\n".encode())
        out.append(data)
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def error_of(status, body, want_status, code, field="any"):
    """The error object when the answer is the API's JSON error with this status, code and field."""
    doc = json_body(body)
    if status != want_status or not isinstance(doc, dict) or not isinstance(doc.get("error"), dict):
        return None
    err = doc["error"]
    if err.get("code") != code or (field != "any" and err.get("field") != field):
        return None
    return err


def raw_exchange(port, data, timeout=10):
    """Sends bytes on a fresh connection and reads until the server closes it or timeout: the whole reply."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
    return out


def status_of(reply):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
    return int(m.group(1)) if m else None


def body_of(reply):
    return reply.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in reply else b""


def frame_bytes(name="pmndrs_park.exr"):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


# --- 1. Empty and repeated form parts ----------------------------------------------------------------------


def empty_parts(d):
    exr = frame_bytes()
    cases = [
        ("an empty frame part", [("frame", b"", "empty.exr")], 400, "missing_frame", "frame"),
        ("an empty frame part beside params", [("params", b"{}", None), ("frame", b"", "e.exr")], 400,
         "missing_frame", "frame"),
        ("an empty params part", [("params", b"", None), ("frame", exr, "f.exr")], 400, "empty_part", "params"),
        ("an empty depth part", [("frame", exr, "f.exr"), ("depth", b"", "d.exr")], 400, "empty_part", "depth"),
        ("an empty params part alone", [("params", b"", None)], 400, "missing_frame", "frame"),
    ]
    for label, parts, status, code, field in cases:
        for route in ("/v1/render", "/v1/analyze"):
            body, ctype = multipart(parts)
            try:
                s, _, b = post(d.port, route, body, {"Content-Type": ctype})
            except OSError as e:
                s, b = None, str(e).encode()
            point(f"1. {label} to {route} is answered {status} {code} naming {field}, and the daemon lives",
                  error_of(s, b, status, code, field) and d.alive(), f"{s} {b[:300]!r}")
    # curl -F frame=@/dev/null: the request of the report, byte for byte as curl sends it.
    body = (b"--------------------------abc\r\nContent-Disposition: form-data; name=\"frame\"; filename=\"null\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n\r\n--------------------------abc--\r\n")
    s, _, b = post(d.port, "/v1/render", body,
                   {"Content-Type": "multipart/form-data; boundary=------------------------abc"})
    point("1. curl -F frame=@/dev/null (the report's request) is answered 400 missing_frame",
          error_of(s, b, 400, "missing_frame", "frame") and d.alive(), f"{s} {b[:300]!r}")


def repeated_parts(d):
    exr = frame_bytes()
    half = len(exr) // 2
    cases = [
        ("an EXR split over two frame parts", [("frame", exr[:half], "a"), ("frame", exr[half:], "b")], "frame"),
        ("two params parts", [("params", b"{}", None), ("params", b"{}", None), ("frame", exr, "f")], "params"),
        ("two depth parts", [("frame", exr, "f"), ("depth", exr, "d"), ("depth", exr, "d")], "depth"),
        ("an empty frame part then a full one", [("frame", b"", "a"), ("frame", exr, "b")], "frame"),
    ]
    for label, parts, field in cases:
        body, ctype = multipart(parts)
        s, _, b = post(d.port, "/v1/render", body, {"Content-Type": ctype})
        point(f"10. {label}: 400 duplicate_part naming {field}", error_of(s, b, 400, "duplicate_part", field),
              f"{s} {b[:300]!r}")


# --- 2. Secrets stay out of the log ----------------------------------------------------------------------


def secrets_not_logged(tmp):
    conf = os.path.join(tmp, "secret.conf")
    with open(conf, "w") as f:
        f.write(f"auth_token = {TOKEN}-file\n")
    sources = [
        ("environment", [], {"HDRPOST_AUTH_TOKEN": TOKEN + "-env"}, TOKEN + "-env"),
        ("flag", [f"--auth_token={TOKEN}-flag"], None, TOKEN + "-flag"),
        ("config file", [f"--config={conf}"], None, TOKEN + "-file"),
    ]
    for label, args, env, token in sources:
        d = Daemon(f"token from the {label}", [*args, "--log_level=debug", "--warm_frame=none"], env)
        try:
            d.wait_line(r"http: listening", READY_TIMEOUT_S)
            line = d.wait_line(r"config: auth_token", 5) or ""
            # A request with a wrong token and one with the right one: neither may echo it either.
            harness.request(d.port, "GET", "/v1/gpu", headers={"Authorization": "Bearer wrong-" + token})
            harness.request(d.port, "GET", "/v1/gpu", headers={"Authorization": "Bearer " + token})
            rc = d.stop()
            log = d.log()
            point(f"2. a token from the {label} is logged as (set), never its value",
                  "(set)" in line and token not in log and TOKEN not in log and rc == 0, line + "\n" + log[-1500:])
        finally:
            d.kill()


# --- 3. No token, no network -----------------------------------------------------------------------------


def refuse_open_listen():
    for listen in ("0.0.0.0:0", "[::]:0"):
        d = Child("open listen", [EXE, f"--listen={listen}", "--pipeline_cache=", *device_args()])
        rc = d.wait_exit(30)
        point(f"3. listen={listen} without a token: exit 2 with a message naming auth_token and allow_no_auth",
              rc == 2 and re.search(r"not a loopback address.*auth_token.*allow_no_auth", d.log()), d.log())
        d.kill()
    d = Child("open listen allowed", [EXE, "--listen=0.0.0.0:0", "--allow_no_auth", "--pipeline_cache=",
                                      "--warm_frame=none", *device_args()])
    line = d.wait_line(r"http: listening on 0\.0\.0\.0:\d+", 30)
    point("3. with --allow_no_auth it listens on 0.0.0.0", line is not None, d.log())
    rc = d.stop()
    point("3. ... and stops cleanly", rc == 0, d.log())
    d.kill()
    d = Child("open listen with token", [EXE, "--listen=0.0.0.0:0", "--pipeline_cache=", "--warm_frame=none",
                                         *device_args()], {"HDRPOST_AUTH_TOKEN": TOKEN})
    line = d.wait_line(r"http: listening on 0\.0\.0\.0:\d+", 30)
    point("3. with a token it listens on 0.0.0.0", line is not None, d.log())
    d.stop()
    d.kill()


def main():
    if not os.access(EXE, os.X_OK):
        print("not ok 1 - hdrpostd is built and executable: " + EXE)
        print("1..1")
        return 1
    with tempfile.TemporaryDirectory(prefix="hdrpostd-sec-") as tmp:
        try:
            secrets_not_logged(tmp)
            refuse_open_listen()
            d = start("forms", env={"HDRPOST_AUTH_TOKEN": TOKEN})
            if d:
                try:
                    empty_parts(d)
                    repeated_parts(d)
                finally:
                    stop(d)
        except Exception:
            point("the test harness ran to the end", False, traceback.format_exc())
    print(f"1..{harness.count()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
