#!/usr/bin/env python3
"""EXR ZIP chunks inflated on the GPU over HTTP (issue 20; pipeline/exr_zip_gpu.h): exr_zip_decoder gpu against cpu.

Usage: test_exr_zip.py PATH/TO/hdrpostd PATH/TO/make_frame. Prints TAP. Two daemons, one with
--exr_zip_decoder=gpu and one with cpu, each with --validation (any validation-layer message fails), get the
same requests:
  - real frames made by tools/make_frame (ZIP with 16-line chunks and ZIPS with 1-line chunks, RGBA half),
    posted as the raw body: the PNG answers and the /v1/analyze statistics are the same, byte for byte, and
    hdrpost_exr_zip_frames_total counts them under gpu on the one and cpu on the other;
  - a damaged chunk: both answer 400 malformed_image naming the same chunk and scanlines;
  - a PIZ frame and a ZIP frame in a multipart form go to the CPU on the gpu daemon too (not counted as gpu);
  - afterwards no pinned block is out and the memory budget is whole; the daemons still serve.
A daemon left at the default (auto) on lavapipe inflates on the CPU and says so at start-up.
"""

import json
import os
import subprocess
import sys
import time

import harness
from harness import point

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
MAKE_FRAME = sys.argv[2] if len(sys.argv) > 2 else "make_frame"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
SOURCE = os.path.join(DATA, "blender_street_960x540_singlelayer.exr")
REQUEST_TIMEOUT_S = 300  # lavapipe runs the inflate in slices: seconds a frame


def make(tmp, compression):
    path = os.path.join(tmp, f"street_{compression}.exr")
    subprocess.run([MAKE_FRAME, SOURCE, path, "1", compression], check=True, capture_output=True, timeout=120)
    with open(path, "rb") as f:
        return f.read()


def post(port, path, body, query, headers=None):
    return harness.request(port, "POST", f"{path}?{query}", body, headers, timeout=REQUEST_TIMEOUT_S)


def zip_frames(port):
    """hdrpost_exr_zip_frames_total by decoder."""
    _, _, text = harness.request(port, "GET", "/metrics")
    out = {"cpu": 0.0, "gpu": 0.0}
    for ln in text.decode(errors="replace").splitlines():
        if ln.startswith("hdrpost_exr_zip_frames_total{"):
            out[ln.split('decoder="')[1].split('"')[0]] = float(ln.split()[-1])
    return out


def error_of(status, data):
    try:
        e = harness.json_body(data)["error"]
        return status, e.get("code"), e.get("message", "")
    except Exception:
        return status, None, data[:200]


def chunk_named(message):
    """'chunk N (scanlines A-B)' from a decoding error's message, or None."""
    at = message.find("chunk ")
    end = message.find(")", at)
    return message[at:end + 1] if at >= 0 and end > at else None


