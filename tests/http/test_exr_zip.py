#!/usr/bin/env python3
"""EXR ZIP chunks inflated on the GPU over HTTP (issue 20; pipeline/exr_zip_gpu.h): exr_zip_decoder gpu against cpu.

Usage: test_exr_zip.py PATH/TO/hdrpostd PATH/TO/make_frame. Prints TAP. Two daemons, one with
--exr_zip_decoder=gpu and one with cpu, each with --validation (any validation-layer message fails), get the
same requests:
  - real frames made by tools/make_frame (ZIP with 16-line chunks and ZIPS with 1-line chunks, RGBA half),
    posted as the raw body: the PNG answers and the /v1/analyze statistics are the same, byte for byte, and
    hdrpost_exr_zip_frames_total counts them under gpu on the one and cpu on the other;
  - a damaged chunk: both answer 400 malformed_image naming the same chunk and scanlines (the GPU refuses it,
    and the CPU's decoder, whose verdict stands, says why);
  - a chunk libdeflate takes and zlib refuses (288 literal/length codes): the GPU refuses it and the CPU
    decodes the frame into the GPU's memory: the same PNG;
  - a PIZ frame and a ZIP frame in a multipart form go to the CPU on the gpu daemon too (not counted as gpu);
  - afterwards no pinned block is out and the memory budget is whole; the daemons still serve.
A daemon with --exr_zip_decoder=split (chunks inflated on the CPU as they arrive, the rest on the GPU) gets the
same frames and must answer as the cpu daemon: ZIP and ZIPS, a body trickled in pieces, the HLIT-288 chunk (no
fallback: libdeflate takes it), a chunk with bytes after its stream, a damaged chunk (judged by the CPU's decoder,
split_then_cpu), a five-channel frame (split, its extra bytes from the share), a client hanging up mid-body
(nothing handed to the CPU, the budget whole). A lost device in the gpu and in the split daemon's run is 503.
A daemon left at the default (auto) on lavapipe decodes on the CPU and says so at start-up. One with
--exr_zip_gpu_share=0.5 sends every second frame that arrives while another decodes whole to the GPU and splits
the others, the same PNGs (on lavapipe, where auto is the CPU's, every frame the CPU's).
The gpu daemon gathers a trickled body's chunks as they come (the same PNG), and a client hanging up mid-body
leaves nothing out and nothing handed to the CPU; with a budget whose share of bodies arriving cannot give the
pinned chunks, they are gathered after the whole body (the same PNG). Frames of every shape renderers write
(issue 36: RGB, RGBA and Y; half, float; AOVs and depth beside the colour; decreasing Y), made by tools/make_frame
from the repository's real frames, give the same PNG and statistics from cpu, gpu and split daemons, none of them
left to the CPU.
"""

import contextlib
import heapq
import json
import os
import struct
import subprocess
import sys
import threading
import time
import zlib

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
    out = {"cpu": 0.0, "gpu": 0.0, "gpu_then_cpu": 0.0, "split": 0.0, "split_then_cpu": 0.0}
    for ln in text.decode(errors="replace").splitlines():
        if ln.startswith("hdrpost_exr_zip_frames_total{"):
            out[ln.split('decoder="')[1].split('"')[0]] = float(ln.split()[-1])
    return out


def zip_batches(port):
    """The batch series of /metrics (hdrpost_exr_zip_gpu_batch*), each line's name and labels to its value."""
    _, _, text = harness.request(port, "GET", "/metrics")
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.decode(errors="replace").splitlines()
            if ln.startswith("hdrpost_exr_zip_gpu_batch")}


def cpu_reasons(port):
    """hdrpost_exr_cpu_frames_total by reason."""
    _, _, text = harness.request(port, "GET", "/metrics")
    out = {}
    for ln in text.decode(errors="replace").splitlines():
        if ln.startswith("hdrpost_exr_cpu_frames_total{"):
            out[ln.split('reason="')[1].split('"')[0]] = float(ln.split()[-1])
    return out


def make_tiled(tmp):
    path = os.path.join(tmp, "street_zip_tiled.exr")
    subprocess.run([MAKE_FRAME, SOURCE, path, "1", "zip", "tiled"], check=True, capture_output=True, timeout=120)
    with open(path, "rb") as f:
        return f.read()


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
    """Waits (bounded) for no pinned block out, the budget whole and nothing held from the share of bodies still
    arriving; the three lines as read."""
    names = ("hdrpost_host_memory_blocks ", "hdrpost_inflight_bytes ", "hdrpost_inflight_arriving_bytes ")
    out = []
    for _ in range(60):
        s, _, text = harness.request(port, "GET", "/metrics")
        out = [ln for ln in text.decode(errors="replace").splitlines() if ln.startswith(names)]
        if s == 200 and len(out) == 3 and all(ln.split()[-1] == "0" for ln in out):
            return True, out
        time.sleep(0.05)
    return False, out


