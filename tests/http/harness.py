"""What the end-to-end tests share: TAP output, a child hdrpostd whose output is read into lines by
threads (no pipe can fill up), and one HTTP exchange. Standard library only; loopback only."""

import array
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib

HOST = "127.0.0.1"
STOP_TIMEOUT_S = 60  # from the signal to the exit

# The deadlines here and in the suites are made for the plain build. Under ThreadSanitizer the daemon runs
# 5-15 times slower on lavapipe (its start-up compiles 40 pipelines), so the sanitizer passes of
# deploy/debian.sh set HDRPOST_TEST_TIME_FACTOR and every wait for something to happen stretches by it: a
# bound on how long to wait, never the thing checked. A point that asserts something does *not* happen within
# a time waits longer too, which only makes it stricter.
TIME_FACTOR = max(1.0, float(os.environ.get("HDRPOST_TEST_TIME_FACTOR") or 1))


def scaled(seconds):
    """A deadline of the plain build stretched for a sanitizer build (TIME_FACTOR)."""
    return seconds * TIME_FACTOR


# HDRPOST_TEST_QUICK=1: a suite runs only its groups that set the daemon's threads against each other (frames
# in flight while clients hang up, drains, floods, loads), each suite naming them beside its list of groups.
# For the ThreadSanitizer pass of deploy/debian.sh, where every daemon takes a minute to start on lavapipe: the
# plain and ASan passes run every group. Unset or 0: every group.
QUICK = os.environ.get("HDRPOST_TEST_QUICK", "") not in ("", "0")


