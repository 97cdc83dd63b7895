#!/usr/bin/env python3
"""hdrpostd end to end: POST /v1/render and /v1/analyze over HTTP on 127.0.0.1, checked against the CPU
reference (tools/cpu_render).

Usage: test_render.py PATH/TO/hdrpostd PATH/TO/cpu_render. Prints TAP, one test point per behaviour.
Every daemon runs with --validation and --pipeline_cache= (none); each must stop on SIGTERM with exit
code 0 and no validation-layer message on its stderr. Settings that change (limits, the bearer token, a
tiny queue, a short deadline) get daemons of their own. HDRPOST_TEST_DEVICE, when set, is passed as
--device. Standard library only: the PNG decoder and the WebP header parser are below.

The images are compared with cpu_render's at the 8-bit level (99.9% of the values identical, none off by
more than 1) or the 16-bit level (99% identical, at most one value in a million off by more than 1); the
statistics within 1e-4 relative, the histogram bin for bin. request_timeout_s has a minimum of 0.1 s, so
the deadline daemon uses that.

Dropped, expired and drained frames need frames that take long on the GPU, which an H200 does not give:
the daemons of those tests run with --test_gpu_delay_ms (the GPU thread sleeps that long before each
frame it runs, after checking its deadline and its client), so they hold on any GPU.

The multi-layer OpenEXR is written here (uncompressed scanlines, float channels): one layer holds the
pixels of pmndrs_park.pfm exactly, so cpu_render on the PFM is the reference for that layer.
"""

import array
import base64
import http.client
import json
import math
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

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
CPU_RENDER = sys.argv[2] if len(sys.argv) > 2 else "cpu_render"
MAKE_FRAME = sys.argv[3] if len(sys.argv) > 3 else "make_frame"
WEBP_TO_RGBA = sys.argv[4] if len(sys.argv) > 4 else "webp_to_rgba"
HOST = "127.0.0.1"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
# The plain build's deadlines; every wait stretches them by HDRPOST_TEST_TIME_FACTOR (harness.scaled: the
# harness's request, start_ready, wait_line and wait_exit do it themselves, and are given these as they are).
START_TIMEOUT_S = 60     # from the start to /readyz 200
STOP_TIMEOUT_S = 60      # from SIGTERM to the exit
REQUEST_TIMEOUT_S = 120  # one HTTP exchange, the whole way (a frame takes well under a second)
CPU_TIMEOUT_S = 120      # one cpu_render run
# The GPU thread's sleep before each frame for the tests of dropped, expired and drained frames: long
# against decoding a 512x256 frame (about 10 ms) and a hung-up client's 0.15 s, short enough that a
# queue of six frames drains in a few seconds. It is the tests' pacing, not something under test: it
# stretches with HDRPOST_TEST_TIME_FACTOR like the sleeps it is set against (a sanitizer build decodes
# many times slower), so that the order of events those points make holds; at factor 1 it is 500 (set
# below the harness's import).

# The error code for a bad request parameter: docs/API.md and api/frames/render.c say invalid_parameter (the text
# of docs/PARAMETERS.md, from pipeline/params.c, still says invalid_argument).
PARAM_ERROR = "invalid_parameter"

PHASES = ["recv", "decode", "queue", "upload", "reduce", "tonemap", "download", "encode", "total"]

from harness import (PngError, json_body, mat_inv, mat_mul, mat_vec, multipart, png_decode, point,  # noqa: E402
                     rgb_to_xyz_d65, scaled, validation_lines, webp_size)
import harness  # noqa: E402

SLOW_GPU_MS = int(500 * harness.TIME_FACTOR)


def gpu_delay(ms):
    """--test_gpu_delay_ms stretched as SLOW_GPU_MS is, for the points that set a sleep of their own against it."""
    return f"--test_gpu_delay_ms={int(ms * harness.TIME_FACTOR)}"


def start(label, extra_args=()):
    """A daemon that is ready, or None after a failed test point."""
    return harness.start_ready(EXE, label, extra_args, ready_timeout=START_TIMEOUT_S)


stop = harness.stop_clean


# --- HTTP ------------------------------------------------------------------------------------------------


def request(port, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT_S):
    return harness.request(port, method, path, body, headers, timeout)


def frame_part(data, name="frame", filename="frame.exr"):
    return (name, data, filename, "application/octet-stream")


def params_part(params):
    return ("params", json.dumps(params).encode(), None, "application/json")


def is_error(status, body, want_status, code, field="any"):
    """The one error shape {"error": {"code", "message", "field"}} with the status, code and (unless
    field is "any") field wanted. Returns the error object or None."""
    doc = json_body(body)
    if status != want_status or not isinstance(doc, dict) or set(doc) != {"error"}:
        return None
    err = doc["error"]
    if not isinstance(err, dict) or set(err) != {"code", "message", "field"}:
        return None
    if err["code"] != code or not isinstance(err["message"], str) or not err["message"]:
        return None
    if not (err["field"] is None or isinstance(err["field"], str)):
        return None
    if field != "any" and err["field"] != field:
        return None
    return err


def raw_exchange(port, head, timeout=10):
    """Sends head (bytes) on a raw socket and reads one response: (status, headers, body)."""
    with socket.create_connection((HOST, port), timeout=scaled(timeout)) as s:
        s.sendall(head)
        return harness.read_response(s)


def concurrently(fns, timeout=REQUEST_TIMEOUT_S + 30):
    """Runs every fn at once (threads released together by a barrier); returns [(result, exception)]. The
    barrier's wait and the overall deadline are stretched by harness.scaled."""
    barrier = threading.Barrier(len(fns))
    results = [(None, TimeoutError("never finished"))] * len(fns)

    def run(i):
        try:
            barrier.wait(timeout=scaled(30))
            results[i] = (fns[i](), None)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            results[i] = (None, e)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + scaled(timeout)
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    return results