# --- A stream libdeflate takes and zlib refuses ------------------------------------------------------------
# The GPU's shader keeps zlib's rules; the daemon's CPU decoder is libdeflate, which takes a few streams zlib
# refuses. A frame with one: the GPU refuses its chunk, the CPU decodes the frame into the same device memory.

def exr_chunks(data):
    """(header_end, offsets) of a single-part scanline EXR."""
    pos = 8
    while data[pos] != 0:
        end = data.index(b'\0', pos); pos = end + 1   # name
        end = data.index(b'\0', pos); pos = end + 1   # type
        size = struct.unpack_from('<i', data, pos)[0]; pos += 4 + size
    pos += 1
    return pos

def huff_lengths(freq, maxlen=15):
    """Code lengths (every symbol nonzero) from frequencies, limited to maxlen by flattening."""
    n = len(freq)
    f = [max(1, x) for x in freq]
    while True:
        heap = [(f[i], i, None) for i in range(n)]
        heapq.heapify(heap)
        parent = {}
        uid = n
        nodes = {}
        while len(heap) > 1:
            a = heapq.heappop(heap); b = heapq.heappop(heap)
            nodes[uid] = (a[1], b[1]); heapq.heappush(heap, (a[0] + b[0], uid, None)); uid += 1
        depth = {heap[0][1]: 0}
        stack = [heap[0][1]]
        lens = [0] * n
        while stack:
            u = stack.pop()
            if u < n:
                lens[u] = depth[u]
            else:
                for c in nodes[u]:
                    depth[c] = depth[u] + 1; stack.append(c)
        if max(lens) <= maxlen:
            return lens
        f = [x // 2 + 1 for x in f]

class BW:
    def __init__(s): s.acc = 0; s.n = 0; s.out = bytearray()
    def put(s, v, n):
        s.acc |= v << s.n; s.n += n
        while s.n >= 8: s.out.append(s.acc & 255); s.acc >>= 8; s.n -= 8
    def huff(s, code, n):
        r = 0
        for i in range(n): r |= ((code >> i) & 1) << (n - 1 - i)
        s.put(r, n)
    def bytes(s):
        if s.n: s.out.append(s.acc & 255); s.acc = 0; s.n = 0
        return bytes(s.out)

def canon(lens):
    mx = max(lens); bl = [0] * (mx + 1)
    for l in lens:
        if l: bl[l] += 1
    code = 0; nxt = [0] * (mx + 2)
    for b in range(1, mx + 1):
        code = (code + bl[b - 1]) << 1; nxt[b] = code
    codes = [None] * len(lens)
    for i, l in enumerate(lens):
        if l: codes[i] = (nxt[l], l); nxt[l] += 1
    return codes

def hlit288_stream(raw):
    """A zlib stream of raw as one dynamic block whose literal/length code has 288 lengths (HLIT 31): zlib refuses
    it ('too many length or distance symbols'), libdeflate takes it."""
    freq = [0] * 288
    for b in raw: freq[b] += 1
    freq[256] = 1
    lit = huff_lengths(freq)
    dist = [1, 1]   # two codes of one bit: complete
    bw = BW()
    bw.put(1, 1); bw.put(2, 2)
    bw.put(288 - 257, 5); bw.put(len(dist) - 1, 5); bw.put(19 - 4, 4)
    order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
    pl = [0] * 19
    for i in range(16): pl[i] = 4
    for s in order: bw.put(pl[s], 3)
    pc = canon(pl)
    for l in lit + dist:
        c, n = pc[l]; bw.huff(c, n)
    lc = canon(lit)
    for b in raw:
        c, n = lc[b]; bw.huff(c, n)
    c, n = lc[256]; bw.huff(c, n)
    return b'\x78\x01' + bw.bytes() + struct.pack('>I', zlib.adler32(raw))

def lenient_exr(data, chunks, recode=None):
    """The EXR with its first chunk re-encoded (by hlit288_stream unless recode says how)."""
    recode = recode or (lambda stream: hlit288_stream(zlib.decompress(stream)))
    hdr = exr_chunks(data)
    offsets = list(struct.unpack_from('<%dQ' % chunks, data, hdr))
    body = []
    for i in range(chunks):
        at = offsets[i]
        y, size = struct.unpack_from('<ii', data, at)
        body.append((y, data[at + 8: at + 8 + size]))
    body[0] = (body[0][0], recode(body[0][1]))
    out = bytearray(data[:hdr])
    pos = hdr + 8 * chunks
    table = []
    chunk_bytes = bytearray()
    for y, d in body:
        table.append(pos + len(chunk_bytes))
        chunk_bytes += struct.pack('<ii', y, len(d)) + d
    out += struct.pack('<%dQ' % chunks, *table) + chunk_bytes
    return bytes(out)


def exr_zip_frame(width, height, names, seed=7):
    """A scanline EXR of half channels `names` (sorted, as the file lists them), ZIP (16-line chunks): noise
    over a gradient, written here (OpenEXR's layout: each line's channels one after another, then EXR's byte
    split and predictor, then zlib)."""
    import random
    rnd = random.Random(seed)
    names = sorted(names)

    def attr(name, kind, value):
        return name.encode() + b"\0" + kind.encode() + b"\0" + struct.pack("<i", len(value)) + value

    chlist = b"".join(n.encode() + b"\0" + struct.pack("<iB3xii", 1, 0, 1, 1) for n in names) + b"\0"
    box = struct.pack("<4i", 0, 0, width - 1, height - 1)
    header = (b"\x76\x2f\x31\x01" + struct.pack("<I", 2) + attr("channels", "chlist", chlist)
              + attr("compression", "compression", b"\x03") + attr("dataWindow", "box2i", box)
              + attr("displayWindow", "box2i", box) + attr("lineOrder", "lineOrder", b"\x00")
              + attr("pixelAspectRatio", "float", struct.pack("<f", 1.0))
              + attr("screenWindowCenter", "v2f", struct.pack("<2f", 0, 0))
              + attr("screenWindowWidth", "float", struct.pack("<f", 1.0)) + b"\0")
    chunks = []
    for y0 in range(0, height, 16):
        raw = bytearray()
        for y in range(y0, min(y0 + 16, height)):
            for c in range(len(names)):
                for x in range(width):
                    v = 0.25 + 0.5 * x / width + 0.001 * c + rnd.random() * 0.01
                    raw += struct.pack("<e", v)
        split = raw[0::2] + raw[1::2]
        pred = bytearray(split)
        for i in range(len(split) - 1, 0, -1):
            pred[i] = (split[i] - split[i - 1] + 128) & 255
        chunks.append((y0, zlib.compress(bytes(pred), 6)))
    table_at = len(header)
    out = bytearray(header)
    pos = table_at + 8 * len(chunks)
    offsets = []
    for y0, data in chunks:
        offsets.append(pos)
        pos += 8 + len(data)
    out += struct.pack("<%dQ" % len(chunks), *offsets)
    for y0, data in chunks:
        out += struct.pack("<ii", y0, len(data)) + data
    return bytes(out)


def lost_in_decode(frames, mode):
    """A frame's decoding run that loses the device (simulated by --test_lose_device_in_decode=1, as a run past
    its timeout is reported): the frame is 503 device_lost, the daemon leaves the rotation (/readyz and /livez
    503), and SIGTERM still exits 0 with no validation-layer message (the blocks set aside are freed at the
    end, the device idle). mode: gpu (the inflate's run) or split (the finishing run)."""
    d = harness.start_ready(EXE, f"exr_zip {mode} daemon losing the device in a decode",
                            [f"--exr_zip_decoder={mode}", "--test_lose_device_in_decode=1"], ready_timeout=90)
    with harness.serving(d):
        if not d:
            return
        s, _, body = post(d.port, "/v1/render", frames["zip"], "output.format=png")
        st, code, msg = error_of(s, body)
        point(f"{mode}: a frame whose decoding run loses the device is answered 503 device_lost, not as a bad file",
              (st, code) == (503, "device_lost") and "test_lose_device_in_decode" in msg, f"{st} {code} {msg}")
        rs, _, _ = harness.request(d.port, "GET", "/readyz")
        ls, _, _ = harness.request(d.port, "GET", "/livez")
        s2, _, body2 = post(d.port, "/v1/render", frames["zip"], "output.format=png")
        point(f"{mode}: then the daemon is out of rotation (/readyz 503, /livez 503), and a new frame is 503",
              rs == 503 and ls == 503 and s2 == 503, f"readyz {rs} livez {ls} then {s2} {body2[:200]!r}")
        point(f"{mode}: the pool was abandoned (its log line)", "host pool: the device is lost" in d.log(), "")


def hang_up(port, body):
    """A client that goes away after two thirds of its body."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"POST /v1/render?output.format=png HTTP/1.1\r\nHost: localhost\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:len(body) * 2 // 3])
        time.sleep(0.3)  # the header is in, the chunks before the cut are inflating


def hung_up_point(port, body, mode, before):
    """A client hangs up mid-body on a daemon of exr_zip_decoder `mode` (gpu or split): afterwards no pinned block
    is out, the budget is whole, nothing is held from the share of bodies arriving, and the cut-off frame was not
    handed to the CPU's decoder (MODE_then_cpu as `before`, zip_frames' counts)."""
    hang_up(port, body)
    ok, lines = idle(port)
    after = zip_frames(port)
    point(f"{mode}: after a client hung up mid-body, no pinned block is out, the memory budget is whole, nothing "
          f"is held from the share of bodies arriving, and the cut-off frame was not handed to the CPU's decoder "
          f"({mode}_then_cpu unchanged)", ok and after[f"{mode}_then_cpu"] == before[f"{mode}_then_cpu"],
          f"{lines} {before} -> {after}")


@contextlib.contextmanager
def compared_daemon(what, label, args, png_of, needs):
    """A daemon whose answers are compared with the cpu daemon's (png_of, which must hold `needs`): yields it,
    or None when it or those answers are missing (a failed point says which)."""
    if needs not in png_of:
        point(f"{what}: the cpu daemon's answers to compare with", False, "the gpu and cpu daemons did not serve")
        yield None
        return
    d = harness.start_ready(EXE, label, args, ready_timeout=90)
    with harness.serving(d):
        yield d


def split_daemon(frames, png_of):
    """exr_zip_decoder split: the chunks inflated on the CPU as they arrive, EXR's predictor, byte split and
    planes undone on the GPU (exr_finish). png_of: the cpu daemon's PNG of each frame."""
    with compared_daemon("split", "exr_zip split daemon", ["--exr_zip_decoder=split"], png_of,
                         "damaged_chunk") as d:
        if not d:
            return
        z0 = zip_frames(d.port)
        for comp in ("zip", "zips"):
            s, h, png = post(d.port, "/v1/render", frames[comp], "output.format=png")
            point(f"split, street {comp.upper()}: the PNG is the cpu daemon's, byte for byte",
                  s == 200 and png == png_of[comp], f"{s} {len(png)} {png[:200]!r}")
        st, png_t = harness.post_trickled(d.port, frames["zip"], "output.format=png", timeout=REQUEST_TIMEOUT_S)
        point("split, the ZIP frame sent in 8 pieces 50 ms apart (each chunk inflated when its bytes are in): the "
              "same PNG", st == 200 and png_t == png_of["zip"], f"{st} {png_t[:200]!r}")
        sl, _, png_l = post(d.port, "/v1/render", frames["lenient"], "output.format=png")
        z1 = zip_frames(d.port)
        point("split: the chunk libdeflate takes and zlib refuses is inflated here (libdeflate's rules), the PNG the "
              "cpu daemon's; four frames counted under split and none elsewhere",
              sl == 200 and png_l == png_of["lenient"] and z1["split"] - z0["split"] == 4
              and all(z1[k] == z0[k] for k in z0 if k != "split"), f"{sl} {z0} -> {z1}")
        e = error_of(*post(d.port, "/v1/render", frames["damaged"], "output.format=png")[::2])
        z2 = zip_frames(d.port)
        point("split: a damaged chunk is 400 malformed_image naming the chunk the cpu daemon names, the CPU's decoder "
              "having judged it (split_then_cpu +1)", e[:2] == (400, "malformed_image")
              and chunk_named(e[2]) == png_of["damaged_chunk"] and z2["split_then_cpu"] - z1["split_then_cpu"] == 1,
              f"{e} {z1} -> {z2}")
        z2b = zip_frames(d.port)
        s5, _, png5 = post(d.port, "/v1/render", frames["five_planes"], "output.format=png")
        z2c = zip_frames(d.port)
        point("split: a ZIP frame of five half channels (RGBA and Z) is split, the bytes past its image's charge "
              "taken from the share of bodies arriving, the PNG the cpu daemon's",
              len(frames["five_planes"]) >= 64 << 10  # decoded as it arrives, where the split is chosen
              and s5 == 200 and png5 == png_of["five_planes"] and z2c["split"] - z2b["split"] == 1
              and z2c["gpu"] == z2b["gpu"] and z2c["cpu"] == z2b["cpu"], f"{s5} {z2b} -> {z2c}")
        z3 = zip_frames(d.port)
        st, _, png_tr = post(d.port, "/v1/render", frames["trailing"], "output.format=png")
        z4 = zip_frames(d.port)
        point("split: a chunk with 8 bytes after its zlib stream (ignored by libdeflate, as by the CPU's decoder): "
              "its Adler-32 is read where the stream ends, the PNG the cpu daemon's, counted under split",
              st == 200 and png_tr == png_of["trailing"] and z4["split"] - z3["split"] == 1
              and z4["split_then_cpu"] == z3["split_then_cpu"], f"{st} {z3} -> {z4}")
        hung_up_point(d.port, frames["zip"], "split", z4)
        s, _, png = post(d.port, "/v1/render", frames["zip"], "output.format=png")
        point("split: the daemon still serves: the ZIP frame again, the same PNG", s == 200 and png == png_of["zip"],
              f"{s}")


