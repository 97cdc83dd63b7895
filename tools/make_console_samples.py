#!/usr/bin/env python3
"""Makes the console's sample frames (console/samples/*.exr) from real frames in tests/data.

The frames' origins and licences are in tests/data/README.md; this reads three of them.

Run once by hand; the output is committed, and console/samples/README.md says what each file is and whose:

    ninja -C build tools/make_frame
    tools/make_console_samples.py build/tools/make_frame tests/data console/samples

Each sample is a small scanline OpenEXR, half-float colour and ZIP compression (16 rows a chunk), so that the
console's "try a frame" answers at once on any device and the page's upload is a few hundred kilobytes:

- street.exr: blender_street_960x540_singlelayer.exr at a third (320x180), R, G, B half and its depth Z
  for depth of field. Each output pixel is the mean of its 3x3 block; Z is the block's centre sample, not a
  mean, so that no depth in between a near and a far surface appears. Z is half too (metres, 0.57-30 m, a
  step of at most 16 mm there), which keeps the file under 300 KB (as float it was 346 KB); the sky's 1e10,
  past half's range, is written as +infinity, which the daemon takes for the background as it takes 1e10.
- park.exr: pmndrs_park.pfm (the same image as pmndrs_park.exr, which is DWAB) at half (256x128), R, G, B
  half; the lossy original's negative blue ringing near the sun is kept as it is.
- desk.exr: psychtoolbox_Desk.exr (PIZ, read through make_frame, which writes it back uncompressed) at a
  quarter (161x218 of its top-left 644x872), R, G, B, A half.

The standard library only: a reader for uncompressed and ZIP scanline OpenEXR and for PFM, a box filter and a
ZIP writer (OpenEXR's ZIP: bytes split into even and odd halves, a delta predictor, zlib).
"""
import math
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HALF, FLOAT = 1, 2
HALF_MAX = 65504.0


def read_attributes(data):
    """{name: (type, bytes)} of the first header and the offset after it."""
    if data[:4] != b"\x76\x2f\x31\x01":
        raise ValueError("not an OpenEXR file")
    pos, attrs = 8, {}
    while data[pos] != 0:
        end = data.index(b"\0", pos)
        name = data[pos:end].decode()
        end2 = data.index(b"\0", end + 1)
        kind = data[end + 1:end2].decode()
        size = struct.unpack("<i", data[end2 + 1:end2 + 5])[0]
        attrs[name] = (kind, data[end2 + 5:end2 + 5 + size])
        pos = end2 + 5 + size
    return attrs, pos + 1


def read_channels(chlist):
    out, pos = [], 0
    while chlist[pos] != 0:
        end = chlist.index(b"\0", pos)
        ptype = struct.unpack("<i", chlist[end + 1:end + 5])[0]
        out.append((chlist[pos:end].decode(), ptype))
        pos = end + 17
    return out


def unzip_block(raw, size):
    """OpenEXR's ZIP: inflate, undo the predictor, interleave the two halves back."""
    t = bytearray(zlib.decompress(raw))
    if len(t) != size:
        raise ValueError(f"ZIP block of {len(t)} bytes, expected {size}")
    for i in range(1, len(t)):
        t[i] = (t[i - 1] + t[i] - 128) & 0xFF
    out = bytearray(size)
    half = (size + 1) // 2
    out[0::2] = t[:half]
    out[1::2] = t[half:]
    return bytes(out)


def zip_block(data):
    n = len(data)
    t = bytearray(n)
    half = (n + 1) // 2
    t[:half] = data[0::2]
    t[half:] = data[1::2]
    prev = t[0] if n else 0
    for i in range(1, n):
        cur = t[i]
        t[i] = (cur - prev + 128 + 256) & 0xFF
        prev = cur
    packed = zlib.compress(bytes(t), 9)
    return packed if len(packed) < n else bytes(data)  # a block that does not shrink is stored as it is


def read_exr(path):
    """(width, height, {channel: [floats, row after row]}) of a scanline OpenEXR, uncompressed or ZIP(S)."""
    data = open(path, "rb").read()
    attrs, pos = read_attributes(data)
    x0, y0, x1, y1 = struct.unpack("<4i", attrs["dataWindow"][1])
    width, height = x1 - x0 + 1, y1 - y0 + 1
    compression = attrs["compression"][1][0]
    lines = {0: 1, 2: 1, 3: 16}.get(compression)
    if lines is None:
        raise ValueError(f"{path}: compression {compression} (only none, zips, zip)")
    channels = read_channels(attrs["channels"][1])
    blocks = (height + lines - 1) // lines
    offsets = struct.unpack(f"<{blocks}Q", data[pos:pos + 8 * blocks])
    planes = {name: [0.0] * (width * height) for name, _ in channels}
    for off in offsets:
        y, size = struct.unpack("<ii", data[off:off + 8])
        rows = min(lines, y1 + 1 - y)
        raw_size = rows * width * sum(2 if t == HALF else 4 for _, t in channels)
        block = data[off + 8:off + 8 + size]
        if size < raw_size:
            block = unzip_block(block, raw_size)
        p = 0
        for r in range(rows):
            base = (y - y0 + r) * width
            for name, ptype in channels:
                fmt, step = ("e", 2) if ptype == HALF else ("f", 4)
                values = struct.unpack(f"<{width}{fmt}", block[p:p + width * step])
                planes[name][base:base + width] = values
                p += width * step
    return width, height, planes


