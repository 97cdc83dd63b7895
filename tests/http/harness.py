"""What the end-to-end tests share: TAP output, a child hdrpostd whose output is read into lines by
threads (no pipe can fill up), and one HTTP exchange. Standard library only; loopback only."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
STOP_TIMEOUT_S = 60  # from the signal to the exit

# --- TAP -------------------------------------------------------------------------------------------------

_count = 0
_failed = 0


def point(name, ok, detail=""):
    """One test point; detail goes out as TAP diagnostics when it fails."""
    global _count, _failed
    _count += 1
    ok = bool(ok)
    if not ok:
        _failed += 1
    print(f"{'ok' if ok else 'not ok'} {_count} - {name}", flush=True)
    if not ok and detail:
        for line in str(detail).splitlines()[-40:]:
            print(f"# {line}", flush=True)
    return ok


def count():
    return _count


def failed():
    return _failed


# --- The daemon ------------------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def clean_env(extra=None):
    """The test's environment without HDRPOST_* (an operator's settings must not leak into the daemon)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HDRPOST_") and k != "NOTIFY_SOCKET"}
    env.update(extra or {})
    return env


def device_args():
    dev = os.environ.get("HDRPOST_TEST_DEVICE")
    return [f"--device={dev}"] if dev else []


class Child:
    """A child process whose stderr lines (the daemon's log) and stdout lines are collected by threads."""

    def __init__(self, label, argv, env=None):
        self.label = label
        self.lines = []
        self.stdout = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=clean_env(env), text=True, errors="replace")
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stderr, self.lines), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True)]
        for t in self.readers:
            t.start()

    def _read(self, stream, into):
        for line in stream:
            with self.cond:
                into.append(line.rstrip("\n"))
                self.cond.notify_all()

    def log(self):
        with self.cond:
            return "\n".join(self.lines)

    def wait_line(self, pattern, timeout):
        """The first stderr line matching pattern, waiting up to timeout seconds; None if none came."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if rx.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not any(t.is_alive() for t in self.readers):
                    return None
                self.cond.wait(min(left, 0.2))

    def wait_exit(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for t in self.readers:
            t.join(timeout=5)
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait_exit(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.wait_exit(10)

    def dump(self):
        """The daemon's log on stderr: meson test -v shows it beside the TAP."""
        sys.stderr.write(f"----- hdrpostd log: {self.label} -----\n{self.log()}\n")
        sys.stderr.flush()


class Daemon(Child):
    """hdrpostd on a free loopback port with the validation layer on, no pipeline cache, logging at info and
    the test's device; args and env are added."""

    def __init__(self, exe, label, args=(), env=None, ready_timeout=60):
        self.port = free_port()
        self.ready_timeout = ready_timeout
        super().__init__(label, [exe, f"--listen={HOST}:{self.port}", "--validation", "--pipeline_cache=",
                                 "--log_level=info", *device_args(), *args], env)

    def wait_ready(self):
        """Polls /readyz until 200 (bounded); True when it came."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if request(self.port, "GET", "/readyz", timeout=5)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def alive(self):
        try:
            return request(self.port, "GET", "/livez", timeout=5)[0] == 200
        except OSError:
            return False


def start_ready(exe, label, args=(), env=None, ready_timeout=60):
    """A Daemon that is ready, or None after a failed test point."""
    d = Daemon(exe, label, args, env, ready_timeout)
    if point(f"{label}: the daemon becomes ready (/readyz 200)", d.wait_ready(), d.log()):
        return d
    d.kill()
    d.dump()
    return None


def stop_clean(d):
    """SIGTERM; the exit code must be 0 and the log free of validation-layer messages."""
    rc = d.stop()
    bad = validation_lines(d)
    point(f"{d.label}: SIGTERM exits 0 with no validation-layer message", rc == 0 and not bad,
          f"exit code {rc}\n" + "\n".join(bad or d.log().splitlines()[-20:]))
    d.kill()
    d.dump()


def validation_lines(daemon):
    """Lines the validation layer produced (gpu.c logs them as 'vulkan validation: [VUID-...] ...')."""
    return [l for l in daemon.log().splitlines()
            if re.search(r"vulkan validation|VUID-|Validation (Error|Warning)", l, re.I)]


# --- HTTP ------------------------------------------------------------------------------------------------


def request(port, method, path, body=None, headers=None, timeout=5):
    """(status, lower-cased headers, body) of one exchange on a fresh connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        if body is None and method in ("POST", "PUT"):
            body = b""
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def json_body(body):
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def read_response(sock):
    """Status, lower-cased headers and body of one HTTP/1.1 response read from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError(f"connection closed after {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body