def gather_after_body(frames, png_of):
    """exr_zip_decoder gpu with a budget whose share of bodies still arriving (a quarter: 5.5 MiB) gives the frame's
    table and extra bytes but not, beside them, the pinned copy of its 2.3 MB of chunks: those are then gathered
    after the whole body, from the budget (api/frames/early_decode.c's zip_on_gpu, said at debug level), the PNG
    the cpu daemon's, counted under gpu; afterwards nothing is out."""
    with compared_daemon("gather after the body", "exr_zip gpu daemon, a small budget",
                         ["--exr_zip_decoder=gpu", "--max_inflight_mb=22", "--log_level=debug"], png_of, "zip") as d:
        if not d:
            return
        z0 = zip_frames(d.port)
        # trickled, so that the frame's own reservation from the share (its pixels', given back once the body is
        # in) is still held when its chunks ask for theirs
        s, png = harness.post_trickled(d.port, frames["zip"], "output.format=png", timeout=REQUEST_TIMEOUT_S)
        z1 = zip_frames(d.port)
        ok, lines = idle(d.port)
        point("gpu, a share of bodies arriving too small for the pinned chunks: gathered after the whole body, the "
              "same PNG, counted under gpu, nothing left out", s == 200 and png == png_of["zip"]
              and z1["gpu"] - z0["gpu"] == 1 and "gathered after the whole body" in d.log() and ok,
              f"{s} {z0} -> {z1} {lines}")