def read_pfm(path):
    data = open(path, "rb").read()
    parts, pos = [], 0
    while len(parts) < 4:  # "PF", width, height, scale, whitespace-separated
        while data[pos:pos + 1].isspace():
            pos += 1
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        parts.append(data[pos:end].decode())
        pos = end
    pos += 1
    if parts[0] != "PF":
        raise ValueError(f"{path}: only colour PFM")
    width, height, scale = int(parts[1]), int(parts[2]), float(parts[3])
    order = "<" if scale < 0 else ">"
    values = struct.unpack(f"{order}{width * height * 3}f", data[pos:pos + width * height * 12])
    planes = {c: [0.0] * (width * height) for c in "RGB"}
    for y in range(height):  # PFM rows run bottom to top
        src = (height - 1 - y) * width * 3
        for x in range(width):
            for k, c in enumerate("RGB"):
                planes[c][y * width + x] = values[src + 3 * x + k]
    return width, height, planes


def box(plane, width, factor, out_w, out_h):
    out = [0.0] * (out_w * out_h)
    inv = 1.0 / (factor * factor)
    for y in range(out_h):
        for x in range(out_w):
            s = 0.0
            for dy in range(factor):
                row = (y * factor + dy) * width + x * factor
                s += sum(plane[row:row + factor])
            out[y * out_w + x] = s * inv
    return out


def centre(plane, width, factor, out_w, out_h):
    c = factor // 2
    return [plane[(y * factor + c) * width + x * factor + c] for y in range(out_h) for x in range(out_w)]


def sky_infinite(depth):
    return [math.inf if z >= 1e9 else z for z in depth]


def write_exr(path, width, height, planes):
    """planes: [(name, HALF or FLOAT, values)] in any order; written sorted by name, as OpenEXR requires."""
    planes = sorted(planes, key=lambda p: p[0])

    def attr(name, kind, value):
        return name.encode() + b"\0" + kind.encode() + b"\0" + struct.pack("<i", len(value)) + value

    chlist = b"".join(n.encode() + b"\0" + struct.pack("<iB3xii", t, 0, 1, 1) for n, t, _ in planes) + b"\0"
    box2i = struct.pack("<4i", 0, 0, width - 1, height - 1)
    header = (b"\x76\x2f\x31\x01" + struct.pack("<i", 2) + attr("channels", "chlist", chlist) +
              attr("compression", "compression", b"\x03") + attr("dataWindow", "box2i", box2i) +
              attr("displayWindow", "box2i", box2i) + attr("lineOrder", "lineOrder", b"\0") +
              attr("pixelAspectRatio", "float", struct.pack("<f", 1.0)) +
              attr("screenWindowCenter", "v2f", struct.pack("<2f", 0.0, 0.0)) +
              attr("screenWindowWidth", "float", struct.pack("<f", 1.0)) + b"\0")
    chunks = []
    for y in range(0, height, 16):
        rows = min(16, height - y)
        raw = bytearray()
        for r in range(rows):
            base = (y + r) * width
            for _, ptype, values in planes:
                row = values[base:base + width]
                if ptype == HALF:
                    row = [v if math.isinf(v) else max(-HALF_MAX, min(HALF_MAX, v)) for v in row]
                raw += struct.pack(f"<{width}{'e' if ptype == HALF else 'f'}", *row)
        block = zip_block(bytes(raw))
        chunks.append(struct.pack("<ii", y, len(block)) + block)
    pos = len(header) + 8 * len(chunks)
    table = b""
    for c in chunks:
        table += struct.pack("<Q", pos)
        pos += len(c)
    with open(path, "wb") as f:
        f.write(header + table + b"".join(chunks))
    return os.path.getsize(path)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: make_console_samples.py MAKE_FRAME FRAMES_DIR OUT_DIR")
    make_frame, data, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)

    w, h, p = read_exr(os.path.join(data, "blender_street_960x540_singlelayer.exr"))
    f, ow, oh = 3, w // 3, h // 3
    size = write_exr(os.path.join(out, "street.exr"), ow, oh,
                     [(c, HALF, box(p[c], w, f, ow, oh)) for c in "RGB"] + [("Z", HALF, sky_infinite(centre(p["Z"], w, f, ow, oh)))])
    print(f"street.exr {ow}x{oh} {size} bytes")

    w, h, p = read_pfm(os.path.join(data, "pmndrs_park.pfm"))
    f, ow, oh = 2, w // 2, h // 2
    size = write_exr(os.path.join(out, "park.exr"), ow, oh, [(c, HALF, box(p[c], w, f, ow, oh)) for c in "RGB"])
    print(f"park.exr {ow}x{oh} {size} bytes")

    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "desk.exr")
        subprocess.run([make_frame, os.path.join(data, "psychtoolbox_Desk.exr"), plain, "1", "none"], check=True)
        w, h, p = read_exr(plain)
    f, ow, oh = 4, w // 4, h // 4
    size = write_exr(os.path.join(out, "desk.exr"), ow, oh, [(c, HALF, box(p[c], w, f, ow, oh)) for c in "RGBA"])
    print(f"desk.exr {ow}x{oh} {size} bytes")


if __name__ == "__main__":
    main()