def damaged(frame):
    """The frame with one byte changed in the middle of its chunks' data."""
    b = bytearray(frame)
    b[len(b) * 2 // 3] ^= 0x55
    return bytes(b)


def idle(port):
    """Waits (bounded) for no pinned block out and the budget whole; the two lines as read."""
    names = ("hdrpost_host_memory_blocks ", "hdrpost_inflight_bytes ")
    out = []
    for _ in range(60):
        s, _, text = harness.request(port, "GET", "/metrics")
        out = [ln for ln in text.decode(errors="replace").splitlines() if ln.startswith(names)]
        if s == 200 and len(out) == 2 and all(ln.split()[-1] == "0" for ln in out):
            return True, out
        time.sleep(0.05)
    return False, out


def body(tmp):
    frames = {c: make(tmp, c) for c in ("zip", "zips", "piz")}
    gpu = harness.start_ready(EXE, "exr_zip gpu daemon", ["--exr_zip_decoder=gpu"], ready_timeout=90)
    cpu = harness.start_ready(EXE, "exr_zip cpu daemon", ["--exr_zip_decoder=cpu"], ready_timeout=90)
    with harness.serving(gpu), harness.serving(cpu):
        if not gpu or not cpu:
            return
        g0, c0 = zip_frames(gpu.port), zip_frames(cpu.port)
        for comp in ("zip", "zips"):
            frame = frames[comp]
            sg, hg, png_g = post(gpu.port, "/v1/render", frame, "output.format=png")
            sc, _, png_c = post(cpu.port, "/v1/render", frame, "output.format=png")
            point(f"street {comp.upper()}: the PNG of the frame inflated on the GPU is the CPU's, byte for byte",
                  sg == 200 and sc == 200 and png_g == png_c, f"{sg} {sc} {len(png_g)} {len(png_c)} {png_g[:200]!r}")
            point(f"street {comp.upper()}: Server-Timing has its decode", sg == 200 and "decode" in hg.get(
                "server-timing", ""), hg.get("server-timing", ""))
            ag, _, jg = post(gpu.port, "/v1/analyze", frame, "")
            ac, _, jc = post(cpu.port, "/v1/analyze", frame, "")
            try:
                same = ag == 200 and ac == 200 and json.loads(jg)["stats"] == json.loads(jc)["stats"]
            except Exception as e:
                same = False
                jg = repr(e).encode()
            point(f"street {comp.upper()}: /v1/analyze's statistics are the same", same, f"{ag} {ac} {jg[:300]!r}")
        g1, c1 = zip_frames(gpu.port), zip_frames(cpu.port)
        point("hdrpost_exr_zip_frames_total: the gpu daemon's four frames under gpu, the cpu daemon's under cpu",
              g1["gpu"] - g0["gpu"] == 4 and g1["cpu"] == g0["cpu"] and c1["cpu"] - c0["cpu"] == 4
              and c1["gpu"] == c0["gpu"], f"gpu daemon {g0} -> {g1}; cpu daemon {c0} -> {c1}")

        bad = damaged(frames["zip"])
        eg = error_of(*post(gpu.port, "/v1/render", bad, "output.format=png")[::2])
        ec = error_of(*post(cpu.port, "/v1/render", bad, "output.format=png")[::2])
        point("a damaged chunk: 400 malformed_image on both, naming the same chunk and scanlines",
              eg[:2] == (400, "malformed_image") and ec[:2] == (400, "malformed_image")
              and chunk_named(eg[2]) is not None and chunk_named(eg[2]) == chunk_named(ec[2]),
              f"\n#   GPU: {eg}\n#   CPU: {ec}")

        g2 = zip_frames(gpu.port)
        sp, _, png_p = post(gpu.port, "/v1/render", frames["piz"], "output.format=png")
        sq, _, png_q = post(cpu.port, "/v1/render", frames["piz"], "output.format=png")
        form, ctype = harness.multipart([("frame", frames["zip"], "street.exr", "image/x-exr"),
                                         ("params", b'{"output": {"format": "png"}}', None, "application/json")])
        sm, _, png_m = post(gpu.port, "/v1/render", form, "", {"Content-Type": ctype})
        g3 = zip_frames(gpu.port)
        point("on the gpu daemon a PIZ frame and a ZIP frame in a multipart form are decoded on the CPU (not counted "
              "as gpu), their answers the cpu daemon's", sp == 200 and sq == 200 and png_p == png_q and sm == 200
              and png_m == png_c and g3["gpu"] == g2["gpu"], f"{sp} {sq} {sm} {g2} -> {g3}")

        for d in (gpu, cpu):
            ok, lines = idle(d.port)
            point(f"{d.label}: afterwards no pinned block is out and the memory budget is whole", ok, f"{lines}")
        s, _, png = post(gpu.port, "/v1/render", frames["zip"], "output.format=png")
        point("the gpu daemon still serves after the damaged frame: the ZIP frame again, the same PNG",
              s == 200 and png == png_c, f"{s}")

    auto = harness.start_ready(EXE, "exr_zip auto daemon", ready_timeout=90)
    with harness.serving(auto):
        if auto:
            on_cpu = "exr_zip_decoder auto: EXR ZIP chunks are inflated on the CPU" in auto.log()
            s, _, _ = post(auto.port, "/v1/render", frames["zip"], "output.format=png")
            counted = zip_frames(auto.port)
            point("exr_zip_decoder auto (the default) on a device whose inflate needs slices: the CPU, said at "
                  "start-up, and the frame counted under cpu", on_cpu and s == 200 and counted == {"cpu": 1.0,
                  "gpu": 0.0} or (not on_cpu and "llvmpipe" not in auto.log()), f"{s} {counted}")


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE, MAKE_FRAME], "hdrpost-exr-zip-", body))