def share_daemon(frames, png_of):
    """exr_zip_gpu_share = 0.5 with auto: of the frames whose header arrives while another frame decodes, every
    second goes whole to the GPU (the wide inflate) and the others are split; a frame alone is the CPU's. One
    frame trickled in 30 pieces 100 ms apart keeps a frame decoding while four more are posted one after
    another. On a device whose inflate needs slices (lavapipe) auto decodes every frame on the CPU, share or
    not."""
    with compared_daemon("share", "exr_zip auto daemon with a share", ["--exr_zip_gpu_share=0.5"], png_of,
                         "zip") as d:
        if not d:
            return
        on_cpu = "exr_zip_decoder auto: EXR ZIP chunks are inflated on the CPU" in d.log()
        z0 = zip_frames(d.port)
        trickled = {}
        t = threading.Thread(target=lambda: trickled.update(
            answer=harness.post_trickled(d.port, frames["zip"], "output.format=png", pieces=30, gap_s=0.1,
                                         timeout=REQUEST_TIMEOUT_S)))
        t.start()
        time.sleep(0.3)  # its header is in: it decodes as it arrives
        answers = [post(d.port, "/v1/render", frames["zip"], "output.format=png") for _ in range(4)]
        still_arriving = t.is_alive()  # else the four did not all arrive while it decoded: no verdict on the share
        t.join()
        z1 = zip_frames(d.port)
        got = {k: z1[k] - z0[k] for k in z0 if z1[k] != z0[k]}
        want = {"cpu": 5.0} if on_cpu else {"cpu": 1.0, "split": 2.0, "gpu": 2.0}
        same = [s == 200 and png == png_of["zip"] for s, _, png in answers]
        ts, tpng = trickled.get("answer", (None, b""))
        point(f"share 0.5 ({'lavapipe: auto on the CPU' if on_cpu else 'a GPU'}): the trickled frame and the four "
              f"posted while it arrived all give the cpu daemon's PNG, counted {want}",
              all(same) and ts == 200 and tpng == png_of["zip"] and got == want
              and (still_arriving or on_cpu),  # on lavapipe every frame is the CPU's whenever it arrives
              f"{same} {ts} {got} trickled frame still arriving after the four: {still_arriving}")
        ok, lines = idle(d.port)
        point("share: afterwards no pinned block is out, the memory budget is whole and nothing is held from the "
              "share of bodies arriving", ok, f"{lines}")


