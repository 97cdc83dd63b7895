#!/usr/bin/env python3
"""PNG encoded on the GPU over HTTP (issue 20): output.png_encoder gpu against cpu on real frames.

Usage: test_png_gpu.py PATH/TO/hdrpostd PATH/TO/png_to_rgba. Prints TAP. For each real frame of tests/data
(an RGB and an RGBA one), at 8 and 16 bits, for output.colorspace srgb and display_p3, the same request is
made with output.png_encoder gpu and cpu, and:
  - the GPU's PNG decodes with Python's zlib and the harness's own unfiltering (harness.png_decode) and with
    libspng (tools/png_to_rgba) to exactly the samples of the CPU's PNG (decoded by libspng);
  - the chunks before IDAT are the CPU's, byte for byte (IHDR, cHRM, gAMA, sRGB or iCCP, tEXt);
  - Server-Timing has png_gpu with the GPU, not with the CPU.
Then: auto takes the GPU on this device, output.alpha auto leaves out an opaque alpha and keeps a translucent
one as the CPU does,
an unknown encoder is 400 naming output.png_encoder, and the daemon still serves a WebP after all this. The
daemon runs with --validation; any validation-layer message fails (harness.stop_clean).
"""

import array
import base64
import os
import threading
import time
import struct
import subprocess
import sys

import harness
from harness import PngError, png_decode, point

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
PNG_TO_RGBA = sys.argv[2] if len(sys.argv) > 2 else "png_to_rgba"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
REQUEST_TIMEOUT_S = 120

# (name, file, output.alpha, channels the PNG has)
FRAMES = [("park (RGB)", "pmndrs_park.exr", "auto", 3), ("desk (RGBA)", "psychtoolbox_Desk.exr", "keep", 4)]


def render(port, data, query):
    return harness.request(port, "POST", "/v1/render?" + query, data, timeout=REQUEST_TIMEOUT_S)


def chunks(png):
    """[(type, data)] of a PNG, in order."""
    out, pos = [], 8
    while pos + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        out.append((kind, png[pos + 8:pos + 8 + length]))
        pos += 12 + length
    return out


def before_idat(png):
    return [c for c in _until(chunks(png), b"IDAT")]


def _until(items, kind):
    for c in items:
        if c[0] == kind:
            return
        yield c