def groups(all_groups, quick):
    """The groups to run: all_groups, or under QUICK those of them in quick (a note says which are left out)."""
    if not QUICK:
        return list(all_groups)
    left = [getattr(g, "__name__", str(g)) for g in all_groups if g not in quick]
    if left:
        print(f"# HDRPOST_TEST_QUICK: left out {', '.join(left)}", flush=True)
    return [g for g in all_groups if g in quick]

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
    """The test's environment without HDRPOST_* (an operator's settings must not leak into the daemon).
    HDRPOST_TEST_PRELOAD becomes the children's LD_PRELOAD alone (the sanitizer pass of deploy/debian.sh: the
    ASan runtime and the Vulkan driver, kept loaded so that its memory is not reported leaked once the loader
    unloads it), not the test's own, whose interpreter is not built with ASan."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HDRPOST_") and k != "NOTIFY_SOCKET"}
    if os.environ.get("HDRPOST_TEST_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["HDRPOST_TEST_PRELOAD"]
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
        deadline = time.monotonic() + scaled(timeout)
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
            rc = self.proc.wait(timeout=None if timeout is None else scaled(timeout))
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

    def __init__(self, exe, label, args=(), env=None, ready_timeout=60, port=None):
        self.port = port or free_port()
        self.ready_timeout = scaled(ready_timeout)
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
            return request(self.port, "GET", "/livez", timeout=scaled(5))[0] == 200
        except OSError:
            return False


def start_ready(exe, label, args=(), env=None, ready_timeout=60, port=None):
    """A Daemon that is ready, or None after a failed test point."""
    d = Daemon(exe, label, args, env, ready_timeout, port)
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


@contextlib.contextmanager
def serving(d):
    """A daemon from start_ready (or None) for a with block, stopped cleanly at its end."""
    try:
        yield d
    finally:
        if d:
            stop_clean(d)


def run_suite(executables, prefix, body):
    """A suite's frame: every executable it needs is there (else one failed point), body(tmp) runs in a
    temporary directory, an exception is one failed point, and the plan closes the TAP. The exit status."""
    for exe in executables:
        if not os.access(exe, os.X_OK):
            print(f"not ok 1 - {exe} is built and executable\n1..1", flush=True)
            return 1
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            body(tmp)
        except Exception:
            point("the test harness ran to the end", False, traceback.format_exc())
    print(f"1..{count()}", flush=True)
    return 0


def validation_lines(daemon):
    """Lines the validation layer produced (gpu.c logs them as 'vulkan validation: [VUID-...] ...')."""
    return [l for l in daemon.log().splitlines()
            if re.search(r"vulkan validation|VUID-|Validation (Error|Warning)", l, re.I)]


# --- HTTP ------------------------------------------------------------------------------------------------


def read_to_end(sock):
    """Every byte a socket gives until its peer closes it."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def request(port, method, path, body=None, headers=None, timeout=5):
    """(status, lower-cased headers, body) of one exchange on a fresh connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=scaled(timeout))
    try:
        if body is None and method in ("POST", "PUT"):
            body = b""
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def post_trickled(port, body, query, pieces=8, gap_s=0.05, timeout=120):
    """(status, body) of a POST /v1/render whose body is sent in pieces with pauses: the early decoder waits
    for each chunk's bytes, and the frame is on its way for pieces x gap_s."""
    with socket.create_connection((HOST, port), timeout=scaled(timeout)) as s:
        s.sendall(f"POST /v1/render?{query} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode())
        step = (len(body) + pieces - 1) // pieces
        for at in range(0, len(body), step):
            s.sendall(body[at:at + step])
            time.sleep(gap_s)
        status, _, data = read_response(s)
        return status, data


def metric(port, name, headers=None):
    """The value of one /metrics exposition line (name with its labels), or None."""
    try:
        _, _, body = request(port, "GET", "/metrics", headers=headers, timeout=scaled(10))
    except OSError:
        return None
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


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


# --- PNG --------------------------------------------------------------------------------------------------


class PngError(Exception):
    pass


def multipart(parts):
    """parts: [(name, bytes, filename or None[, content type])] -> (body, Content-Type). A part without a
    content type has no Content-Type line."""
    boundary = "hdrpostd-test-" + os.urandom(12).hex()
    out = []
    for name, data, filename, *ctype in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        head = f"Content-Disposition: {disp}\r\n" + (f"Content-Type: {ctype[0]}\r\n" if ctype else "")
        out.append(f"--{boundary}\r\n{head}\r\n".encode())
        out.append(data)
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def webp_size(data):
    """(width, height) from a WebP's RIFF header and first chunk (VP8, VP8L or VP8X), or None."""
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    if struct.unpack("<I", data[4:8])[0] + 8 != len(data):
        return None
    fourcc, payload = data[12:16], data[20:]
    if fourcc == b"VP8 ":
        if payload[3:6] != b"\x9d\x01\x2a":
            return None
        w, h = struct.unpack("<HH", payload[6:10])
        return w & 0x3FFF, h & 0x3FFF
    if fourcc == b"VP8L":
        if payload[0] != 0x2F:
            return None
        bits = struct.unpack("<I", payload[1:5])[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if fourcc == b"VP8X":
        w = int.from_bytes(payload[4:7], "little") + 1
        h = int.from_bytes(payload[7:10], "little") + 1
        return w, h
    return None


def png_decode(data):
    """A non-interlaced RGB or RGBA PNG of 8 or 16 bits -> (width, height, channels, bit_depth, samples) with
    samples a bytes (8-bit) or an array('H') (16-bit), row after row."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise PngError("no PNG signature")
    pos, ihdr, idat = 8, None, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if zlib.crc32(kind + chunk) != crc:
            raise PngError(f"bad CRC on chunk {kind!r}")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if not ihdr or not idat:
        raise PngError("no IHDR or IDAT")
    width, height, depth, ctype, _, _, interlace = ihdr
    channels = {2: 3, 6: 4}.get(ctype)
    if channels is None or depth not in (8, 16) or interlace != 0:
        raise PngError(f"unsupported colour type {ctype}, depth {depth}, interlace {interlace}")
    bpp = channels * depth // 8
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != height * (stride + 1):
        raise PngError(f"{len(raw)} bytes of image data, expected {height * (stride + 1)}")
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 0:
            pass
        elif ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        else:
            raise PngError(f"filter type {ftype} on row {y}")
        out[y * stride:(y + 1) * stride] = line
        prev = line
    if depth == 16:
        samples = array.array("H", bytes(out))
        if sys.byteorder == "little":
            samples.byteswap()  # PNG is big-endian
        return width, height, channels, depth, samples
    return width, height, channels, depth, bytes(out)


# --- Colour, written independently of pipeline/colorspace.c ----------------------------------------------
# The normalized primary matrix of SMPTE RP 177 and the Bradford adaptation (Lindbloom, "Chromatic
# Adaptation"), in double: the HTTP tests' own arithmetic for the daemon's colour spaces.


def mat_mul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def mat_vec(m, v):
    return [sum(m[i][k] * v[k] for k in range(3)) for i in range(3)]


def mat_inv(m):
    (a, b, c), (d, e, f), (g, h, i) = m
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    return [[(e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det],
            [(f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det],
            [(d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det]]


def xyz(x, y):
    return [x / y, 1.0, (1 - x - y) / y]


def rgb_to_xyz_d65(c):
    prim = [[xyz(c[0], c[1])[r], xyz(c[2], c[3])[r], xyz(c[4], c[5])[r]] for r in range(3)]
    w = xyz(c[6], c[7])
    scale = mat_vec(mat_inv(prim), w)
    npm = [[prim[r][k] * scale[k] for k in range(3)] for r in range(3)]
    bradford = [[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]]
    src, dst = mat_vec(bradford, w), mat_vec(bradford, xyz(0.3127, 0.3290))
    cone = [[dst[i] / src[i] if i == j else 0.0 for j in range(3)] for i in range(3)]
    return mat_mul(mat_inv(bradford), mat_mul(cone, mat_mul(bradford, npm)))