# Issue 36: frames of every shape renderers and oiiotool write, made from the repository's real frames (a render
# with depth, two photographs) by tools/make_frame: (what, source, make_frame's arguments).
SHAPES = [
    ("the park photograph, RGB half ZIP", "pmndrs_park.exr", ["zip"]),
    ("the park photograph, RGBA float ZIPS, mirrored to twice its size, decreasing Y", "pmndrs_park.exr",
     ["zips", "--float", "--channels", "rgba", "--mirror", "--decreasing"]),
    ("the desk photograph, Y float ZIP", "psychtoolbox_Desk.exr", ["zip", "--float", "--channels", "y"]),
    ("the street render, RGBA half with its depth and AOVs (ID uint, normals float, diffuse half) ZIP",
     "blender_street_960x540_singlelayer.exr", ["zip", "--aovs"]),
    ("the street render, RGB float with its depth and AOVs ZIP, decreasing Y",
     "blender_street_960x540_singlelayer.exr", ["zip", "--aovs", "--float", "--channels", "rgb", "--decreasing"]),
    ("the street render, RGBA half ZIPS", "blender_street_960x540_singlelayer.exr", ["zips"]),
    ("the street render as Blender wrote it (RGBA half, depth float, ZIP)", "blender_street_960x540_singlelayer.exr",
     None),
]