def spng(tmp, png, tag):
    """(width, height, channels, depth, RGBA samples: bytes or array('H')) from libspng, or None and why."""
    src, dst = os.path.join(tmp, f"{tag}.png"), os.path.join(tmp, f"{tag}.rgba")
    with open(src, "wb") as f:
        f.write(png)
    proc = subprocess.run([PNG_TO_RGBA, src, dst], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None, proc.stderr
    w, h, ch, depth = (int(v) for v in proc.stdout.split())
    with open(dst, "rb") as f:
        raw = f.read()
    return (w, h, ch, depth, raw if depth == 8 else array.array("H", raw)), ""


def drop_alpha(rgba):
    """RGBA samples (bytes or array('H')) -> RGB, in the same type."""
    n = len(rgba) // 4
    if isinstance(rgba, array.array):
        out = array.array("H", bytes(2 * 3 * n))
    else:
        out = bytearray(3 * n)
    for c in range(3):
        out[c::3] = rgba[c::4]
    return out if isinstance(rgba, array.array) else bytes(out)


def same_samples(a, b):
    return len(a) == len(b) and (a == b if not isinstance(a, array.array) else a.tobytes() == b.tobytes())


def compare(d, tmp, label, fname, alpha, want_ch, depth, space, extra=""):
    data = open(os.path.join(DATA, fname), "rb").read()
    q = f"output.format=png&output.bit_depth={depth}&output.colorspace={space}&output.alpha={alpha}{extra}"
    name = f"{label}, {depth}-bit, {space}: the GPU's PNG decodes (Python zlib, libspng) to the CPU's samples"
    sg, hg, gpu = render(d.port, data, q + "&output.png_encoder=gpu")
    sc, hc, cpu = render(d.port, data, q + "&output.png_encoder=cpu")
    if sg != 200 or sc != 200 or hg.get("content-type") != "image/png":
        point(name, False, f"gpu {sg} {gpu[:300]!r}\ncpu {sc} {cpu[:300]!r}")
        return
    try:
        py = png_decode(gpu)
    except (PngError, Exception) as e:  # zlib.error too
        point(name, False, f"Python's decoder: {e}")
        return
    sp_gpu, why_g = spng(tmp, gpu, "gpu")
    sp_cpu, why_c = spng(tmp, cpu, "cpu")
    if not sp_gpu or not sp_cpu:
        point(name, False, f"libspng: {why_g} {why_c}")
        return
    w, h, ch, dp, py_samples = py
    ref = sp_cpu[4] if ch == 4 else drop_alpha(sp_cpu[4])
    ok = (ch == want_ch and dp == depth and sp_gpu[:4] == sp_cpu[:4] == (w, h, ch, dp)
          and same_samples(py_samples, ref) and same_samples(sp_gpu[4], sp_cpu[4]))
    point(name, ok, f"python {w}x{h} {ch}ch {dp}-bit; libspng gpu {sp_gpu[:4]}, cpu {sp_cpu[:4]}; "
          f"python==cpu {same_samples(py_samples, ref)}, spng gpu==cpu {same_samples(sp_gpu[4], sp_cpu[4])}")
    bg, bc = before_idat(gpu), before_idat(cpu)
    point(f"{label}, {depth}-bit, {space}: the chunks before IDAT are the CPU's ({', '.join(k.decode() for k, _ in bc)})",
          bg == bc and len(bc) >= 3, f"gpu {[k for k, _ in bg]}, cpu {[k for k, _ in bc]}")
    tg, tc = hg.get("server-timing", ""), hc.get("server-timing", "")
    point(f"{label}, {depth}-bit, {space}: Server-Timing has png_gpu with the GPU encoder only",
          "png_gpu;dur=" in tg and "png_gpu" not in tc, f"gpu: {tg}\ncpu: {tc}")


def grow_in_flight(d):
    """Frames of one size on the GPU at once, a later one needing larger PNG buffers than those in flight (RGB
    8-bit, then RGBA 16-bit): the buffers the frames share must not be freed under an earlier frame's commands
    (the daemon crashed, found in review). First on a fresh daemon, so that the growth happens here; the
    requests go 0.15 s apart, so that the small ones are in flight when the large one is prepared."""
    desk = open(os.path.join(DATA, "psychtoolbox_Desk.exr"), "rb").read()
    small = "output.format=png&output.png_encoder=gpu&output.alpha=drop"
    large = "output.format=png&output.png_encoder=gpu&output.alpha=keep&output.bit_depth=16"
    results = [None] * 3

    def send(i, query):
        results[i] = render(d.port, desk, query)[0]
    threads = []
    for i, query in enumerate((small, small, large)):
        threads.append(threading.Thread(target=send, args=(i, query)))
        threads[-1].start()
        time.sleep(0.15)
    for t in threads:
        t.join(REQUEST_TIMEOUT_S + 10)
    point("RGB 8-bit PNGs on the GPU in flight when an RGBA 16-bit one of the same frame needs larger buffers: all "
          "200, the daemon alive", results == [200] * 3 and d.alive(), f"{results}")


def body(tmp):
    with harness.serving(harness.start_ready(EXE, "png_gpu daemon", ready_timeout=60)) as d:
        if not d:
            return
        grow_in_flight(d)
        for label, fname, alpha, want_ch in FRAMES:
            for depth in (8, 16):
                for space in ("srgb", "display_p3"):
                    compare(d, tmp, label, fname, alpha, want_ch, depth, space)
        # The other heads the chunk writer puts in front of the stream: the sRGB chunk (gamma srgb) and a
        # linear gAMA (gamma linear), at 16 bits BT.2020's iCCP.
        for gamma in ("srgb", "linear"):
            compare(d, tmp, f"park, gamma {gamma}", "pmndrs_park.exr", "auto", 3, 8, "srgb", f"&gamma.mode={gamma}")
        compare(d, tmp, "desk, rec2020", "psychtoolbox_Desk.exr", "keep", 4, 16, "rec2020")

        desk = open(os.path.join(DATA, "psychtoolbox_Desk.exr"), "rb").read()
        s, h, png = render(d.port, desk, "output.format=png&output.png_encoder=auto")
        point("output.png_encoder auto takes the GPU on this device (png_gpu in Server-Timing)",
              s == 200 and "png_gpu;dur=" in h.get("server-timing", ""), f"{s} {h.get('server-timing')}")
        # output.alpha auto: the GPU's passes read the tone pass's word on whether any alpha is translucent, as
        # the CPU's encoder reads it back: the same channels and samples, an opaque alpha left out (the street
        # frame's), a translucent one kept (the desk's).
        street = open(os.path.join(DATA, "blender_street_960x540_singlelayer.exr"), "rb").read()
        for label, frame in (("desk", desk), ("street", street)):
            sg, _, gpu_png = render(d.port, frame, "output.format=png&output.png_encoder=gpu")
            sc, _, cpu_png = render(d.port, frame, "output.format=png&output.png_encoder=cpu")
            try:
                got, want = png_decode(gpu_png), png_decode(cpu_png)
                ok = sg == 200 and sc == 200 and got == want
                detail = f"GPU {got[:4]} against CPU {want[:4]}"
            except Exception as e:
                ok, detail = False, f"{e}: {sg} {gpu_png[:200]!r} / {sc} {cpu_png[:200]!r}"
            point(f"output.alpha auto, {label} frame: the GPU's PNG has the CPU's channels and samples", ok, detail)
            if label == "street":
                point("output.alpha auto, street frame (an opaque alpha): both PNGs are RGB", ok and got[2] == 3,
                      detail)
        # auto is the default, and takes the CPU for an effort above the run-length levels (zlib's smaller
        # files): the same samples either way.
        s1, h1, dflt = render(d.port, desk, "output.format=png")
        s2, h2, eff = render(d.port, desk, "output.format=png&output.effort=4")
        try:
            same = png_decode(dflt) == png_decode(eff)
        except Exception as e:
            same = repr(e)
        point("output.png_encoder's default is auto: png_gpu in Server-Timing; with output.effort 4 the CPU "
              "(no png_gpu), the same samples", s1 == 200 and s2 == 200 and "png_gpu;dur=" in h1.get("server-timing", "")
              and "png_gpu" not in h2.get("server-timing", "") and same is True,
              f"{s1} {h1.get('server-timing')} / {s2} {h2.get('server-timing')} / same {same}")
        s, _, err = render(d.port, desk, "output.format=png&output.png_encoder=fast")
        point("output.png_encoder fast is 400 naming output.png_encoder",
              harness_error(s, err, 400, "output.png_encoder"), f"{s} {err[:300]!r}")
        in_place_answers(d, desk)
        s, h, webp = render(d.port, desk, "output.format=webp")
        point("the daemon still serves after: a WebP of the same frame", s == 200 and webp[:4] == b"RIFF"
              and h.get("content-type") == "image/webp", f"{s} {h}")


def png_gpu_answers(port):
    """hdrpost_png_gpu_answers_total by stream (in_place, copied)."""
    _, _, text = harness.request(port, "GET", "/metrics")
    out = {}
    for ln in text.decode(errors="replace").splitlines():
        if ln.startswith("hdrpost_png_gpu_answers_total{"):
            out[ln.split('stream="')[1].split('"')[0]] = float(ln.split()[-1])
    return out


def in_place_answers(d, desk):
    """The GPU's PNG is finished where the GPU wrote it, in the request's pinned block, and that block is the
    answer's body until it is sent: the JSON answer (its base64 made from the block, which is then let go of)
    carries the same file as the image answer, and a run of them leaves no block out (/metrics)."""
    query = "output.format=png&output.png_encoder=gpu&output.colorspace=display_p3"
    before = png_gpu_answers(d.port)
    s1, _, png = render(d.port, desk, query)
    s2, _, doc = harness.request(d.port, "POST", "/v1/render?" + query, desk, {"Accept": "application/json"},
                                 timeout=REQUEST_TIMEOUT_S)
    try:
        same = s1 == 200 and s2 == 200 and base64.b64decode(harness.json_body(doc)["image"]["base64"]) == png
    except Exception as e:
        same = False
        png = repr(e).encode()
    point("the GPU's PNG as a JSON answer (base64) is the image answer's file, byte for byte", same,
          f"{s1} {s2} {png[:80]!r}")
    for _ in range(4):
        render(d.port, desk, query)
    after = png_gpu_answers(d.port)
    moved = {k: after.get(k, 0) - before.get(k, 0) for k in ("in_place", "copied")}
    point("the six answers were finished in the request's pinned memory (hdrpost_png_gpu_answers_total "
          "in_place +6, copied +0)", moved == {"in_place": 6, "copied": 0}, f"{before} -> {after}")
    # The block, and the budget's charge for it, go back when libmicrohttpd lets go of the sent answer, a
    # moment after the client has it.
    names = ("hdrpost_host_memory_blocks ", "hdrpost_inflight_bytes ")
    for _ in range(40):
        s, _, text = harness.request(d.port, "GET", "/metrics")
        out = [ln for ln in text.decode(errors="replace").splitlines() if ln.startswith(names)]
        if s == 200 and len(out) == 2 and all(ln.split()[-1] == "0" for ln in out):
            break
        time.sleep(0.05)
    point("after the answers are sent, no pinned block is still out and the memory budget is whole again "
          "(hdrpost_host_memory_blocks 0, hdrpost_inflight_bytes 0)",
          s == 200 and len(out) == 2 and all(ln.split()[-1] == "0" for ln in out), f"{s} {out}")


def copied_out(tmp):
    """With no pinned block to be had (--test_fail_host_memory=1) the stream lands in the graph's memory and is
    copied once into ordinary memory laid out the same way: the PNG still decodes to the CPU encoder's."""
    d = harness.start_ready(EXE, "png_gpu daemon without pinned blocks", ["--test_fail_host_memory=1"])
    with harness.serving(d):
        if d:
            before = png_gpu_answers(d.port)
            compare(d, tmp, "desk, no pinned block", "psychtoolbox_Desk.exr", "keep", 4, 8, "display_p3")
            compare(d, tmp, "park, no pinned block", "pmndrs_park.exr", "auto", 3, 16, "srgb")
            # output.alpha auto on an opaque alpha: the RGB layout inside the RGBA one's memory, copied out
            compare(d, tmp, "street, no pinned block, alpha auto", "blender_street_960x540_singlelayer.exr",
                    "auto", 3, 8, "srgb")
            after = png_gpu_answers(d.port)
            moved = {k: after.get(k, 0) - before.get(k, 0) for k in ("in_place", "copied")}
            point("without pinned blocks the GPU's streams were copied (hdrpost_png_gpu_answers_total copied +3, "
                  "in_place +0)", moved == {"in_place": 0, "copied": 3}, f"{before} -> {after}")


def harness_error(status, data, want_status, field):
    try:
        e = harness.json_body(data)["error"]
    except Exception:
        return False
    return status == want_status and e.get("field") == field


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE, PNG_TO_RGBA], "hdrpost-png-gpu-", lambda tmp: (body(tmp), copied_out(tmp))))