# --- Images ----------------------------------------------------------------------------------------------


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def compare_png(png, ref, ref_width, ref_height, depth):
    """Compares a PNG with cpu_render's RGBA (8-bit or 16-bit little-endian) image. Returns (size ok,
    values compared, identical, off by more than 1, largest difference, detail)."""
    w, h, ch, d, got = png_decode(png)
    if (w, h, d) != (ref_width, ref_height, depth):
        return False, 0, 0, 0, 0, f"PNG {w}x{h} {d}-bit, expected {ref_width}x{ref_height} {depth}-bit"
    if depth == 16:
        want = array.array("H", ref)
        if sys.byteorder == "big":
            want.byteswap()
    else:
        want = ref
    if ch == 3:  # no alpha in the PNG: compare RGB
        want = [v for i, v in enumerate(want) if i % 4 != 3]
    n = len(got)
    if len(want) != n:
        return False, 0, 0, 0, 0, f"{len(want)} reference values against {n} decoded"
    same = big = worst = 0
    where = None
    for i, (a, b) in enumerate(zip(got, want)):
        if a == b:
            same += 1
            continue
        diff = abs(a - b)
        if diff > 1:
            big += 1
            if where is None:
                where = (i // ch % w, i // ch // w, i % ch, a, b)
        worst = max(worst, diff)
    detail = (f"{w}x{h} {ch} channels {d}-bit: {same}/{n} identical ({100.0 * same / n:.4f}%), {big} off by more "
              f"than 1, largest difference {worst}" + (f"; first big one at (x, y, channel, got, want) {where}"
                                                        if where else ""))
    return True, n, same, big, worst, detail


def png_matches_8bit(png, ref, w, h):
    """The 8-bit criterion: at least 99.9% of the values identical and none off by more than 1."""
    try:
        size_ok, n, same, big, _, detail = compare_png(png, ref, w, h, 8)
    except PngError as e:
        return False, f"PNG decode: {e}"
    return size_ok and n > 0 and same >= 0.999 * n and big == 0, detail


def webp_psnr(tmp, webp, ref, w, h):
    """A lossy WebP against cpu_render's RGBA8 image: (decoded at w x h, PSNR over R, G, B in dB, alpha
    exact, detail). Decoded by tools/webp_to_rgba (libwebp)."""
    src, dst = os.path.join(tmp, "check.webp"), os.path.join(tmp, "check.rgba")
    with open(src, "wb") as f:
        f.write(webp)
    proc = subprocess.run([WEBP_TO_RGBA, src, dst], capture_output=True, timeout=scaled(60))
    if proc.returncode != 0:
        return False, 0.0, False, f"webp_to_rgba: {proc.stderr!r}"
    gw, gh, _ = (int(v) for v in proc.stdout.split())
    with open(dst, "rb") as f:
        got = f.read()
    if (gw, gh) != (w, h) or len(got) != len(ref):
        return False, 0.0, False, f"decoded {gw}x{gh}, expected {w}x{h}"
    sq = 0
    alpha_exact = True
    for i in range(0, len(got), 4):
        for c in range(3):
            d = got[i + c] - ref[i + c]
            sq += d * d
        alpha_exact = alpha_exact and got[i + 3] == ref[i + 3]
    mse = sq / (w * h * 3)
    psnr = 10 * math.log10(255 * 255 / mse) if mse else float("inf")
    return True, psnr, alpha_exact, f"{w}x{h}: PSNR {psnr:.2f} dB over RGB, alpha {'exact' if alpha_exact else 'differs'}"


# --- The CPU reference -----------------------------------------------------------------------------------

_cpu_cache = {}
_cpu_lock = threading.Lock()


def cpu(tmp, frame, params=None):
    """cpu_render's (statistics JSON, image bytes) for a frame in tests/data and a params object."""
    key = (frame, json.dumps(params, sort_keys=True) if params else "")
    with _cpu_lock:
        if key in _cpu_cache:
            return _cpu_cache[key]
        out = os.path.join(tmp, f"cpu-{len(_cpu_cache)}.rgba")
        proc = subprocess.run([CPU_RENDER, os.path.join(DATA, frame), key[1], out], capture_output=True,
                              timeout=scaled(CPU_TIMEOUT_S))
        if proc.returncode != 0:
            raise RuntimeError(f"cpu_render {frame} {key[1]!r} exited {proc.returncode}: {proc.stderr!r}")
        with open(out, "rb") as f:
            image = f.read()
        _cpu_cache[key] = (json.loads(proc.stdout), image)
        return _cpu_cache[key]


def read_data(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def pfm_rgb(name):
    """(width, height, [R plane, G plane, B plane]) of a colour PFM in tests/data, each plane an array('f')
    of rows top to bottom (PFM stores them bottom to top)."""
    data = read_data(name)
    tokens, pos = [], 0
    while len(tokens) < 4:  # "PF", width, height, scale, each ended by one whitespace byte
        end = pos
        while data[end:end + 1] not in (b" ", b"\n", b"\r", b"\t"):
            end += 1
        if end > pos:
            tokens.append(data[pos:end].decode("ascii"))
        pos = end + 1
    if tokens[0] != "PF":
        raise ValueError(f"{name} is not a colour PFM")
    w, h, scale = int(tokens[1]), int(tokens[2]), float(tokens[3])
    samples = array.array("f", data[pos:pos + 12 * w * h])
    if (scale < 0) != (sys.byteorder == "little"):
        samples.byteswap()
    planes = [array.array("f") for _ in range(3)]
    for y in range(h - 1, -1, -1):
        row = samples[3 * w * y:3 * w * (y + 1)]
        for c in range(3):
            planes[c].extend(row[c::3])
    return w, h, planes


def exr_write(width, height, channels, chromaticities=None):
    """An OpenEXR file (scanlines, no compression, FLOAT channels): channels is {name: array('f') of
    width * height values, rows top to bottom}; chromaticities: the standard attribute's 8 numbers (red, green,
    blue, white xy), or None. The format as openexr.com's "OpenEXR File Layout" gives it."""
    def attr(name, kind, value):
        return name.encode() + b"\0" + kind.encode() + b"\0" + struct.pack("<i", len(value)) + value

    names = sorted(channels)  # the channel list is sorted by name
    chlist = b"".join(n.encode() + b"\0" + struct.pack("<iB3xii", 2, 0, 1, 1) for n in names) + b"\0"
    window = struct.pack("<4i", 0, 0, width - 1, height - 1)
    header = (b"\x76\x2f\x31\x01" + struct.pack("<i", 2)
              + attr("channels", "chlist", chlist) + attr("compression", "compression", b"\0")
              + attr("dataWindow", "box2i", window) + attr("displayWindow", "box2i", window)
              + attr("lineOrder", "lineOrder", b"\0") + attr("pixelAspectRatio", "float", struct.pack("<f", 1))
              + attr("screenWindowCenter", "v2f", struct.pack("<2f", 0, 0))
              + attr("screenWindowWidth", "float", struct.pack("<f", 1))
              + (attr("chromaticities", "chromaticities", struct.pack("<8f", *chromaticities))
                 if chromaticities else b"") + b"\0")
    line_bytes = 4 * width * len(names)
    first = len(header) + 8 * height  # one chunk per scanline without compression
    offsets = struct.pack(f"<{height}Q", *(first + y * (8 + line_bytes) for y in range(height)))
    chunks = []
    for y in range(height):
        line = array.array("f")
        for n in names:
            line.extend(channels[n][y * width:(y + 1) * width])
        if sys.byteorder == "big":
            line.byteswap()
        chunks.append(struct.pack("<ii", y, line_bytes) + line.tobytes())
    return header + offsets + b"".join(chunks)


def close(a, b, rel=1e-4):
    a, b = float(a), float(b)
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-30


def percentile(hist, lo, hi, p):
    """api/frames/render.c's percentile (shaders/exposure.comp): the lower edge of the first bin whose cumulative
    count reaches p * total."""
    total = sum(hist)
    k, c = 255, 0
    for i, n in enumerate(hist):
        c += n
        if c >= p * total:
            k = i
            break
    return 2.0 ** (lo + ((k if k else 1) - 1) * (hi - lo) / 254.0)


# --- The tests -------------------------------------------------------------------------------------------


def render_raw_exr(d, tmp):
    """1: a raw EXR body -> the default WebP with timings, request id and statistics."""
    ref, _ = cpu(tmp, "pmndrs_park.exr")
    status, headers, body = request(d.port, "POST", "/v1/render", read_data("pmndrs_park.exr"),
                                    {"X-Request-Id": "render-test.raw-exr:1"})
    point("raw EXR: 200 image/webp, RIFF WEBP of 512x256",
          status == 200 and headers.get("content-type") == "image/webp" and webp_size(body) == (512, 256),
          f"{status} {headers} size {webp_size(body)} {body[:200]!r}")
    # The daemon's lossy WebP is coded from Y'CbCr 4:2:0 planes the GPU made: decoded again, it must be
    # cpu_render's image within lossy coding (measured 34.58 dB at the default quality 75, 37.45 at 88, with
    # libwebp 1.2.4; the bound leaves room for other versions; with U and V swapped it measured 15.0 dB) and its
    # alpha exact (libwebp codes alpha losslessly).
    _, ref_image = cpu(tmp, "pmndrs_park.exr")
    ok, psnr, alpha_exact, detail = (webp_psnr(tmp, body, ref_image, 512, 256) if status == 200
                                     else (False, 0.0, False, f"{status}"))
    point("raw EXR: the default WebP decodes to cpu_render's image, PSNR >= 33 dB, alpha exact",
          ok and psnr >= 33.0 and alpha_exact, detail)

    timing = {}
    for item in headers.get("server-timing", "").split(","):
        m = re.fullmatch(r"\s*([a-z_]+);dur=(-?[0-9.]+(?:e[-+]?\d+)?)\s*", item)
        if m:
            timing[m.group(1)] = float(m.group(2))
    point("raw EXR: Server-Timing names every phase with a numeric dur, and the encoder's CPU time",
          all(p in timing and timing[p] >= 0 for p in PHASES) and timing["total"] >= timing["decode"]
          and timing.get("encode_cpu", 0) > 0,
          f"Server-Timing: {headers.get('server-timing')!r} parsed {timing}")
    point("raw EXR: X-Request-Id echoes the client's", headers.get("x-request-id") == "render-test.raw-exr:1",
          f"{headers}")

    stats = {}
    for item in headers.get("x-luminance-stats", "").split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            stats[k.strip()] = v.strip()
    try:
        ok = (int(stats["finite"]) == ref["finite_pixels"] and int(stats["nonfinite"]) == ref["nonfinite_pixels"]
              and all(close(stats[k], ref[k]) for k in ("log_average", "mean", "min", "max")))
    except (KeyError, ValueError):
        ok = False
    point("raw EXR: X-Luminance-Stats counts exact, log_average/mean/min/max within 1e-4 of cpu_render", ok,
          f"header {headers.get('x-luminance-stats')!r}\ncpu_render "
          f"{ {k: ref[k] for k in ('finite_pixels', 'nonfinite_pixels', 'log_average', 'mean', 'min', 'max')} }")


def render_chunked(d):
    """A raw body sent with Transfer-Encoding: chunked (no Content-Length)."""
    exr = read_data("pmndrs_park.exr")
    conn = http.client.HTTPConnection(HOST, d.port, timeout=scaled(REQUEST_TIMEOUT_S))
    try:
        conn.request("POST", "/v1/render", body=iter([exr[i:i + 10000] for i in range(0, len(exr), 10000)]),
                     headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
        resp = conn.getresponse()
        status, body = resp.status, resp.read()
    finally:
        conn.close()
    point("a chunked raw EXR body (no Content-Length) is 200 with the WebP", status == 200
          and webp_size(body) == (512, 256), f"{status} {body[:300]!r}")


def render_png_8bit(d, tmp):
    """2: raw HDR and PFM bodies with ?output.format=png against cpu_render's image."""
    for name in ("pmndrs_park.hdr", "pmndrs_park.pfm"):
        ref, image = cpu(tmp, name, {"output": {"format": "png"}})
        status, headers, body = request(d.port, "POST", "/v1/render?output.format=png", read_data(name))
        if status != 200 or headers.get("content-type") != "image/png":
            point(f"raw {name} as 8-bit PNG equals cpu_render (99.9% identical, none off by more than 1)", False,
                  f"{status} {headers} {body[:300]!r}")
            continue
        ok, detail = png_matches_8bit(body, image, ref["width"], ref["height"])
        point(f"raw {name} as 8-bit PNG equals cpu_render (99.9% identical, none off by more than 1)", ok, detail)


def render_png_16bit(d, tmp):
    """3: a 16-bit PNG of the PFM."""
    params = {"output": {"format": "png", "bit_depth": 16}}
    ref, image = cpu(tmp, "pmndrs_park.pfm", params)
    status, headers, body = request(d.port, "POST", "/v1/render?output.format=png&output.bit_depth=16",
                                    read_data("pmndrs_park.pfm"))
    name = "raw PFM as 16-bit PNG equals cpu_render (99% identical, at most 1 in a million off by more than 1)"
    if status != 200 or headers.get("content-type") != "image/png":
        point(name, False, f"{status} {headers} {body[:300]!r}")
        return
    try:
        size_ok, n, same, big, _, detail = compare_png(body, image, ref["width"], ref["height"], 16)
    except PngError as e:
        point(name, False, f"PNG decode: {e}")
        return
    point(name, size_ok and n > 0 and same >= 0.99 * n and big * 1e6 <= n, detail)


def render_multipart(d, tmp):
    """4: multipart with a frame and a params part."""
    params = {"tonemap": {"operator": "agx"}, "output": {"format": "png"}}
    ref, image = cpu(tmp, "psychtoolbox_Desk.exr", params)
    body, ctype = multipart([frame_part(read_data("psychtoolbox_Desk.exr")), params_part(params)])
    status, headers, data = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    name = "multipart frame + params (Desk, RGBA half PIZ, agx, png) equals cpu_render"
    if status != 200 or headers.get("content-type") != "image/png":
        point(name, False, f"{status} {headers} {data[:300]!r}")
        return
    ok, detail = png_matches_8bit(data, image, ref["width"], ref["height"])
    point(name, ok, detail)


def alpha_output(d, tmp):
    """4b: output.alpha. By default an alpha the tone pass found opaque everywhere is left out (PNG RGB), a
    translucent one is kept (PNG RGBA, WebP with alpha); keep and drop override. Every image against
    cpu_render's (its RGBA, compared over the channels the PNG has), the alpha included where written."""
    w, h = 40, 24
    # Smooth colour (lossy WebP keeps it close), every value different (a float-double rounding edge then
    # costs one value, not a column of them).
    colour = {
        "R": array.array("f", [0.1 + 0.7 * (x + 0.31 * y) / (w + 0.31 * h) for y in range(h) for x in range(w)]),
        "G": array.array("f", [0.1 + 0.7 * (y + 0.23 * x) / (h + 0.23 * w) for y in range(h) for x in range(w)]),
        "B": array.array("f", [0.2 + 0.5 * x * y / (w * h) for y in range(h) for x in range(w)]),
    }
    frames = {
        "opaque": dict(colour, A=array.array("f", [1.0] * (w * h))),
        # alpha from 0 up in steps of 13/255 across the left half, each 0.3 of a step from a rounding edge;
        # 1 on the right
        "translucent": dict(colour, A=array.array("f", [min(1.0, (13 * x + 0.3) / 255) for y in range(h)
                                                        for x in range(w)])),
    }
    paths = {}
    for name, channels in frames.items():
        paths[name] = os.path.join(tmp, f"alpha-{name}.exr")
        with open(paths[name], "wb") as f:
            f.write(exr_write(w, h, channels))

    cases = [  # frame, output.alpha (None: the default), bit depth, channels the PNG must have
        ("opaque", None, 8, 3), ("opaque", "keep", 8, 4), ("opaque", None, 16, 3),
        ("translucent", None, 8, 4), ("translucent", "drop", 8, 3), ("translucent", "keep", 16, 4),
    ]
    for frame, mode, depth, want_ch in cases:
        params = {"output": {"format": "png", "bit_depth": depth}}
        if mode:
            params["output"]["alpha"] = mode
        name = f"{frame} alpha, output.alpha {mode or 'default'}, {depth}-bit PNG: {want_ch} channels, equals cpu_render"
        ref, image = cpu(tmp, paths[frame], params)
        with open(paths[frame], "rb") as f:
            body, ctype = multipart([frame_part(f.read()), params_part(params)])
        status, headers, data = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
        if status != 200 or headers.get("content-type") != "image/png":
            point(name, False, f"{status} {headers} {data[:300]!r}")
            continue
        try:
            ch = png_decode(data)[2]
            size_ok, n, same, big, _, detail = compare_png(data, image, w, h, depth)
        except PngError as e:
            point(name, False, f"PNG decode: {e}")
            continue
        good = same >= 0.999 * n and big == 0 if depth == 8 else same >= 0.99 * n and big * 1e6 <= n
        point(name, ch == want_ch and size_ok and n > 0 and good, f"{ch} channels; {detail}")

    # WebP leaves an opaque alpha out by itself (libwebp), so the file alone cannot show the decision: the
    # JSON answer's image.alpha says whether the encoder was given the alpha.
    for frame, want_alpha in (("opaque", 0), ("translucent", 1)):
        name = (f"{frame} alpha, default WebP: image.alpha {bool(want_alpha)}, alpha "
                f"{'stored' if want_alpha else 'left out'}, alpha exact")
        ref, image = cpu(tmp, paths[frame])
        with open(paths[frame], "rb") as f:
            status, headers, body = request(d.port, "POST", "/v1/render", f.read(), {"Accept": "application/json"})
        doc = json_body(body) if status == 200 else None
        img = doc.get("image", {}) if isinstance(doc, dict) else {}
        if img.get("mime") != "image/webp":
            point(name, False, f"{status} {headers} {body[:300]!r}")
            continue
        data = base64.b64decode(img.get("base64", ""))
        src, dst = os.path.join(tmp, "alpha.webp"), os.path.join(tmp, "alpha.rgba")
        with open(src, "wb") as f:
            f.write(data)
        proc = subprocess.run([WEBP_TO_RGBA, src, dst], capture_output=True, timeout=scaled(60))
        has_alpha = int(proc.stdout.split()[2]) if proc.returncode == 0 else -1
        ok, psnr, alpha_exact, detail = webp_psnr(tmp, data, image, w, h)
        point(name, img.get("alpha") is bool(want_alpha) and has_alpha == want_alpha and ok and alpha_exact
              and psnr >= 30.0, f"image.alpha {img.get('alpha')}, has_alpha {has_alpha}; {detail}")


def render_depth(d):
    """5: a depth part of the frame's size is taken; one of another size is refused naming depth."""
    street = read_data("blender_street_960x540_singlelayer.exr")
    body, ctype = multipart([frame_part(street), frame_part(street, "depth", "depth.exr")])
    status, headers, data = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    point("multipart frame + depth of the same size (street EXR with Z): 200 WebP 960x540",
          status == 200 and webp_size(data) == (960, 540), f"{status} {headers} {data[:300]!r}")

    body, ctype = multipart([frame_part(street), frame_part(read_data("pmndrs_park.pfm"), "depth", "depth.pfm")])
    status, headers, data = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    point("a depth part of another size is 422 with an error naming field depth",
          is_error(status, data, 422, "depth_size_differs", "depth"), f"{status} {data[:300]!r}")


def pfm_grey(width, height, value_at):
    """A grey PFM (little-endian, rows stored bottom to top) whose sample at (x, y), y from the top, is
    value_at(x, y)."""
    rows = []
    for y in range(height - 1, -1, -1):
        rows.append(array.array("f", (value_at(x, y) for x in range(width))))
    body = b"".join(r.tobytes() if sys.byteorder == "little" else _swapped(r) for r in rows)
    return f"Pf\n{width} {height}\n-1.0\n".encode() + body


def _swapped(a):
    b = array.array("f", a)
    b.byteswap()
    return b.tobytes()


def depth_of_field(d):
    """Issue 5 end to end: DOF from the EXR's own depth and from a depth part, what the answer says about
    it, the sprite budget, and the errors."""
    street = read_data("blender_street_960x540_singlelayer.exr")
    status, headers, data = request(d.port, "POST", "/v1/render?dof.enabled=true&dof.lens=85mm_f1.4", street)
    timing = headers.get("server-timing", "")
    dof_hdr, bokeh_hdr = headers.get("x-depth-of-field", ""), headers.get("x-bokeh", "")
    point("DOF from the EXR's own Z (street, 85mm_f1.4, automatic focus): 200 WebP 960x540, Server-Timing "
          "names dof (bokeh runs inside it), X-Depth-Of-Field and X-Bokeh say what was done",
          status == 200 and webp_size(data) == (960, 540) and "dof;dur=" in timing
          and "focal_mm=85" in dof_hdr and "sprites=" in bokeh_hdr, f"{status} {timing} {dof_hdr} {bokeh_hdr}")

    status, headers, data = request(d.port, "POST", "/v1/render?dof.enabled=true&bokeh.max_sprites=1", street,
                                    {"Accept": "application/json"})
    doc = json.loads(data) if status == 200 else {}
    bokeh = doc.get("dof", {}).get("bokeh", {})
    point("the JSON answer's dof object: method, resolved lens and focus, and a sprite budget of 1 reported as "
          "reached",
          status == 200 and doc["dof"]["method"] == "gather" and doc["dof"]["focal_length_mm"] == 50
          and doc["dof"]["f_stop"] == 1.4 and doc["dof"]["focus_distance_m"] > 0 and bokeh.get("sprites") == 1
          and bokeh.get("wanted", 0) > 1 and bokeh.get("budget_reached") is True, f"{status} {doc.get('dof')}")

    # A depth part: the PFM frame with every depth at the focus distance is the frame without DOF, byte
    # for byte (PNG is deterministic); a ramp of depths changes it.
    park = read_data("pmndrs_park.pfm")
    flat = pfm_grey(512, 256, lambda x, y: 3.0)
    status, _, plain = request(d.port, "POST", "/v1/render?output.format=png", park)
    body, ctype = multipart([frame_part(park, filename="park.pfm"), frame_part(flat, "depth", "depth.pfm"),
                             params_part({"dof.enabled": True, "dof.focus_distance_m": 3, "output.format": "png"})])
    status2, _, focused = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    point("a depth part with every depth at the focus distance: the PNG is byte-identical to the frame without "
          "DOF", status == 200 and status2 == 200 and plain == focused, f"{status} {status2} {len(plain)} {len(focused)}")
    ramp = pfm_grey(512, 256, lambda x, y: 0.5 + 20.0 * x / 512)
    body, ctype = multipart([frame_part(park, filename="park.pfm"), frame_part(ramp, "depth", "depth.pfm"),
                             params_part({"dof.enabled": True, "dof.focus_distance_m": 3, "output.format": "png",
                                          "dof.method": "sat"})])
    status, headers, blurred = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    point("a depth ramp as a depth part (sat method): 200 PNG 512x256 that differs from the sharp frame",
          status == 200 and png_size(blurred) == (512, 256) and blurred != plain, f"{status} {blurred[:200]!r}")

    status, _, data = request(d.port, "POST", "/v1/render?dof.enabled=true", park)
    point("dof.enabled on a PFM with no depth part is 422 depth_missing naming field depth",
          is_error(status, data, 422, "depth_missing", "depth"), f"{status} {data[:300]!r}")
    status, _, data = request(d.port, "POST", "/v1/render?dof.enabled=true&dof.focus_distance_m=0.03", street)
    point("a focus distance inside the focal length is 400 naming dof.focus_distance_m",
          is_error(status, data, 400, "invalid_parameter", "dof.focus_distance_m"), f"{status} {data[:300]!r}")
    status, _, data = request(d.port, "POST", "/v1/render?dof.enabled=true&bokeh.blades=4", street)
    point("bokeh.blades 4 (not 0 or 5-9) is 400 naming bokeh.blades",
          is_error(status, data, 400, "invalid_parameter", "bokeh.blades"), f"{status} {data[:300]!r}")
    status, _, data = request(d.port, "POST", "/v1/analyze?dof.enabled=true", park)
    point("/v1/analyze ignores dof (statistics are of the frame as it came): 200",
          status == 200, f"{status} {data[:300]!r}")


def render_accept(d, tmp):
    """An Accept header that names an image format chooses output.format when the request does not (issue 35);
    output.format itself still wins; wildcards, weight 0 and types the daemon cannot write change nothing."""
    frame = read_data("pmndrs_park.exr")
    cases = [
        ("image/png", "", "image/png"),
        ("image/webp;q=0.5, image/png", "", "image/png"),
        ("image/jpeg", "", "image/jpeg"),
        ("image/png", "?output.format=webp", "image/webp"),
        ("image/png", "?look=analysis", "image/png"),  # a look that leaves output.format alone keeps Accept's
        ("image/tiff", "", "image/webp"),
        ("image/*", "", "image/webp"),
        ("image/png;q=0", "", "image/webp"),
        # A browser's navigation: AVIF and WebP at the same weight; the tie goes to the server's order (WebP first).
        ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", "", "image/webp"),
        ("image/avif;q=0.9, image/jpeg;q=0.95", "", "image/jpeg"),
        ("image/png;q=2", "", "image/webp"),  # not a qvalue (RFC 9110 12.4.2): the range is ignored
        ("application/json;q=0, image/png", "", "image/png"),  # JSON refused by weight: the image
    ]
    for accept, query, want in cases:
        status, headers, body = request(d.port, "POST", "/v1/render" + query, frame, {"Accept": accept})
        got = headers.get("content-type")
        magic_ok = ((want == "image/png" and body[:8] == b"\x89PNG\r\n\x1a\n")
                    or (want == "image/webp" and body[:4] == b"RIFF" and body[8:12] == b"WEBP")
                    or (want == "image/jpeg" and body[:3] == b"\xff\xd8\xff"))
        point(f"Accept: {accept}{' with ' + query if query else ''}: {want}",
              status == 200 and got == want and magic_ok, f"{status} {got} {body[:120]!r}")


def render_json(d, tmp):
    """6: Accept: application/json."""
    ref, _ = cpu(tmp, "pmndrs_park.exr")
    status, headers, body = request(d.port, "POST", "/v1/render", read_data("pmndrs_park.exr"),
                                    {"Accept": "application/json"})
    doc = json_body(body) if status == 200 else None
    detail = f"{status} {headers} {body[:600]!r}"
    ok = (isinstance(doc, dict) and headers.get("content-type") == "application/json"
          and doc.get("width") == 512 and doc.get("height") == 256 and isinstance(doc.get("image"), dict))
    if ok:
        img = doc["image"]
        try:
            raw = base64.b64decode(img.get("base64", ""), validate=True)
        except ValueError:
            raw = b""
        ok = img.get("mime") == "image/webp" and img.get("bytes") == len(raw) and webp_size(raw) == (512, 256)
    point("Accept: application/json: image.base64 decodes to a WebP of 512x256 (mime and bytes agree)", ok, detail)

    timings = doc.get("timings_ms") if isinstance(doc, dict) else None
    stats = doc.get("stats") if isinstance(doc, dict) else None
    exposure = doc.get("exposure") if isinstance(doc, dict) else None
    ok = (isinstance(timings, dict) and all(isinstance(timings.get(p), (int, float)) for p in PHASES)
          and isinstance(stats, dict) and stats.get("finite_pixels") == ref["finite_pixels"]
          and stats.get("nonfinite_pixels") == ref["nonfinite_pixels"]
          and all(close(stats.get(k, "nan"), ref[k]) for k in ("log_average", "mean", "min", "max"))
          and isinstance(exposure, dict)
          and all(isinstance(exposure.get(k), (int, float)) for k in ("scale", "key", "adaptation", "white"))
          and close(exposure["scale"], ref["exposure"]["scale"], 1e-3)
          and close(exposure["key"], ref["exposure"]["key"], 1e-6))
    point("JSON response: timings_ms has every phase, stats and exposure agree with cpu_render", ok,
          f"timings {timings}\nstats {stats}\nexposure {exposure}\ncpu_render exposure {ref['exposure']}")
    # A half EXR stays half on its way to the GPU (the statistics above are still cpu_render's, from floats);
    # a PFM's floats stay floats.
    status2, _, body2 = request(d.port, "POST", "/v1/render", read_data("pmndrs_park.pfm"), {"Accept": "application/json"})
    doc2 = json_body(body2) if status2 == 200 else {}
    point("JSON response: gpu_input says rgba16f for a half EXR and rgba32f for a PFM",
          isinstance(doc, dict) and doc.get("gpu_input") == "rgba16f" and doc2.get("gpu_input") == "rgba32f",
          f"{doc.get('gpu_input') if isinstance(doc, dict) else None} {doc2.get('gpu_input')}")

    # The params echo, with parameters from the query: a PNG with Hable's curve.
    params = {"tonemap": {"operator": "hable"}, "output": {"format": "png"}}
    pref, pimage = cpu(tmp, "pmndrs_park.exr", params)
    status, headers, body = request(d.port, "POST", "/v1/render?tonemap.operator=hable&output.format=png",
                                    read_data("pmndrs_park.exr"), {"Accept": "application/json"})
    doc = json_body(body) if status == 200 else None
    echo = doc.get("params") if isinstance(doc, dict) else None
    ok = (isinstance(echo, dict) and echo.get("tonemap", {}).get("operator") == "hable"
          and echo.get("output", {}).get("format") == "png" and echo.get("output", {}).get("bit_depth") == 8
          and echo.get("gamma", {}).get("mode") == "local"
          and echo.get("tonemap", {}).get("hable", {}).get("white") == 11.2
          and doc.get("image", {}).get("mime") == "image/png")
    detail = f"{status} params {echo}"
    if ok:
        ok, detail = png_matches_8bit(base64.b64decode(doc["image"]["base64"]), pimage, pref["width"],
                                      pref["height"])
    point("JSON response: params echoes the effective parameters (every field) and the PNG equals cpu_render",
          ok, detail)


def analyze(d, tmp):
    """7: POST /v1/analyze."""
    ref, _ = cpu(tmp, "pmndrs_park.exr")
    status, headers, body = request(d.port, "POST", "/v1/analyze", read_data("pmndrs_park.exr"))
    doc = json_body(body) if status == 200 else None
    stats = doc.get("stats") if isinstance(doc, dict) else None
    hist = stats.get("histogram") if isinstance(stats, dict) else None
    ok = (isinstance(hist, dict) and stats.get("finite_pixels") == ref["finite_pixels"]
          and stats.get("nonfinite_pixels") == ref["nonfinite_pixels"]
          and stats.get("pixels") == ref["width"] * ref["height"]
          and hist.get("counts") == ref["histogram"]
          and close(stats.get("log_average", "nan"), ref["log_average"])
          and all(close(stats.get(k, "nan"), ref[k]) for k in ("mean", "min", "max")))
    diff = None
    if isinstance(hist, dict) and isinstance(hist.get("counts"), list):
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(hist["counts"], ref["histogram"])) if a != b][:10]
    point("/v1/analyze (raw EXR): counts and every histogram bin equal cpu_render's, log_average within 1e-4",
          ok, f"{status} {body[:300]!r}\nbins that differ (bin, daemon, cpu): {diff}")

    pct = doc.get("percentiles") if isinstance(doc, dict) else None
    want = None
    ok = isinstance(pct, dict) and isinstance(hist, dict)
    if ok:
        lo, hi = hist.get("min_log2"), hist.get("max_log2")
        want = {k: percentile(ref["histogram"], lo, hi, p) for k, p in (("p01", .01), ("p50", .5), ("p99", .99))}
        ok = (lo == -16 and hi == 16 and all(isinstance(pct.get(k), (int, float)) and close(pct[k], want[k], 1e-9)
                                             for k in want) and pct["p01"] <= pct["p50"] <= pct["p99"])
    timings = doc.get("timings_ms") if isinstance(doc, dict) else None
    ok = ok and isinstance(timings, dict) and "reduce" in timings and "encode" not in timings
    point("/v1/analyze: percentiles p01 <= p50 <= p99 present and as the histogram gives them; timings_ms",
          ok, f"percentiles {pct}, from cpu_render's histogram {want}, timings {timings}")


def slow_post(port, path, body, pieces=8, pause_s=0.03, headers=None):
    """POST body as the raw body, sent in pieces with pauses: a frame that arrives over tens of
    milliseconds, as one from another machine does. Returns (status, headers, body)."""
    step = (len(body) + pieces - 1) // pieces

    def trickle():
        for i in range(0, len(body), step):
            yield body[i:i + step]
            time.sleep(pause_s)

    conn = http.client.HTTPConnection(HOST, port, timeout=scaled(REQUEST_TIMEOUT_S))
    try:
        h = {"Content-Length": str(len(body)), "Content-Type": "application/octet-stream"}
        h.update(headers or {})
        conn.request("POST", path, body=trickle(), headers=h)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def early_decoding(d, tmp):
    """A raw EXR body is decoded while it arrives (api/frames/render.c): the same statistics and image as a frame
    decoded after its last byte, bad parameters and bad files answered as before, and a client that
    hangs up half-way costs nothing."""
    desk = read_data("psychtoolbox_Desk.exr")  # 2.4 MB, RGBA half PIZ
    ref, _ = cpu(tmp, "psychtoolbox_Desk.exr")
    status, _, body = slow_post(d.port, "/v1/analyze", desk)
    doc = json_body(body) if status == 200 else None
    early = isinstance(doc, dict) and doc.get("decoded_while_receiving") is True
    point("a raw EXR sent in 8 pieces over 0.24 s is decoded while it arrives (decoded_while_receiving), "
          "statistics and every histogram bin equal cpu_render's",
          early and stats_match(doc.get("stats"), ref, histogram=True), f"{status} {body[:400]!r}")

    form, ctype = multipart([frame_part(desk)])
    status, _, body = request(d.port, "POST", "/v1/analyze", form, {"Content-Type": ctype})
    doc = json_body(body) if status == 200 else None
    point("the same frame as a multipart part is decoded after it is in (decoded_while_receiving false), "
          "same statistics", isinstance(doc, dict) and doc.get("decoded_while_receiving") is False
          and stats_match(doc.get("stats"), ref, histogram=True), f"{status} {body[:400]!r}")

    params = {"tonemap": {"operator": "agx"}, "output": {"format": "png"}}
    _, image = cpu(tmp, "psychtoolbox_Desk.exr", params)
    status, headers, body = slow_post(d.port, "/v1/render?tonemap.operator=agx&output.format=png", desk)
    name = "a raw EXR decoded while it arrives renders the PNG cpu_render makes (99.9% identical, none off by >1)"
    if status != 200 or headers.get("content-type") != "image/png":
        point(name, False, f"{status} {headers} {body[:300]!r}")
    else:
        ok, detail = png_matches_8bit(body, image, ref["width"], ref["height"])
        point(name, ok, detail)

    status, _, body = slow_post(d.port, "/v1/render?tonemap.operator=nope", desk)
    point("a bad query parameter with a large raw EXR is 400 naming it, as without early decoding",
          is_error(status, body, 400, PARAM_ERROR, "tonemap.operator"), f"{status} {body[:300]!r}")

    # Chunk data overwritten past the header and offset table: the early decoder fails, the ordinary path
    # says why, exactly as it does for the same bytes in a form.
    bad = desk[:len(desk) // 2] + bytes(64 * 1024) + desk[len(desk) // 2 + 64 * 1024:]
    s_raw, _, b_raw = slow_post(d.port, "/v1/render", bad)
    form, ctype = multipart([frame_part(bad)])
    s_form, _, b_form = request(d.port, "POST", "/v1/render", form, {"Content-Type": ctype})
    e_raw, e_form = json_body(b_raw) or {}, json_body(b_form) or {}
    point("a corrupt EXR decoded while it arrives gets the error it gets in a form (4xx, same code and message)",
          400 <= s_raw < 500 and s_raw == s_form and e_raw.get("error") == e_form.get("error"),
          f"raw {s_raw} {b_raw[:300]!r}\nform {s_form} {b_form[:300]!r}")

    # The last chunks damaged and the body sent at once: the handler takes the frame while its decoding
    # still runs (the GPU thread waits for the rest), the decoding fails after that, and the answer must
    # still be the one the same bytes get in a form.
    bad = desk[:len(desk) - 48 * 1024] + bytes(range(256)) * 128 + desk[len(desk) - 16 * 1024:]
    s_raw, _, b_raw = request(d.port, "POST", "/v1/render", bad)
    form, ctype = multipart([frame_part(bad)])
    s_form, _, b_form = request(d.port, "POST", "/v1/render", form, {"Content-Type": ctype})
    e_raw, e_form = json_body(b_raw) or {}, json_body(b_form) or {}
    point("an EXR whose last chunks are damaged, failing after it was handed on, gets the error it gets in a "
          "form (4xx, same code and message)",
          400 <= s_raw < 500 and s_raw == s_form and e_raw.get("error") == e_form.get("error"),
          f"raw {s_raw} {b_raw[:300]!r}\nform {s_form} {b_form[:300]!r}")

    # A frame with a depth channel, depth of field off: decoded early all the same (its depth unread).
    street = read_data("blender_street_960x540_singlelayer.exr")
    status, _, body = request(d.port, "POST", "/v1/render", street, {"Accept": "application/json"})
    doc = json_body(body) if status == 200 else None
    point("an EXR with a depth channel and depth of field off is decoded while it arrives too",
          isinstance(doc, dict) and doc.get("decoded_while_receiving") is True, f"{status} {body[:300]!r}")

    # Content-Length and chunked at once, the chunks longer than the length: refused from the headers
    # (docs/SECURITY.md: the framing a proxy may read otherwise), the connection closed; nothing reads the
    # body early.
    with socket.create_connection((HOST, d.port), timeout=scaled(60)) as s:
        s.sendall(f"POST /v1/analyze HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {len(desk) // 2}\r\n"
                  f"Transfer-Encoding: chunked\r\n\r\n".encode())
        data = desk + bytes(100000)
        try:
            for i in range(0, len(data), 65536):
                piece = data[i:i + 65536]
                s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed before the body was in
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except OSError:
            pass
    status, _, body = request(d.port, "GET", "/livez")
    point("Content-Length with chunked chunks past it: refused 400 bad_framing, and the server goes on",
          answer.startswith(b"HTTP/1.1 400 ") and b"bad_framing" in answer and status == 200,
          f"{answer[:200]!r}; livez {status}")

    # Half the body, then the client hangs up: the decoder waiting for the rest gives up, the server goes on.
    with socket.create_connection((HOST, d.port), timeout=scaled(10)) as s:
        s.sendall(f"POST /v1/render HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: early-hangup\r\n"
                  f"Content-Length: {len(desk)}\r\n\r\n".encode() + desk[:len(desk) // 2])
        time.sleep(scaled(0.3))  # the early decoder is waiting for the second half
    line = d.wait_line(r"id=early-hangup POST /v1/render ", 30)
    status, _, body = request(d.port, "POST", "/v1/analyze", desk)
    doc = json_body(body) if status == 200 else None
    point("a client that hangs up half-way through its body is logged as gone, and the next frame is answered",
          line is not None and " 200 " not in line and isinstance(doc, dict) and stats_match(doc.get("stats"), ref),
          f"log: {line!r}; next: {status} {body[:200]!r}")


def metrics_values(port):
    """GET /metrics parsed: {name or name{labels}: value}, and the response."""
    status, headers, body = request(port, "GET", "/metrics")
    values = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                values[key] = float(value)
            except ValueError:
                values[key] = None
    return status, headers, values


def status_routes(d):
    """GET /v1/gpu and GET /metrics on the main daemon (--queue_depth=64), after it has rendered frames:
    the device and memory as /v1/gpu says them, and /metrics counting exactly the requests made here. The
    GPU thread counts a frame out of flight just after the finishing thread may have answered it, and the
    request's memory goes back at its completion: /v1/gpu is read until both are settled (at most 5 s,
    harness.scaled)."""
    deadline = time.monotonic() + scaled(5)
    while True:
        status, headers, body = request(d.port, "GET", "/v1/gpu")
        doc = json_body(body) if status == 200 else None
        settled = isinstance(doc, dict) and (doc.get("queue") or {}).get("frames_in_flight") == 0 and \
            (doc.get("host_memory") or {}).get("blocks_in_use") == 0
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    ok = isinstance(doc, dict)
    heaps = doc.get("memory_heaps") if ok else None
    queue = doc.get("queue") if ok else None
    graph = doc.get("frame_graph") if ok else None
    host = doc.get("host_memory") if ok else None
    ok = (ok and doc.get("state") == "ready" and isinstance(doc.get("device"), str) and doc["device"]
          and isinstance(heaps, list) and heaps and all(h.get("size_bytes", 0) > 0 for h in heaps)
          and isinstance(queue, dict) and queue.get("capacity") == 64 and queue.get("depth") == 0
          and queue.get("frames_in_flight") == 0
          and doc.get("pipelines", {}).get("created", 0) > 0
          and doc.get("pipeline_cache", {}).get("state") in ("none", "loaded", "created", "ignored", "disabled")
          and isinstance(graph, dict) and graph.get("sizes_kept", 0) >= 1 and graph.get("device_bytes", 0) > 0
          and isinstance(host, dict) and host.get("blocks_in_use") == 0 and host.get("kept_bytes", 0) > 0
          and headers.get("content-type", "").startswith("application/json"))
    point("GET /v1/gpu: ready, the device, its heaps, an idle queue of 64, warm pipelines, the kept frame "
          "sizes, no host block in use and some kept warm", ok, f"{status} {body[:1500]!r}")

    status, headers, before = metrics_values(d.port)
    exr = read_data("pmndrs_park.exr")
    answers = [request(d.port, "POST", "/v1/render", exr)[0] for _ in range(2)]
    answers.append(request(d.port, "POST", "/v1/render?tonemap.operator=nope", exr)[0])
    ok200 = 'hdrpost_requests_total{route="/v1/render",status="200"}'
    ok400 = 'hdrpost_requests_total{route="/v1/render",status="400"}'
    after = {}

    def delta(key):
        return (after.get(key) or 0) - (before.get(key) or 0)

    # A request is counted when libmicrohttpd says it is complete, just after the client has its answer.
    deadline = time.monotonic() + scaled(5)
    while True:
        _, _, after = metrics_values(d.port)
        if (delta(ok200) >= 2 and delta(ok400) >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    total = 'hdrpost_stage_duration_seconds_count{stage="total"}'
    buckets = sorted(((float(k.split('le="')[1].rstrip('"}').replace("+Inf", "inf")), v) for k, v in after.items()
                      if k.startswith('hdrpost_stage_duration_seconds_bucket{stage="total"')), key=lambda b: b[0])
    cumulative = all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    point("GET /metrics: Prometheus text; two frames and one bad request move requests_total by exactly 2 "
          "(200) and 1 (400), the total-stage histogram by 2, its buckets cumulative up to +Inf = count",
          status == 200 and headers.get("content-type", "").startswith("text/plain; version=0.0.4")
          and answers == [200, 200, 400] and delta(ok200) == 2 and delta(ok400) == 1 and delta(total) == 2
          and buckets and buckets[-1][0] == float("inf") and buckets[-1][1] == after.get(total) and cumulative
          and delta("hdrpost_frames_total") == 2 and delta("hdrpost_pixels_total") == 2 * 512 * 256
          and after.get("hdrpost_queue_capacity") == 64 and after.get("hdrpost_host_memory_blocks") == 0
          and "hdrpost_host_memory_kept_bytes" in after and "hdrpost_frame_graph_device_bytes" in after,
          f"{status} {headers.get('content-type')} answers {answers}; deltas 200 {delta(ok200)} 400 {delta(ok400)} "
          f"count {delta(total)} frames {delta('hdrpost_frames_total')} pixels {delta('hdrpost_pixels_total')}; "
          f"buckets {buckets}")
    # The route label is the route table's path, for every route (/v1/ocio was once left out of a list of its
    # own and counted as "other"), and "other" for a path no route holds, whatever the path.
    _, _, first = metrics_values(d.port)
    paths = {"/v1/ocio": None, "/made/up/path": None}
    for path in paths:
        paths[path] = request(d.port, "GET", path)[0]
    keys = [f'hdrpost_requests_total{{route="/v1/ocio",status="{paths["/v1/ocio"]}"}}',
            f'hdrpost_requests_total{{route="other",status="{paths["/made/up/path"]}"}}']
    deadline = time.monotonic() + scaled(5)
    while True:
        _, _, last = metrics_values(d.port)
        counted = [(last.get(k) or 0) - (first.get(k) or 0) for k in keys]
        if counted == [1, 1] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    point("GET /metrics: a request to /v1/ocio is counted under its route, one to a made-up path under \"other\"",
          counted == [1, 1], f"answers {paths}, counted {dict(zip(keys, counted))}")
    states = ("idle", "decode_wait", "gpu_wait", "encoder_wait", "work")
    gpu_thread = {s: after.get(f'hdrpost_gpu_thread_seconds_total{{state="{s}"}}') for s in states}
    moved = {s: delta(f'hdrpost_gpu_thread_seconds_total{{state="{s}"}}') for s in states}
    point("GET /metrics: the GPU thread's seconds by state, every state there and none going back; two frames "
          "moved its GPU wait and its work",
          all(v is not None and v >= 0 for v in gpu_thread.values()) and all(v >= 0 for v in moved.values())
          and moved["gpu_wait"] > 0 and moved["work"] > 0, f"{gpu_thread} moved {moved}")


def compressions(d, tmp):
    """Every compression OpenEXR's C core writes, and a tiled file, over HTTP: the park frame rewritten by
    tools/make_frame (half RGB), posted raw to /v1/analyze; the statistics against cpu_render on the same
    file, and those of the lossless compressions equal to the uncompressed file's."""
    park = os.path.join(DATA, "pmndrs_park.exr")
    cases = [(c, False) for c in ("none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a")] + [("zip", True)]
    lossless = {"none", "rle", "zips", "zip", "piz", "pxr24"}  # pxr24 is lossless on half channels
    problems, hist = [], {}
    for comp, tiled in cases:
        label = comp + (" tiled" if tiled else "")
        path = os.path.join(tmp, f"park-{comp}{'-tiled' if tiled else ''}.exr")
        subprocess.run([MAKE_FRAME, park, path, "1", comp] + (["tiled"] if tiled else []), check=True,
                       stdout=subprocess.DEVNULL, timeout=scaled(CPU_TIMEOUT_S))
        ref, _ = cpu(tmp, path)
        with open(path, "rb") as f:
            status, _, body = request(d.port, "POST", "/v1/analyze", f.read())
        doc = json_body(body) if status == 200 else None
        stats = doc.get("stats") if isinstance(doc, dict) else None
        if not stats_match(stats, ref, histogram=True):
            problems.append(f"{label}: {status} {body[:300]!r} against cpu_render {ref.get('log_average')}")
            continue
        hist[label] = stats["histogram"]["counts"]
    same = all(hist.get(c) == hist.get("none") for c in lossless | {"zip tiled"})
    point("every compression the C core writes (none, rle, zips, zip, piz, pxr24, b44, b44a) and a tiled ZIP "
          "file over HTTP: statistics equal cpu_render's on each file, the lossless ones' histograms the "
          "uncompressed file's", not problems and same and len(hist) == len(cases),
          "\n".join(problems) + f"\nlossless histograms equal: {same}")


def stats_match(stats, ref, histogram=False):
    """The daemon's JSON statistics against cpu_render's: counts exact, values within 1e-4, and with
    histogram every bin."""
    if not isinstance(stats, dict):
        return False
    ok = (stats.get("finite_pixels") == ref["finite_pixels"] and stats.get("nonfinite_pixels") == ref["nonfinite_pixels"]
          and all(close(stats.get(k, "nan"), ref[k]) for k in ("log_average", "mean", "min", "max")))
    if histogram:
        ok = ok and isinstance(stats.get("histogram"), dict) and stats["histogram"].get("counts") == ref["histogram"]
    return ok


def exr_layers(d, tmp):
    """Channels chosen by name: input.layer, input.channel_r/g/b/a, input.depth on a multi-layer EXR."""
    w, h, park = pfm_rgb("pmndrs_park.pfm")
    # ViewLayer.Combined (what the decoder takes by itself) is the park at a quarter of its brightness;
    # ViewLayer.Park holds the PFM's values exactly, so cpu_render on the PFM is its reference.
    quarter = [array.array("f", (v * 0.25 for v in plane)) for plane in park]
    depth = array.array("f", (1e10 if y < h // 4 else 1.0 + 10.0 * x / w for y in range(h) for x in range(w)))
    exr = exr_write(w, h, {"ViewLayer.Combined.R": quarter[0], "ViewLayer.Combined.G": quarter[1],
                           "ViewLayer.Combined.B": quarter[2], "ViewLayer.Park.R": park[0],
                           "ViewLayer.Park.G": park[1], "ViewLayer.Park.B": park[2], "ViewLayer.Depth.Z": depth})
    ref, image = cpu(tmp, "pmndrs_park.pfm", {"output": {"format": "png"}})
    json_accept = {"Accept": "application/json"}

    def render(query, headers=json_accept, body=exr, route="/v1/render"):
        status, _, data = request(d.port, "POST", route + query, body, headers)
        return status, data, json_body(data) if status == 200 else None

    status, data, doc = render("?input.layer=ViewLayer.Park&output.format=png")
    exr_doc = doc.get("exr") if isinstance(doc, dict) else None
    ok = (isinstance(doc, dict) and stats_match(doc.get("stats"), ref)
          and doc.get("params", {}).get("input", {}).get("layer") == "ViewLayer.Park")
    detail = f"{status} {data[:400]!r}\ndaemon stats {doc.get('stats') if doc else None}\ncpu_render {ref}"
    if ok:
        ok, detail = png_matches_8bit(base64.b64decode(doc["image"]["base64"]), image, ref["width"], ref["height"])
    point("multi-layer EXR, input.layer=ViewLayer.Park: statistics and PNG equal cpu_render on the layer's "
          "pixels (pmndrs_park.pfm)", ok, detail)
    want = {"part": 0, "layer": "ViewLayer.Park", "depth": "ViewLayer.Depth.Z",
            "channels": {"r": "ViewLayer.Park.R", "g": "ViewLayer.Park.G", "b": "ViewLayer.Park.B", "a": None}}
    point("the JSON answer says which layer, channels and depth were used", exr_doc == want,
          f"exr {exr_doc}, expected {want}")

    status, data, doc = render("?output.format=png")
    exr_doc = doc.get("exr") if isinstance(doc, dict) else {}
    stats = doc.get("stats", {}) if isinstance(doc, dict) else {}
    point("without a name the decoder's own choice stands: ViewLayer.Combined (a quarter as bright)",
          exr_doc.get("layer") == "ViewLayer.Combined" and close(stats.get("mean", "nan"), ref["mean"] * 0.25, 1e-4),
          f"{status} exr {exr_doc} stats {stats}, a quarter of cpu_render's mean {ref['mean'] * 0.25}")

    status, data, doc = render("?input.layer=ViewLayer.Park", route="/v1/analyze")
    point("/v1/analyze?input.layer=ViewLayer.Park: every histogram bin equals cpu_render's",
          isinstance(doc, dict) and stats_match(doc.get("stats"), ref, histogram=True)
          and doc.get("exr", {}).get("layer") == "ViewLayer.Park", f"{status} {data[:400]!r}")

    names = {"input": {"channel_r": "ViewLayer.Park.R", "channel_g": "ViewLayer.Park.G",
                       "channel_b": "ViewLayer.Park.B", "depth": "ViewLayer.Depth.Z"}}
    form, ctype = multipart([frame_part(exr), params_part(names)])
    status, data, doc = render("", {"Content-Type": ctype, "Accept": "application/json"}, form)
    exr_doc = doc.get("exr") if isinstance(doc, dict) else {}
    point("channels named one by one (params part) give the layer's statistics; the answer names them",
          isinstance(doc, dict) and stats_match(doc.get("stats"), ref) and exr_doc.get("layer") == ""
          and exr_doc.get("channels", {}).get("g") == "ViewLayer.Park.G"
          and exr_doc.get("depth") == "ViewLayer.Depth.Z", f"{status} {data[:600]!r}")

    status, data, _ = render("?input.layer=ViewLayer.Diffuse")
    err = is_error(status, data, 422, "unusable_image", "input.layer")
    point("a layer the file does not have is 422 naming field input.layer and listing the file's layers",
          err and all(n in err["message"] for n in ("ViewLayer.Diffuse", "ViewLayer.Combined", "ViewLayer.Park",
                                                     "ViewLayer.Depth")), f"{status} {data!r}")

    status, data, _ = render("?input.depth=ViewLayer.Depth.Y")
    err = is_error(status, data, 422, "unusable_image", "input.depth")
    point("a depth channel the file does not have is 422 naming field input.depth and listing the channels",
          err and "ViewLayer.Depth.Y" in err["message"] and "ViewLayer.Depth.Z" in err["message"],
          f"{status} {data!r}")

    status, data, _ = render("?input.channel_r=ViewLayer.Park.R&input.channel_g=ViewLayer.Park.G"
                             "&input.channel_b=ViewLayer.Park.X")
    err = is_error(status, data, 422, "unusable_image", "input.channel_b")
    point("a colour channel the file does not have is 422 naming the one missing (input.channel_b)",
          err and "ViewLayer.Park.X" in err["message"], f"{status} {data!r}")

    status, data, _ = render("?input.layer=ViewLayer.Park&input.depth=ViewLayer.Park.R")
    point("a depth channel that is also the colour is 400 invalid_parameter naming input.depth",
          is_error(status, data, 400, PARAM_ERROR, "input.depth"), f"{status} {data!r}")

    status, data, _ = render("?input.channel_r=ViewLayer.Park.R")
    point("input.channel_r alone is 400 invalid_parameter naming input.channel_g",
          is_error(status, data, 400, PARAM_ERROR, "input.channel_g"), f"{status} {data!r}")

    status, data, _ = render("?input.layer=ViewLayer.Park", body=read_data("pmndrs_park.pfm"))
    err = is_error(status, data, 422, "unusable_image", "input.layer")
    point("a layer named for a PFM frame is 422 naming input.layer (only OpenEXR files have layers)",
          err and "OpenEXR" in err["message"], f"{status} {data!r}")

    status, data, _ = render("?input.layer=View%0ALayer")
    err = is_error(status, data, 400, PARAM_ERROR, "input.layer")
    point("a control character in a name is 400 invalid_parameter naming input.layer",
          err and "control character" in err["message"], f"{status} {data!r}")


def errors(d):
    """8 (on the main daemon): bad parameters, bad forms, bad images, wrong method and path."""
    exr = read_data("pmndrs_park.exr")

    status, _, body = request(d.port, "POST", "/v1/render?tonemap.hable.whitee=3", exr)
    err = is_error(status, body, 400, PARAM_ERROR, "tonemap.hable.whitee")
    point("an unknown parameter is 400 with field naming the dotted key", err, f"{status} {body!r}")

    form, ctype = multipart([frame_part(exr), params_part({"output": {"quality": "high"}})])
    status, _, body = request(d.port, "POST", "/v1/render", form, {"Content-Type": ctype})
    err = is_error(status, body, 400, PARAM_ERROR, "output.quality")
    point("a parameter of the wrong type (params part) is 400 with field output.quality", err, f"{status} {body!r}")

    status, _, body = request(d.port, "POST", "/v1/render?tonemap.white_point=-1", exr)
    err = is_error(status, body, 400, PARAM_ERROR, "tonemap.white_point")
    point("a parameter out of range is 400 naming the field and the range [0, 1e9]",
          err and "[0, 1e9]" in err["message"], f"{status} {body!r}")

    form2, ctype2 = multipart([frame_part(exr), ("params", b"{not json", None, "application/json")])
    status2, _, body2 = request(d.port, "POST", "/v1/render", form2, {"Content-Type": ctype2})
    point("a params part that is not JSON is 400 malformed_params naming params",
          is_error(status2, body2, 400, "malformed_params", "params"), f"{status2} {body2!r}")

    form, ctype = multipart([params_part({"output": {"format": "png"}})])
    status, _, body = request(d.port, "POST", "/v1/render", form, {"Content-Type": ctype})
    point("multipart without a frame part is 400 missing_frame",
          is_error(status, body, 400, "missing_frame", "frame"), f"{status} {body!r}")

    form, ctype = multipart([frame_part(exr), ("thumbnail", b"xyz", "t.png", "image/png")])
    status, _, body = request(d.port, "POST", "/v1/render", form, {"Content-Type": ctype})
    err = is_error(status, body, 400, "unknown_part", "thumbnail")
    point("an unknown form part is 400 unknown_part naming it", err and "thumbnail" in err["message"],
          f"{status} {body!r}")

    status, _, body = request(d.port, "POST", "/v1/render", os.urandom(4096) + b"garbage, not an image" * 50,
                              {"Content-Type": "application/octet-stream"})
    point("garbage bytes are 415 unsupported_format", is_error(status, body, 415, "unsupported_format", "frame"),
          f"{status} {body!r}")

    status, _, body = request(d.port, "POST", "/v1/render", exr[:1000])
    point("a truncated EXR (first 1000 bytes) is 400 malformed_image",
          is_error(status, body, 400, "malformed_image", "frame"), f"{status} {body!r}")

    status, headers, body = request(d.port, "GET", "/v1/render")
    allow = [m.strip() for m in headers.get("allow", "").split(",")]
    point("GET /v1/render is 405 method_not_allowed with Allow: POST",
          is_error(status, body, 405, "method_not_allowed") and allow == ["POST"], f"{status} {headers} {body!r}")

    status, _, body = request(d.port, "POST", "/v1/renderer", exr)
    point("POST to an unknown path is 404 not_found", is_error(status, body, 404, "not_found"), f"{status} {body!r}")


def limits(tmp):
    """8 (a daemon with --max_body_mb=1 --max_width=256): 413 unread, 411, 413 for a wide frame."""
    d = start("limits daemon (--max_body_mb=1 --max_width=256)", ["--max_body_mb=1", "--max_width=256"])
    if not d:
        return
    try:
        # Headers only, declaring 100 MiB: the answer must come without a byte of the body.
        try:
            status, headers, body = raw_exchange(d.port, b"POST /v1/render HTTP/1.1\r\nHost: localhost\r\n"
                                                 b"Content-Type: application/octet-stream\r\n"
                                                 b"Content-Length: 104857600\r\n\r\n")
            detail = f"{status} {headers} {body!r}"
        except OSError as e:
            status, body, detail = None, b"", f"socket: {e}"
        point("a Content-Length over --max_body_mb is 413 body_too_large before the body is sent",
              is_error(status, body, 413, "body_too_large"), detail)

        try:
            status, headers, body = raw_exchange(d.port, b"POST /v1/render HTTP/1.1\r\nHost: localhost\r\n"
                                                 b"Content-Type: application/octet-stream\r\n\r\n")
            detail = f"{status} {headers} {body!r}"
        except OSError as e:
            status, body, detail = None, b"", f"socket: {e}"
        point("a POST without Content-Length and not chunked is 411 length_required",
              is_error(status, body, 411, "length_required"), detail)

        pfm = read_data("pmndrs_park.pfm")  # 1.5 MiB
        conn = http.client.HTTPConnection(HOST, d.port, timeout=scaled(REQUEST_TIMEOUT_S))
        try:
            conn.request("POST", "/v1/render", body=iter([pfm[i:i + 65536] for i in range(0, len(pfm), 65536)]),
                         headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
            resp = conn.getresponse()
            status, body, detail = resp.status, resp.read(), ""
        except (OSError, http.client.HTTPException) as e:
            status, body, detail = None, b"", f"{type(e).__name__}: {e}"
        finally:
            conn.close()
        point("a chunked body growing over --max_body_mb is 413 body_too_large",
              is_error(status, body, 413, "body_too_large"), f"{status} {body!r} {detail}")

        status, _, body = request(d.port, "POST", "/v1/render", read_data("pmndrs_park.exr"))
        err = is_error(status, body, 413, "too_large", "frame")
        point("a frame wider than --max_width=256 is 413 too_large naming the width",
              err and "width" in err["message"] and "512" in err["message"], f"{status} {body!r}")

        status, _, body = request(d.port, "POST", "/v1/render", read_data("pmndrs_park.exr")[:100000])
        point("a frame under the limits of size but wider than max_width is judged from its header (413)",
              is_error(status, body, 413, "too_large", "frame"), f"{status} {body!r}")
    finally:
        stop(d)


def auth():
    """9: --auth_token."""
    d = start("auth daemon (--auth_token=s3cret)", ["--auth_token=s3cret"])
    if not d:
        return
    try:
        exr = read_data("pmndrs_park.exr")
        status, headers, body = request(d.port, "POST", "/v1/render", exr)
        point("without Authorization /v1/render is 401 unauthorized with WWW-Authenticate: Bearer",
              is_error(status, body, 401, "unauthorized") and headers.get("www-authenticate", "").startswith("Bearer"),
              f"{status} {headers} {body!r}")
        answers = [request(d.port, "POST", "/v1/render", exr, {"Authorization": a})
                   for a in ("Bearer s3crex", "Bearer s3cret2", "Bearer s3cre", "Basic s3cret", "s3cret")]
        point("a wrong token (or scheme) is 401 unauthorized",
              all(is_error(s, b, 401, "unauthorized") for s, _, b in answers), f"{[(s, b) for s, _, b in answers]}")
        status, headers, body = request(d.port, "POST", "/v1/render", exr, {"Authorization": "Bearer s3cret"})
        point("the right token is 200 with the image", status == 200 and webp_size(body) == (512, 256),
              f"{status} {headers} {body[:300]!r}")
        status, headers, body = request(d.port, "POST", "/v1/analyze", exr)
        point("/v1/analyze needs the token too", is_error(status, body, 401, "unauthorized"), f"{status} {body!r}")
        bare = [request(d.port, "GET", path)[0] for path in ("/v1/gpu", "/metrics")]
        keyed = [request(d.port, "GET", path, None, {"Authorization": "Bearer s3cret"})[0]
                 for path in ("/v1/gpu", "/metrics")]
        point("/v1/gpu and /metrics are 401 without the token and 200 with it", bare == [401, 401] and keyed == [200, 200],
              f"without {bare}, with {keyed}")
        live = request(d.port, "GET", "/livez")
        ready = request(d.port, "GET", "/readyz")
        point("/livez and /readyz answer 200 without a token", live[0] == 200 and ready[0] == 200,
              f"livez {live[0]} {live[2]!r}, readyz {ready[0]} {ready[2]!r}")
    finally:
        stop(d)


def parallel(d, tmp):
    """10: 32 requests at once, mixed formats and operators, each answered with its own image."""
    exr = read_data("pmndrs_park.exr")
    variants = []
    for op in ("reinhard_extended", "hable", "agx", "aces_hill"):
        for fmt in ("webp", "png"):
            variants.append((op, fmt))
    # The serial answers first: the encoders and the dither are deterministic, so the parallel ones must
    # be byte for byte the same.
    serial = {}
    for op, fmt in variants:
        status, _, body = request(d.port, "POST", f"/v1/render?tonemap.operator={op}&output.format={fmt}", exr)
        serial[(op, fmt)] = body if status == 200 else None

    def one(i):
        op, fmt = variants[i % len(variants)]
        rid = f"parallel-{i}"
        status, headers, body = request(d.port, "POST", f"/v1/render?tonemap.operator={op}&output.format={fmt}",
                                        exr, {"X-Request-Id": rid})
        return i, op, fmt, status, headers, body, rid

    t0 = time.monotonic()
    results = concurrently([lambda i=i: one(i) for i in range(32)])
    elapsed = time.monotonic() - t0
    problems = []
    for k, (res, exc) in enumerate(results):
        if exc is not None:
            problems.append(f"request {k}: {type(exc).__name__}: {exc}")
            continue
        i, op, fmt, status, headers, body, rid = res
        size = webp_size(body) if fmt == "webp" else png_size(body)
        if status != 200 or size != (512, 256) or headers.get("content-type") != f"image/{fmt}":
            problems.append(f"request {i} ({op}, {fmt}): {status} {headers.get('content-type')} size {size} "
                            f"{body[:200]!r}")
        elif headers.get("x-request-id") != rid:
            problems.append(f"request {i}: X-Request-Id {headers.get('x-request-id')!r}, sent {rid!r}")
        elif body != serial[(op, fmt)]:
            problems.append(f"request {i} ({op}, {fmt}): image differs from the serial answer "
                            f"({len(body)} bytes against {len(serial[(op, fmt)] or b'')})")
    point(f"32 parallel requests (4 operators x webp/png) all 200, each its own request's image "
          f"({elapsed:.1f} s)", not problems and all(v is not None for v in serial.values()), "\n".join(problems))

    # A few of those images against the CPU reference: the PNGs of two operators.
    details, ok = [], True
    for op in ("hable", "agx"):
        params = {"tonemap": {"operator": op}, "output": {"format": "png"}}
        ref, image = cpu(tmp, "pmndrs_park.exr", params)
        good, detail = png_matches_8bit(serial[(op, "png")] or b"", image, ref["width"], ref["height"])
        ok = ok and good
        details.append(f"{op}: {detail}")
    point("the parallel PNGs (hable, agx) equal cpu_render", ok, "\n".join(details))


def hang_up(d):
    """Clients that hang up while their frame waits in the queue: the frame is dropped (logged 499), the
    others are answered. d runs with --test_gpu_delay_ms=SLOW_GPU_MS, so each keeper's frame holds the GPU
    for SLOW_GPU_MS and a hanger's frame, queued behind at least one of them, is still waiting when its
    client hangs up 0.15 s after sending it."""
    exr = read_data("pmndrs_park.exr")

    def keeper(i):
        return request(d.port, "POST", "/v1/render", exr, {"X-Request-Id": f"hang-keep-{i}"})

    def hanger(i):
        # Behind the keepers in the queue: their frames are decoded and queued well within 0.3 s even on a
        # loaded 2-core machine (0.02 s let a hanger's frame overtake one still decoding, and run). Both sleeps
        # stretch by HDRPOST_TEST_TIME_FACTOR as SLOW_GPU_MS does: the same order of events at any factor.
        time.sleep(scaled(0.3))
        with socket.create_connection((HOST, d.port), timeout=scaled(10)) as s:
            s.sendall(f"POST /v1/render HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: hang-drop-{i}\r\n"
                      f"Content-Length: {len(exr)}\r\n\r\n".encode() + exr)
            time.sleep(scaled(0.15))  # the body is in; the frame waits behind the keepers
        return None

    results = concurrently([lambda i=i: keeper(i) for i in range(4)] + [lambda i=i: hanger(i) for i in range(4)])
    problems = []
    for k, (res, exc) in enumerate(results[:4]):
        if exc is not None:
            problems.append(f"keeper {k}: {type(exc).__name__}: {exc}")
        elif res[0] != 200 or webp_size(res[2]) != (512, 256):
            problems.append(f"keeper {k}: {res[0]} {res[2][:200]!r}")
    problems += [f"hanger {k}: {exc}" for k, (_, exc) in enumerate(results[4:]) if exc is not None]
    # Every hanger's frame is dropped unrun, at once: the watch on suspended connections (api/http/deferred.c)
    # sees the hang-up within HP_DEFERRED_WATCH_MS and the queue lets go of the frame, so the request ends
    # (logged 499, or with status 0 "(connection error)" when libmicrohttpd saw the closed socket before
    # the answer) well before the keepers ahead of it are done: within SLOW_GPU_MS of being sent, where
    # waiting for the GPU to reach it would take three keepers' frames and more. A frame that ran would be
    # logged 200.
    for i in range(4):
        d.wait_line(rf"id=hang-drop-{i} POST /v1/render ", 30)
    lines = d.log().splitlines()
    gone = r" (499 |0 [0-9.]+ ms \(connection error\))"
    dropped = {i for i in range(4) if any(re.search(rf"id=hang-drop-{i} POST /v1/render .*{gone}", l) for l in lines)}
    took = [float(m.group(1)) for l in lines
            for m in [re.search(r"id=hang-drop-\d POST /v1/render .* ([0-9.]+) ms", l)] if m]
    said = sum("took a queued frame out of the queue: its client went away" in l for l in lines)
    metrics = request(d.port, "GET", "/metrics")[2].decode()
    queued = re.search(r'hdrpost_frames_cancelled_total\{stage="queued"\} (\d+)', metrics)
    point("clients that hang up while their frames are queued have the frames taken out of the queue at once "
          "(4 drops logged, each request over within SLOW_GPU_MS, hdrpost_frames_cancelled_total{stage=queued} "
          "4, no hanger's frame run); the others get their images",
          not problems and dropped == {0, 1, 2, 3} and said == 4 and len(took) == 4
          and max(took) < SLOW_GPU_MS and queued and int(queued.group(1)) == 4,
          "\n".join(problems) + f"\n499 for hangers {sorted(dropped)}, {said} drop line(s), ms {took}, "
          f"metric {queued.group(0) if queued else None}\n"
          + "\n".join(l for l in lines if "hang-" in l or "dropped" in l or "took a queued" in l))


def hang_up_arriving(d):
    """A client that goes away while its raw frame arrives: the early decoder reading it (api/frames/early_decode.c)
    is dropped with the request, counted as hdrpost_frames_cancelled_total{stage="arriving"}, and the bytes
    it took from the memory budget are back: hdrpost_inflight_bytes returns to 0."""
    exr = read_data("pmndrs_park.exr")  # over 64 KiB: decoded as it arrives
    before = metrics_values(d.port)[2]
    with socket.create_connection((HOST, d.port), timeout=scaled(10)) as s:
        s.sendall(f"POST /v1/render HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: hang-arriving\r\n"
                  f"Content-Length: {len(exr)}\r\n\r\n".encode() + exr[:len(exr) * 2 // 3])
        time.sleep(scaled(0.3))  # the header is in, the decoder has begun
    logged = d.wait_line(r"id=hang-arriving POST /v1/render ", 10)
    after, deadline = {}, time.time() + scaled(5)
    while time.time() < deadline:
        after = metrics_values(d.port)[2]
        if after.get("hdrpost_inflight_bytes") == 0:
            break
        time.sleep(0.05)
    key = 'hdrpost_frames_cancelled_total{stage="arriving"}'
    point("a client that hangs up mid-upload while its frame decodes: counted as cancelled while arriving, and "
          "its budget given back (hdrpost_inflight_bytes 0)", logged and after.get(key, 0) == before.get(key, 0) + 1
          and after.get("hdrpost_inflight_bytes") == 0,
          f"{key}: {before.get(key)} -> {after.get(key)}, inflight {after.get('hdrpost_inflight_bytes')}\n"
          + "\n".join(l for l in d.log().splitlines() if "hang-arriving" in l))


def overload():
    """11: --queue_depth=1 --encode_threads=1, 12 requests at once."""
    d = start("overload daemon (--queue_depth=1 --encode_threads=1)", ["--queue_depth=1", "--encode_threads=1"])
    if not d:
        return
    try:
        exr = read_data("pmndrs_park.exr")
        results = concurrently([lambda: request(d.port, "POST", "/v1/render", exr) for _ in range(12)])
        problems, counts, retry_ok = [], {}, False
        for k, (res, exc) in enumerate(results):
            if exc is not None:
                problems.append(f"request {k}: no answer: {type(exc).__name__}: {exc}")
                continue
            status, headers, body = res
            counts[status] = counts.get(status, 0) + 1
            if status == 200:
                if webp_size(body) != (512, 256):
                    problems.append(f"request {k}: 200 without a 512x256 WebP: {body[:100]!r}")
            elif status == 429:
                if is_error(status, body, 429, "queue_full") and headers.get("retry-after", "").isdigit():
                    retry_ok = True
                else:
                    problems.append(f"request {k}: 429 without queue_full or Retry-After: {headers} {body!r}")
            else:
                problems.append(f"request {k}: {status} {body[:300]!r}")
        point("overload: all 12 answered, each 200 or 429; some 429 queue_full with Retry-After, some 200",
              not problems and retry_ok and counts.get(200, 0) >= 1, f"statuses {counts}\n" + "\n".join(problems))
        status, _, body = request(d.port, "POST", "/v1/render", exr)
        point("overload: the daemon still renders once the burst is over", status == 200, f"{status} {body[:200]!r}")
    finally:
        stop(d)


def deadline():
    """12: --request_timeout_s=0.1 (the setting's minimum), 8 requests at once. Each frame holds the GPU for
    SLOW_GPU_MS (--test_gpu_delay_ms), so a frame queued behind another waits past its 0.1 s; the first
    one taken is run, because the delay comes after the deadline check."""
    d = start(f"deadline daemon (--queue_depth=16 --request_timeout_s=0.1 --test_gpu_delay_ms={SLOW_GPU_MS})",
              ["--queue_depth=16", "--request_timeout_s=0.1", f"--test_gpu_delay_ms={SLOW_GPU_MS}"])
    if not d:
        return
    try:
        exr = read_data("pmndrs_park.exr")
        results = concurrently([lambda: request(d.port, "POST", "/v1/render", exr) for _ in range(8)])
        problems, counts = [], {}
        for k, (res, exc) in enumerate(results):
            if exc is not None:
                problems.append(f"request {k}: no answer: {type(exc).__name__}: {exc}")
                continue
            status, headers, body = res
            counts[status] = counts.get(status, 0) + 1
            if status == 200:
                if webp_size(body) != (512, 256):
                    problems.append(f"request {k}: 200 without a 512x256 WebP: {body[:100]!r}")
            elif not ((err := is_error(status, body, 504, "deadline_exceeded")) and "deadline" in err["message"]):
                problems.append(f"request {k}: {status} {body[:300]!r}")
        point("deadline: all 8 answered; some 504 deadline_exceeded, the rest 200 with the image",
              not problems and counts.get(504, 0) >= 1 and counts.get(200, 0) >= 1,
              f"statuses {counts}\n" + "\n".join(problems))
    finally:
        stop(d)


def drain(d):
    """13: SIGTERM 0.2 s after 6 requests went out: every accepted request gets its image, exit 0. d runs
    with --test_gpu_delay_ms=SLOW_GPU_MS, so the six frames take at least 6 x SLOW_GPU_MS on the GPU and
    those accepted before the signal are still queued or running when it comes."""
    exr = read_data("pmndrs_park.exr")
    want = request(d.port, "POST", "/v1/render?output.format=png", exr)[2]
    sent = threading.Barrier(7)

    def one(i):
        conn = http.client.HTTPConnection(HOST, d.port, timeout=scaled(REQUEST_TIMEOUT_S))
        try:
            conn.request("POST", "/v1/render?output.format=png", body=exr, headers={"X-Request-Id": f"drain-{i}"})
            try:
                sent.wait(timeout=scaled(30))
            except threading.BrokenBarrierError:
                pass
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, time.monotonic()
        finally:
            conn.close()

    holder = {}

    def fire():
        holder["results"] = concurrently([lambda i=i: one(i) for i in range(6)])

    t = threading.Thread(target=fire, daemon=True)
    t.start()
    try:
        sent.wait(timeout=scaled(30))
    except threading.BrokenBarrierError:
        pass
    time.sleep(scaled(0.2))  # the handlers have decoded and queued the frames; the first is on the GPU
    signalled = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    t.join(timeout=scaled(REQUEST_TIMEOUT_S + 60))
    rc = d.wait_exit(STOP_TIMEOUT_S)
    problems, counts, after = [], {}, 0
    for k, (res, exc) in enumerate(holder.get("results", [(None, TimeoutError("no results"))] * 6)):
        if exc is not None:
            problems.append(f"request {k}: no answer: {type(exc).__name__}: {exc}")
            continue
        status, headers, body, when = res
        counts[status] = counts.get(status, 0) + 1
        if status == 200:
            after += when > signalled
            if body != want:
                problems.append(f"request {k}: 200 but not the image ({len(body)} bytes against {len(want)})")
        elif not (is_error(status, body, 503, "not_ready") and "draining" in body.decode("utf-8", "replace")):
            problems.append(f"request {k}: {status} {headers} {body[:300]!r}")
    # A request whose handler had not run at the signal is refused 503 not_ready "draining" (api/frames/render.c
    # takes no frames unless ready); one that was queued must be finished. At least one must have been
    # answered after the signal, or the drain was not exercised.
    point("drain: SIGTERM 0.2 s after 6 requests: each answered (200 with its image, or 503 draining if it "
          "had not been taken), at least one 200 after the signal, exit 0",
          not problems and after >= 1 and rc == 0,
          f"statuses {counts}, 200s after the signal {after}, exit code {rc}\n" + "\n".join(problems)
          + "\n" + d.log()[-3000:])
    return rc


def slow_gpu():
    """Hung-up clients and the drain on a daemon whose every frame holds the GPU for SLOW_GPU_MS."""
    d = start(f"slow-GPU daemon (--test_gpu_delay_ms={SLOW_GPU_MS})", [f"--test_gpu_delay_ms={SLOW_GPU_MS}"])
    if not d:
        return
    try:
        warned = d.wait_line(rf"test_gpu_delay_ms = {SLOW_GPU_MS}\b", 5)
        point("the slow-GPU daemon warns that the test delay is on", warned, d.log())
        guarded(hang_up, d)
        rc = guarded(drain, d)
        bad = validation_lines(d)
        point("slow-GPU daemon: exit code 0 after the drain with no validation-layer message", rc == 0 and not bad,
              f"exit code {rc}\n" + "\n".join(bad))
    finally:
        d.kill()
        d.dump()


def drain_timeout():
    """14: a drain that times out: SIGTERM while a frame holds the GPU for 3 s, with --shutdown_timeout_s=0.3.
    The client waiting for it gets 503 not_ready saying the drain timed out, and the daemon exits 0
    (libmicrohttpd aborts the process if it is stopped with that connection still suspended: it did)."""
    d = start(f"drain-timeout daemon (--shutdown_timeout_s=0.3 {gpu_delay(3000)})",
              ["--shutdown_timeout_s=0.3", gpu_delay(3000)])
    if not d:
        return
    try:
        exr = read_data("pmndrs_park.exr")
        holder = {}

        def one():
            holder["answer"] = request(d.port, "POST", "/v1/render", exr)

        t = threading.Thread(target=one, daemon=True)
        t.start()
        time.sleep(scaled(0.8))  # the frame is on the GPU thread, in its 3 s delay (both stretched alike)
        d.proc.send_signal(signal.SIGTERM)
        t.join(timeout=scaled(30))
        rc = d.wait_exit(STOP_TIMEOUT_S)
        status, _, body = holder.get("answer", (None, None, b""))
        text = body.decode("utf-8", "replace") if body else ""
        bad = validation_lines(d)
        point("a drain that times out answers the frame still running 503 not_ready (drain timeout) and exits 0 "
              "with no validation-layer message",
              is_error(status, body, 503, "not_ready") and "drain timeout" in text and rc == 0 and not bad,
              f"{status} {body[:300]!r}, exit code {rc}\n" + "\n".join(bad) + "\n" + d.log()[-2000:])
    finally:
        d.kill()
        d.dump()


def guarded(fn, *args):
    """Runs one group of test points; an exception fails a point of its own and the next group still runs."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - reported as a failed test point
        point(f"{fn.__name__}: the test group ran to the end", False, traceback.format_exc())
        return None


# Colour spaces (issue 17), written here independently of pipeline/colorspace.c: the normalized primary
# matrix of SMPTE RP 177 and the Bradford adaptation (Lindbloom, "Chromatic Adaptation"), in double.
REC709_XY = (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.3127, 0.3290)
AP1_XY = (0.713, 0.293, 0.165, 0.830, 0.128, 0.044, 0.32168, 0.33767)  # ACES S-2014-004


def colorspaces(d, tmp):
    """Input colour spaces: the same colours written in Rec.709 and in ACEScg primaries render alike (tagged by
    the attribute, or named by input.colorspace), the answer says which space was used and why, and
    chromaticities that make no RGB space are refused by name."""
    w, h = 24, 16
    rgb709 = {"R": array.array("f"), "G": array.array("f"), "B": array.array("f")}
    for y in range(h):
        for x in range(w):
            # saturated and pale colours, 8 stops of brightness
            r, g, b = (0.05 + (x % 6) / 5.0, 0.05 + (y % 4) / 3.0, 0.05 + ((x + y) % 5) / 4.0)
            k = 2.0 ** (x // 6 + y // 4 * 2 - 4)
            for ch, v in zip("RGB", (r * k, g * k, b * k)):
                rgb709[ch].append(v)
    to_ap1 = mat_mul(mat_inv(rgb_to_xyz_d65(AP1_XY)), rgb_to_xyz_d65(REC709_XY))
    ap1 = {"R": array.array("f"), "G": array.array("f"), "B": array.array("f")}
    for i in range(w * h):
        v = [rgb709[ch][i] for ch in "RGB"]
        for r, ch in enumerate("RGB"):
            ap1[ch].append(mat_vec(to_ap1, v)[r])
    exr709, ap1_untagged = exr_write(w, h, rgb709), exr_write(w, h, ap1)
    ap1_tagged = exr_write(w, h, ap1, AP1_XY)

    def render(body, query=""):
        status, headers, data = request(d.port, "POST", "/v1/render?output.format=png" + query, body)
        if status != 200:
            return status, headers.get("x-input-colorspace"), None, data[:300]
        return status, headers.get("x-input-colorspace"), png_decode(data)[4], None

    s0, tag0, want, e0 = render(exr709)
    point("a Rec.709 frame without chromaticities is read as rec709 by default", s0 == 200 and
          tag0 == "rec709; source=default", f"{s0} {tag0} {e0!r}")
    for label, body, query, tag in (("tagged ACEScg (the attribute)", ap1_tagged, "", "acescg; source=attribute"),
                                    ("untagged ACEScg with input.colorspace=acescg", ap1_untagged,
                                     "&input.colorspace=acescg", "acescg; source=parameter")):
        s, t, got, e = render(body, query)
        worst = max(abs(a - b) for a, b in zip(got, want)) if got and want else None
        point(f"{label} renders as the same colours in Rec.709, within 1 level, and says so ({tag})",
              s == 200 and t == tag and worst is not None and worst <= 1 and len(got) == len(want),
              f"{s} {t} worst {worst} {e!r}")
    s, t, got, _ = render(ap1_untagged)
    worst = max(abs(a - b) for a, b in zip(got, want)) if got and want else 0
    point("the same ACEScg frame read as Rec.709 does not (the parameter and the attribute matter)",
          s == 200 and worst > 8, f"{s} {t} worst {worst}")
    s, t, got, _ = render(ap1_tagged, "&input.colorspace=rec709")
    point("input.colorspace wins over the file's attribute", s == 200 and t == "rec709; source=parameter",
          f"{s} {t}")
    status, _, body = request(d.port, "POST", "/v1/analyze", ap1_tagged, headers={"Accept": "application/json"})
    doc = json_body(body) or {}
    point("/v1/analyze says which space and why", status == 200 and
          doc.get("colorspace") == {"input": "acescg", "source": "attribute", "output": "srgb"},
          f"{status} {doc.get('colorspace')}")
    for label, chroma in (("collinear primaries", (0.64, 0.33, 0.30, 0.60, 0.47, 0.465, 0.3127, 0.3290)),
                          ("a white outside the primaries", (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.70, 0.25)),
                          ("a white with y = 0", (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.3127, 0.0))):
        status, _, body = request(d.port, "POST", "/v1/render", exr_write(w, h, rgb709, chroma))
        err = is_error(status, body, 422, "unusable_image", "input.colorspace")
        point(f"chromaticities with {label} are refused: 422 naming input.colorspace", err is not None,
              f"{status} {body[:300]!r}")
    status, _, _ = request(d.port, "POST", "/v1/render", exr709)
    point("the daemon serves after the refused chromaticities", status == 200, f"{status}")
    # Rec.709 under D50, as blender_city.exr records sRGB: Bradford takes it back to the identity (1e-4), so
    # it runs as Rec.709, byte for byte as when told so.
    city = read_data("blender_city.exr")
    s1, h1, a = request(d.port, "POST", "/v1/render?output.format=png&output.bit_depth=16", city)
    s2, _, b = request(d.port, "POST", "/v1/render?output.format=png&output.bit_depth=16&input.colorspace=rec709",
                       city)
    point("sRGB primaries under a D50 white (blender_city.exr) run as Rec.709, byte for byte",
          s1 == s2 == 200 and h1.get("x-input-colorspace") == "rec709; source=attribute" and a == b,
          f"{s1} {s2} {h1.get('x-input-colorspace')} {len(a)} {len(b)}")
    # GPU against the CPU reference for a frame read as another space (cpu_render resolves it the same way).
    params = {"input": {"colorspace": "aces2065"}, "output": {"format": "png"}}
    ref, image = cpu(tmp, "pmndrs_park.hdr", params)
    status, headers, body = request(d.port, "POST", "/v1/render?input.colorspace=aces2065&output.format=png",
                                    read_data("pmndrs_park.hdr"))
    ok, detail = png_matches_8bit(body, image, ref["width"], ref["height"]) if status == 200 else (False, status)
    point("a Radiance frame read as ACES2065-1 equals cpu_render (99.9% identical, none off by more than 1)",
          ok and headers.get("x-input-colorspace") == "aces2065; source=parameter", detail)

    output_colorspaces(d, tmp, ap1_tagged)


def output_colorspaces(d, tmp, ap1_tagged):
    """Output colour spaces over HTTP: the image in P3 or BT.2020 equals cpu_render's (which resolves and
    converts the same way), the answer names the space, the files carry their tags, and rec2020 outside
    16-bit PNG is refused by name."""
    for space, query, params, depth in (
            ("display_p3", "&output.format=png", {"output": {"format": "png", "colorspace": "display_p3"}}, 8),
            ("rec2020", "&output.format=png&output.bit_depth=16",
             {"output": {"format": "png", "bit_depth": 16, "colorspace": "rec2020"}}, 16)):
        ref, image = cpu(tmp, "pmndrs_park.hdr", params)
        status, headers, body = request(d.port, "POST", "/v1/render?output.colorspace=" + space + query,
                                        read_data("pmndrs_park.hdr"))
        if status != 200:
            point(f"a Radiance frame for {space} equals cpu_render", False, f"{status} {body[:300]!r}")
            continue
        size_ok, n, same, big, _, detail = compare_png(body, image, ref["width"], ref["height"], depth)
        tagged = b"iCCP" in body[:2000] and b"sRGB" not in body[:2000]
        point(f"a Radiance frame for {space} ({depth}-bit PNG) equals cpu_render, carries an ICC profile and no "
              "sRGB chunk, and X-Output-Colorspace says so",
              size_ok and n > 0 and (same >= 0.999 * n and big == 0 if depth == 8 else same >= 0.99 * n and
                                     big * 1e6 <= n) and tagged and headers.get("x-output-colorspace") == space,
              f"{detail} tagged {tagged} header {headers.get('x-output-colorspace')!r}")
    status, headers, body = request(d.port, "POST", "/v1/render?output.colorspace=display_p3", ap1_tagged,
                                    headers={"Accept": "application/json"})
    doc = json_body(body) or {}
    point("the JSON answer names the output space beside the input's",
          status == 200 and doc.get("colorspace") == {"input": "acescg", "source": "attribute",
                                                      "output": "display_p3"}, f"{status} {doc.get('colorspace')}")
    for query in ("output.colorspace=rec2020", "output.colorspace=rec2020&output.format=png"):
        status, _, body = request(d.port, "POST", "/v1/render?" + query, read_data("pmndrs_park.hdr"))
        point(f"{query} is refused: 400 naming output.colorspace (16-bit PNG only)",
              is_error(status, body, 400, "invalid_parameter", "output.colorspace") is not None,
              f"{status} {body[:300]!r}")


LOOKS = {  # what docs/PARAMETERS.md says each look sets, written out as a client would
    "blender": {"exposure": {"mode": "fixed", "stops": 0}, "tonemap": {"operator": "agx"}, "gamma": {"mode": "srgb"}},
    "aces_filmic": {"exposure": {"mode": "fixed", "stops": 0}, "tonemap": {"operator": "aces_hill"},
                    "gamma": {"mode": "srgb"}},
    "neutral": {"exposure": {"mode": "fixed", "stops": 0}, "tonemap": {"operator": "khronos_neutral"},
                "gamma": {"mode": "srgb"}},
    "analysis": {"exposure": {"mode": "fixed", "stops": 0}, "tonemap": {"operator": "false_color"},
                 "gamma": {"mode": "linear"}},
}


def looks(d, tmp):
    """Named looks: each renders a real frame as cpu_render does with the parameters it stands for (the GPU
    against the CPU reference, so `blender` is checked against algorithms.md 3.9's AgX), byte for byte as
    the same parameters sent explicitly; the request's own parameters override a look in whatever order
    they come; an unknown look is refused by name."""
    frame = read_data("blender_street_960x540_singlelayer.exr")
    for name, params in LOOKS.items():
        ref, image = cpu(tmp, "blender_street_960x540_singlelayer.exr", dict(params, output={"format": "png"}))
        status, _, by_look = request(d.port, "POST", f"/v1/render?look={name}&output.format=png", frame)
        ok, detail = png_matches_8bit(by_look, image, ref["width"], ref["height"]) if status == 200 else \
            (False, f"{status} {by_look[:300]!r}")
        point(f"look={name} renders the street frame as cpu_render with its parameters", ok, detail)
        body, ctype = multipart([frame_part(frame), params_part(dict(params, output={"format": "png"}))])
        status2, _, explicit = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
        point(f"look={name} is byte for byte its parameters sent explicitly", status == status2 == 200 and
              by_look == explicit, f"{status} {status2} {len(by_look)} {len(explicit)} bytes")
    # Overrides, in both orders: hable in the params part with the look in the query, and the look in the
    # params part with hable in the query, both equal to everything explicit.
    want_params = dict(LOOKS["blender"], tonemap={"operator": "hable"}, output={"format": "png"})
    body, ctype = multipart([frame_part(frame), params_part(want_params)])
    _, _, want = request(d.port, "POST", "/v1/render", body, {"Content-Type": ctype})
    for label, part, query in (("the look in the query, the operator in the params part",
                                {"tonemap": {"operator": "hable"}, "output": {"format": "png"}}, "?look=blender"),
                               ("the look in the params part, the operator in the query",
                                {"look": "blender", "output": {"format": "png"}}, "?tonemap.operator=hable")):
        body, ctype = multipart([frame_part(frame), params_part(part)])
        status, _, got = request(d.port, "POST", "/v1/render" + query, body, {"Content-Type": ctype})
        point(f"a parameter overrides the look: {label}", status == 200 and got == want and png_size(got),
              f"{status} {len(got)} against {len(want)} bytes")
    status, _, body = request(d.port, "POST", "/v1/render?look=blender", frame, {"Accept": "application/json"})
    echo = (json_body(body) or {}).get("params", {})
    point("the answer's params echo the look and what it set", status == 200 and echo.get("look") == "blender" and
          echo.get("tonemap", {}).get("operator") == "agx", f"{status} {echo.get('look')} {echo.get('tonemap')}")
    status, _, body = request(d.port, "POST", "/v1/render?look=filmic", frame)
    err = is_error(status, body, 400, PARAM_ERROR, "look")
    point("an unknown look is refused naming look and listing the looks", err is not None and
          "blender" in err["message"], f"{status} {body[:300]!r}")


def raw_input(d):
    """Raw float32/float16 samples with input.width, input.height, input.channels, input.type."""
    w, h = 64, 32
    rgb = b"".join(struct.pack("<3f", x / w, y / h, 0.25) for y in range(h) for x in range(w))
    q = f"?input.width={w}&input.height={h}&input.channels=3&output.format=png"
    status, headers, body = request(d.port, "POST", "/v1/render" + q, body=rgb)
    point("raw float32 RGB samples render to a PNG of their size", status == 200 and png_size(body) == (w, h),
          f"{status} {body[:200]!r}")
    grey = [((x + y) % 97) / 96.0 for y in range(h) for x in range(w)]
    half = b"".join(struct.pack("<e", v) for v in grey)
    values = [struct.unpack("<e", struct.pack("<e", v))[0] for v in grey]
    q = f"?input.width={w}&input.height={h}&input.channels=1&input.type=float16"
    status, _, body = request(d.port, "POST", "/v1/analyze" + q, body=half)
    doc = json_body(body) or {}
    st = doc.get("stats", {})
    # Grey: Y = v * (0.2126390059 + 0.7151686788 + 0.0721923154) in fp32, within 1e-6 of v.
    mean = sum(values) / len(values)
    point("raw float16 grey samples analyze: counts exact, max and mean of the samples",
          status == 200 and doc.get("input_format") == "raw" and st.get("finite_pixels") == w * h and
          close(st.get("max", -1), max(values), 1e-5) and close(st.get("mean", -1), mean, 1e-4), f"{status} {doc}")
    status, _, body = request(d.port, "POST", f"/v1/render?input.width={w + 1}&input.height={h}&input.channels=3",
                              body=rgb)
    err = is_error(status, body, 400, "malformed_image", "frame")
    point("a raw body of the wrong size is refused naming the sizes", err is not None and "bytes" in err["message"],
          f"{status} {body!r}")
    status, _, body = request(d.port, "POST", f"/v1/render?input.width={w}", body=rgb)
    point("input.width without input.height is refused naming input.height",
          is_error(status, body, 400, PARAM_ERROR, "input.height") is not None, f"{status} {body!r}")


# Under HDRPOST_TEST_QUICK (the ThreadSanitizer pass): on the main daemon, frames decoded while they arrive
# (the early decoders), 32 requests at once, and a client gone while its frame decodes. (Clients gone while
# their frames are queued, and the drain, are threads_http's too.)
QUICK = (early_decoding, parallel, hang_up_arriving)


def main():
    for exe in (EXE, CPU_RENDER):
        if not os.access(exe, os.X_OK):
            print(f"not ok 1 - {exe} is built and executable")
            print("1..1")
            return 1
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hdrpostd-render-test-") as tmp:
        # The main daemon's queue holds the 32 parallel frames (the default of 16 could answer some 429).
        d = guarded(start, "main daemon", ["--queue_depth=64"])
        if d:
            try:
                for test in harness.groups((render_chunked,), QUICK):
                    guarded(test, d)
                for test in harness.groups((render_raw_exr, render_png_8bit, render_png_16bit, render_multipart,
                                            alpha_output, render_json, render_accept, analyze, early_decoding, parallel, exr_layers,
                                            looks, colorspaces), QUICK):
                    guarded(test, d, tmp)
                for test in harness.groups((render_depth, depth_of_field, errors, raw_input, status_routes,
                                            hang_up_arriving), QUICK):
                    guarded(test, d)
                for test in harness.groups((compressions,), QUICK):
                    guarded(test, d, tmp)
            finally:
                stop(d)
        for test in harness.groups((limits,), QUICK):
            guarded(test, tmp)
        for test in harness.groups((auth, overload, deadline, slow_gpu, drain_timeout), QUICK):
            guarded(test)
    print(f"# {time.monotonic() - t_start:.1f} s", flush=True)
    print(f"1..{harness.count()}", flush=True)
    return 1 if harness.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