def make_shape(tmp, i, source, args):
    path = os.path.join(DATA, source) if args is None else os.path.join(tmp, f"shape{i}.exr")
    factor = "2" if args and "--mirror" in args else "1"
    if args is not None:
        subprocess.run([MAKE_FRAME, os.path.join(DATA, source), path, factor] + args, check=True,
                       capture_output=True, timeout=120)
    with open(path, "rb") as f:
        return f.read()


def shapes(tmp):
    """Every shape through the cpu, gpu and split daemons at once: the same PNG and /v1/analyze statistics,
    byte for byte; the gpu daemon's counted under gpu (none refused, none left to the CPU), the split daemon's
    under split. A frame decoded with the GPU holds its inflated chunks while it is decoded: what its image was
    charged covers them, and more (channels beside the colour) comes from the share of bodies still arriving,
    a quarter of max_inflight_mb, which the frame's own image charge came from too. The split daemon's 44 MiB
    make that share 11 MiB: the street render's frames with AOVs need more than is left of it and are decoded
    on the CPU as they arrive (counted under hdrpost_exr_cpu_frames_total's memory); Blender's own frame (RGBA
    and a float depth: 2.1 MiB more) is split."""
    frames = [(what, make_shape(tmp, i, src, args), args is not None and "--aovs" in args)
              for i, (what, src, args) in enumerate(SHAPES)]
    ds = {m: harness.start_ready(EXE, f"exr_zip {m} daemon (shapes)", [f"--exr_zip_decoder={m}"] + (
          ["--max_inflight_mb=44"] if m == "split" else []), ready_timeout=90) for m in ("cpu", "gpu", "split")}
    with harness.serving(ds["cpu"]), harness.serving(ds["gpu"]), harness.serving(ds["split"]):
        if not all(ds.values()):
            return
        for what, frame, aovs in frames:
            before = {m: zip_frames(d.port) for m, d in ds.items()}
            reasons = cpu_reasons(ds["gpu"].port)
            got = {}
            for m, d in ds.items():
                s, _, png = post(d.port, "/v1/render", frame, "output.format=png")
                a, _, js = post(d.port, "/v1/analyze", frame, "")
                try:
                    stats = json.loads(js)["stats"] if a == 200 else js[:300]
                except ValueError as e:
                    stats = repr(e)
                got[m] = (s, png, a, stats)
            after = {m: zip_frames(d.port) for m, d in ds.items()}
            moved = {m: {k: after[m][k] - before[m][k] for k in after[m] if after[m][k] != before[m][k]} for m in ds}
            split_to = "cpu" if aovs else "split"
            point(f"{what} ({len(frame)} bytes): the gpu and split daemons' PNG and statistics are the cpu daemon's, "
                  f"byte for byte; counted cpu 2, gpu 2, {split_to} 2",
                  got["cpu"][0] == 200 and got["cpu"][2] == 200 and got["gpu"] == got["cpu"] == got["split"]
                  and moved == {"cpu": {"cpu": 2.0}, "gpu": {"gpu": 2.0}, "split": {split_to: 2.0}}
                  and cpu_reasons(ds["gpu"].port) == reasons
                  and (not aovs or cpu_reasons(ds["split"].port).get("memory", 0) >= 2),
                  f"{ {m: (g[0], len(g[1]), g[2]) for m, g in got.items()} } {moved} "
                  f"{got['gpu'][3] if got['gpu'][3] != got['cpu'][3] else ''}")
        for m, d in ds.items():
            ok, lines = idle(d.port)
            point(f"shapes, {m} daemon: afterwards no pinned block is out, the memory budget is whole and nothing "
                  "is held from the share of bodies arriving", ok,
                  f"{lines}")


def body(tmp):
    shapes(tmp)
    frames = {c: make(tmp, c) for c in ("zip", "zips", "piz")}
    cpu_answers = {}
    gpu = harness.start_ready(EXE, "exr_zip gpu daemon", ["--exr_zip_decoder=gpu"], ready_timeout=90)
    cpu = harness.start_ready(EXE, "exr_zip cpu daemon", ["--exr_zip_decoder=cpu"], ready_timeout=90)
    with harness.serving(gpu), harness.serving(cpu):
        if not gpu or not cpu:
            return
        g0, c0 = zip_frames(gpu.port), zip_frames(cpu.port)
        b0 = zip_batches(gpu.port)
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
        b1 = zip_batches(gpu.port)
        moved = {k: b1[k] - b0.get(k, 0) for k in b1 if b1[k] != b0.get(k, 0)}
        # Which inflate takes each frame is the device's (on lavapipe the serial loop's; on a GPU a lone frame's
        # chunks against its SMs), so the inflates are summed; a series of an inflate moves with its seconds.
        inflates = ("serial", "wide")
        batches = sum(moved.get(f'hdrpost_exr_zip_gpu_batches_total{{inflate="{i}"}}', 0) for i in inflates)
        timed = all((f'hdrpost_exr_zip_gpu_batches_total{{inflate="{i}"}}' in moved) ==
                    (moved.get(f'hdrpost_exr_zip_gpu_batch_gpu_seconds_total{{inflate="{i}"}}', 0) > 0)
                    for i in inflates)
        hist = ('hdrpost_exr_zip_gpu_batch_frames_bucket{le="%s"}', "hdrpost_exr_zip_gpu_batch_frames_count",
                "hdrpost_exr_zip_gpu_batch_frames_sum")
        point("/metrics: the four frames, one after another, are four batches of one frame each, counted under the "
              "inflate that took them with its GPU time, none beside another, the cpu daemon none",
              batches == 4 and timed and all(moved.get(hist[0] % le) == 4 for le in ("1", "2", "16", "+Inf"))
              and moved.get(hist[1]) == 4 and moved.get(hist[2]) == 4
              and "hdrpost_exr_zip_gpu_batches_beside_total" not in moved and not zip_batches(cpu.port)
              and len(moved) in (13, 15), f"{moved}")

        # The GPU's route gathers the chunks as the body arrives (api/frames/early_decode.c's zip_on_gpu)
        gt0 = zip_frames(gpu.port)
        st, png_t = harness.post_trickled(gpu.port, frames["zip"], "output.format=png", timeout=REQUEST_TIMEOUT_S)
        gt1 = zip_frames(gpu.port)
        point("the ZIP frame sent to the gpu daemon in 8 pieces 50 ms apart (each chunk gathered when its bytes are "
              "in): the same PNG, counted under gpu", st == 200 and png_t == png_c and gt1["gpu"] - gt0["gpu"] == 1
              and gt1["gpu_then_cpu"] == gt0["gpu_then_cpu"], f"{st} {gt0} -> {gt1} {png_t[:200]!r}")
        hung_up_point(gpu.port, frames["zip"], "gpu", gt1)

        lenient = lenient_exr(frames["zip"], 34)
        g4 = zip_frames(gpu.port)
        sl, _, png_l = post(gpu.port, "/v1/render", lenient, "output.format=png")
        sk, _, png_k = post(cpu.port, "/v1/render", lenient, "output.format=png")
        g5 = zip_frames(gpu.port)
        point("a chunk libdeflate takes and zlib refuses (288 literal/length codes): the GPU refuses it, the CPU "
              "decodes the frame into the device memory, the PNG the cpu daemon's (counted as gpu_then_cpu)",
              sl == 200 and sk == 200 and png_l == png_k == png_c and g5["gpu_then_cpu"] - g4["gpu_then_cpu"] == 1
              and g5["gpu"] == g4["gpu"] and g5["cpu"] == g4["cpu"], f"{sl} {sk} {g4} -> {g5} {png_l[:200]!r}")

        g6 = zip_frames(gpu.port)
        bad = damaged(frames["zip"])
        eg = error_of(*post(gpu.port, "/v1/render", bad, "output.format=png")[::2])
        ec = error_of(*post(cpu.port, "/v1/render", bad, "output.format=png")[::2])
        point("a damaged chunk: 400 malformed_image on both, naming the same chunk and scanlines",
              eg[:2] == (400, "malformed_image") and ec[:2] == (400, "malformed_image")
              and chunk_named(eg[2]) is not None and chunk_named(eg[2]) == chunk_named(ec[2]),
              f"\n#   GPU: {eg}\n#   CPU: {ec}")
        g7 = zip_frames(gpu.port)
        point("the damaged frame went to the GPU, which refused it, then to the CPU, whose verdict is the answer "
              "(gpu_then_cpu +1)", g7["gpu_then_cpu"] - g6["gpu_then_cpu"] == 1, f"{g6} -> {g7}")

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
        # Issue 36: why a frame could not take the GPU's decoders is counted by reason, and said once in the log.
        r0 = cpu_reasons(gpu.port)
        tiled = make_tiled(tmp)
        for _ in range(2):
            post(gpu.port, "/v1/render", frames["piz"], "output.format=png")
        st, _, _ = post(gpu.port, "/v1/render", tiled, "output.format=png")
        r1 = cpu_reasons(gpu.port)
        said = gpu.log().count('decoded on the CPU; hdrpost_exr_cpu_frames_total{reason="compression"}')
        point("hdrpost_exr_cpu_frames_total: PIZ frames under compression, a tiled ZIP frame under tiled; the log "
              "says each reason once", st == 200 and r1.get("compression", 0) - r0.get("compression", 0) == 2
              and r1.get("tiled", 0) - r0.get("tiled", 0) == 1 and said == 1
              and 'hdrpost_exr_cpu_frames_total{reason="tiled"}' in gpu.log(),
              f"{r0} -> {r1}; said {said}")

        sz, _, png_zs = post(cpu.port, "/v1/render", frames["zips"], "output.format=png")
        cpu_answers.update(zip=png_c, zips=png_zs if sz == 200 else None, lenient=png_k, damaged_chunk=chunk_named(ec[2]))
        trailing = lenient_exr(frames["zip"], 34, lambda stream: stream + b"\x00" * 8)
        st, _, png_tr = post(cpu.port, "/v1/render", trailing, "output.format=png")
        cpu_answers.update(trailing=png_tr if st == 200 else None)
        five = exr_zip_frame(320, 64, ["R", "G", "B", "A", "Z"])
        s5, _, png5 = post(cpu.port, "/v1/render", five, "output.format=png")
        cpu_answers.update(five_planes=png5 if s5 == 200 else None)
        frames.update(lenient=lenient, damaged=bad, trailing=trailing, five_planes=five)
        for d in (gpu, cpu):
            ok, lines = idle(d.port)
            point(f"{d.label}: afterwards no pinned block is out, the memory budget is whole and nothing is held "
                  "from the share of bodies arriving", ok, f"{lines}")
        s, _, png = post(gpu.port, "/v1/render", frames["zip"], "output.format=png")
        point("the gpu daemon still serves after the damaged frame: the ZIP frame again, the same PNG",
              s == 200 and png == png_c, f"{s}")

    lost_in_decode(frames, "gpu")
    lost_in_decode(frames, "split")
    split_daemon(frames, cpu_answers)
    gather_after_body(frames, cpu_answers)
    share_daemon(frames, cpu_answers)

    auto = harness.start_ready(EXE, "exr_zip auto daemon", ready_timeout=90)
    with harness.serving(auto):
        if auto:
            on_cpu = "exr_zip_decoder auto: EXR ZIP chunks are inflated on the CPU" in auto.log()
            s, _, _ = post(auto.port, "/v1/render", frames["zip"], "output.format=png")
            counted = zip_frames(auto.port)
            point("exr_zip_decoder auto (the default) on a device whose inflate needs slices: the CPU, said at "
                  "start-up, and the frame counted under cpu", on_cpu and s == 200 and counted == {"cpu": 1.0,
                  "gpu": 0.0, "gpu_then_cpu": 0.0, "split": 0.0, "split_then_cpu": 0.0} or (not on_cpu and "llvmpipe" not in auto.log()), f"{s} {counted}")


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE, MAKE_FRAME], "hdrpost-exr-zip-", body))
