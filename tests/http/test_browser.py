#!/usr/bin/env python3
"""A browser shows the daemon's Display P3 images with the right colours (issue 17: "A browser must show a
P3 image with the right colours").

The daemon renders one synthetic frame of flat patches, saturated colours inside sRGB's gamut and a grey,
three ways: a PNG for sRGB, a PNG for Display P3 and a lossless WebP for Display P3. The test makes a fourth
image itself, the Display P3 PNG with its colour chunks taken out (iCCP, cHRM, gAMA, sRGB): the same samples
with no profile. Headless Chromium shows the four at 1:1 on one page, on an sRGB display
(--force-color-profile=srgb), and takes a screenshot; the centre pixel of each patch is read from it.

On the screen, the Display P3 PNG and WebP must look like the sRGB PNG (within 2 levels a channel: the
profile's conversion back to sRGB rounds twice), the untagged copy must not (more than 8 levels on the
saturated patches: it is the proof that the browser applied the profile and that the first two checks can
fail), and the sRGB PNG must look like its own samples (within 1 level: the browser does not alter sRGB).
A second screenshot for a Display P3 display (--force-color-profile=display-p3-d65) must show the P3 files as
their own samples and the sRGB file as the P3 file's samples: the profile is P3's.
Before any browser, the P3 files' samples are checked to be P3's (they differ from the sRGB file's on the
saturated patches and match the Rec.709 -> P3 matrix), so that the P3 image is not the sRGB one relabelled.

Usage: test_browser.py PATH/TO/hdrpostd [PATH/TO/chromium]. TAP on stdout. Without the second argument
Chromium is found on PATH (chromium, else chromium-browser); a missing browser is a failed point, not a skip:
deploy/debian.sh installs it with the test packages. Standard library only. Chromium runs in its own
process group with its profile, HOME and caches inside the test's temporary directory; the group is killed
when it outlives BROWSER_TIMEOUT_S and when the test ends.
"""
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (PngError, mat_inv, mat_mul, mat_vec, png_decode, point, request, rgb_to_xyz_d65,  # noqa: E402
                     start_ready, stop_clean, webp_size)

EXE = sys.argv[1] if len(sys.argv) > 1 else ""
CHROMIUM = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else (shutil.which("chromium")
                                                                  or shutil.which("chromium-browser") or "")
START_TIMEOUT_S = 60      # from the start to /readyz 200 (lavapipe compiles every pipeline first)
REQUEST_TIMEOUT_S = 120   # one render of a 256x128 frame
BROWSER_TIMEOUT_S = 120   # one headless Chromium run, start to screenshot (about 2 s on 2 cores)

# The frame: PATCH x PATCH squares, COLS a row, in linear Rec.709 (the daemon's default input space). All are
# inside sRGB's gamut, so the sRGB and P3 renders are the same colours; the saturated ones are far from both
# gamuts' whites, so that their P3 samples differ from their sRGB samples by up to 44 levels.
PATCH = 64
COLS = 4
PATCHES = [
    ("red", (0.80, 0.05, 0.05)),
    ("green", (0.05, 0.60, 0.05)),
    ("blue", (0.05, 0.05, 0.70)),
    ("yellow", (0.70, 0.60, 0.03)),
    ("grey", (0.18, 0.18, 0.18)),
    ("cyan", (0.03, 0.50, 0.60)),
    ("magenta", (0.60, 0.03, 0.50)),
    ("orange", (0.50, 0.25, 0.10)),
]
WIDTH = PATCH * COLS
HEIGHT = PATCH * ((len(PATCHES) + COLS - 1) // COLS)
# A patch is "saturated" for check (3) when its P3 samples differ from its sRGB samples by more than this in
# the files: the untagged copy then shows at least that far from the sRGB colours.
SATURATED_LEVELS = 12
TAGGED_TOLERANCE = 2      # checks (1) and (2): P3 shown against sRGB's samples
UNTAGGED_MIN = 8          # check (3): the untagged copy shown against sRGB's samples, saturated patches
SRGB_TOLERANCE = 1        # check (4): the sRGB PNG shown against its own samples

# Parameters that keep the samples predictable: exposure x1, the linear curve (a clamp; every patch is
# below 1), the sRGB curve, no dither noise.
COMMON = ("input.width={w}&input.height={h}&input.channels=3&input.type=float32&exposure.mode=fixed"
          "&exposure.stops=0&tonemap.operator=linear&gamma.mode=srgb&output.dither=false").format(w=WIDTH, h=HEIGHT)
RENDERS = [  # (key, query, content type, X-Output-Colorspace)
    ("srgb_png", "output.format=png&output.colorspace=srgb", "image/png", "srgb"),
    ("p3_png", "output.format=png&output.colorspace=display_p3", "image/png", "display_p3"),
    ("p3_webp", "output.format=webp&output.lossless=true&output.colorspace=display_p3", "image/webp", "display_p3"),
]
COLOUR_CHUNKS = (b"iCCP", b"cHRM", b"gAMA", b"sRGB")

# The page: the images side by side at 1:1, GAP pixels apart, on a background no patch has.
SHOWN = [  # (key, file name, what it is)
    ("srgb_png", "srgb.png", "the sRGB PNG"),
    ("p3_png", "p3.png", "the display_p3 PNG"),
    ("p3_webp", "p3.webp", "the display_p3 WebP"),
    ("untagged", "untagged.png", "the display_p3 PNG without its colour chunks"),
]
GAP = 16
PAGE_W = GAP + len(SHOWN) * (WIDTH + GAP)
PAGE_H = HEIGHT + 2 * GAP


# --- The colours ------------------------------------------------------------------------------------------


REC709 = rgb_to_xyz_d65((0.640, 0.330, 0.300, 0.600, 0.150, 0.060, 0.3127, 0.3290))
DISPLAY_P3 = rgb_to_xyz_d65((0.680, 0.320, 0.265, 0.690, 0.150, 0.060, 0.3127, 0.3290))  # SMPTE EG 432-1, D65
REC709_TO_P3 = mat_mul(mat_inv(DISPLAY_P3), REC709)


def srgb_encode(v):
    """IEC 61966-2-1's curve, clamped to [0, 1]."""
    v = min(max(v, 0.0), 1.0)
    return 12.92 * v if v <= 0.0031308 else 1.055 * v ** (1 / 2.4) - 0.055


def expected_samples(linear):
    """The 8-bit samples of a linear Rec.709 colour for sRGB and for Display P3."""
    srgb = tuple(round(255 * srgb_encode(c)) for c in linear)
    p3 = tuple(round(255 * srgb_encode(c)) for c in mat_vec(REC709_TO_P3, linear))
    return srgb, p3


def frame_body():
    """The frame as little-endian float32 RGB, rows top to bottom."""
    rows = []
    for py in range(HEIGHT // PATCH):
        colours = [PATCHES[i][1] if i < len(PATCHES) else (0.0, 0.0, 0.0)
                   for i in range(py * COLS, (py + 1) * COLS)]
        row = b"".join(struct.pack("<3f", *c) * PATCH for c in colours)
        rows.append(row * PATCH)
    return b"".join(rows)


def patch_centre(i):
    """(x, y) of patch i's centre pixel in the image."""
    return (i % COLS) * PATCH + PATCH // 2, (i // COLS) * PATCH + PATCH // 2


def pixel(decoded, x, y):
    width, _, channels, depth, samples = decoded
    if depth != 8:
        raise PngError(f"expected an 8-bit image, got {depth} bits")
    i = (y * width + x) * channels
    return tuple(samples[i:i + 3])


def diff(a, b):
    return max(abs(p - q) for p, q in zip(a, b))


# --- PNG and WebP chunks ----------------------------------------------------------------------------------


def png_chunks(data):
    """[(type, whole chunk bytes)] of a PNG, CRCs checked."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise PngError("no PNG signature")
    pos, out = 8, []
    while pos + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        end = pos + 12 + length
        if end > len(data):
            raise PngError(f"chunk {kind!r} runs past the end")
        if zlib.crc32(data[pos + 4:end - 4]) != struct.unpack(">I", data[end - 4:end])[0]:
            raise PngError(f"bad CRC on chunk {kind!r}")
        out.append((kind, data[pos:end]))
        pos = end
        if kind == b"IEND":
            break
    return out


def png_untagged(data):
    """The PNG without its colour chunks (COLOUR_CHUNKS); every other chunk kept byte for byte."""
    return data[:8] + b"".join(chunk for kind, chunk in png_chunks(data) if kind not in COLOUR_CHUNKS)


def webp_chunks(data):
    """[fourcc] of a RIFF WebP's chunks, in order."""
    out, pos = [], 12
    while pos + 8 <= len(data):
        fourcc, size = struct.unpack("<4sI", data[pos:pos + 8])
        out.append(fourcc)
        pos += 8 + size + (size & 1)
    return out


# --- The browser ------------------------------------------------------------------------------------------


def write_page(tmp, files):
    """page.html in tmp showing files {key: name} side by side at 1:1; {key: (left, top)} on the page."""
    places, imgs = {}, []
    for n, (key, name, _) in enumerate(SHOWN):
        left, top = GAP + n * (WIDTH + GAP), GAP
        places[key] = (left, top)
        imgs.append(f'<img id="{key}" src="{files[key]}" width="{WIDTH}" height="{HEIGHT}" '
                    f'style="left:{left}px;top:{top}px">')
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>\n"
            "html, body { margin: 0; padding: 0; overflow: hidden; background: rgb(0, 0, 0); }\n"
            "img { position: absolute; image-rendering: pixelated; border: 0; }\n"
            "</style></head><body>\n" + "\n".join(imgs) + "\n</body></html>\n")
    path = os.path.join(tmp, "page.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path, places


def chromium_argv(page, shot, profile, display):
    # --headless=new: the browser's own renderer, the one users run (the old headless shell is a separate
    # binary now); --no-sandbox: the tests run as root, where the sandbox refuses to start; --disable-gpu:
    # no GPU here, Skia rasterises on the CPU; --force-color-profile=srgb: an sRGB display whatever the
    # machine says, so the screen's values are sRGB values (display-p3-d65 for a P3 display);
    # --force-device-scale-factor=1: one CSS pixel is
    # one screenshot pixel; --virtual-time-budget: the screenshot waits for the images to load and decode.
    return [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--force-color-profile={display}",
            "--force-device-scale-factor=1", "--hide-scrollbars", f"--window-size={PAGE_W},{PAGE_H}",
            "--virtual-time-budget=5000", f"--user-data-dir={profile}", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", "--mute-audio",
            f"--screenshot={shot}", "file://" + page]


def screenshot(tmp, page, display):
    """Runs Chromium on the page for a display ("srgb", "display-p3-d65"): (screenshot bytes or None, its
    command line and log's tail)."""
    shot = os.path.join(tmp, f"screen-{display}.png")
    home = os.path.join(tmp, "chromium-home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
               XDG_CACHE_HOME=os.path.join(home, ".cache"), XDG_RUNTIME_DIR=home, TMPDIR=tmp)
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    env.pop("LD_PRELOAD", None)  # the sanitizer pass preloads ASan into the daemon, never into the browser
    log_path = os.path.join(tmp, f"chromium-{display}.log")
    argv = chromium_argv(page, shot, os.path.join(home, "profile"), display)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp, start_new_session=True)
        try:
            rc = proc.wait(timeout=BROWSER_TIMEOUT_S)
            why = f"exit code {rc}" if rc != 0 else ""
        except subprocess.TimeoutExpired:
            why = f"no exit after {BROWSER_TIMEOUT_S} s: killed"
        finally:
            kill_group(proc)
    with open(log_path, "rb") as f:  # without the lines about the D-Bus a container does not have
        tail = [l for l in f.read().decode("utf-8", "replace").splitlines() if "dbus" not in l][-20:]
    detail = " ".join(argv) + "\n" + (why + "\n" if why else "") + "\n".join(tail)
    if why or not os.path.exists(shot):
        return None, detail
    with open(shot, "rb") as f:
        return f.read(), detail


def kill_group(proc):
    """The browser's whole process group (the zygote, renderer and GPU helpers outlive the parent)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the group is empty
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def screen_colours(shot, places):
    """{key: [(r, g, b) of each patch's centre on the screen]}."""
    decoded = png_decode(shot)
    if decoded[:2] != (PAGE_W, PAGE_H):
        raise PngError(f"the screenshot is {decoded[0]}x{decoded[1]}, the window {PAGE_W}x{PAGE_H}")
    out = {}
    for key, (left, top) in places.items():
        out[key] = [pixel(decoded, left + x, top + y) for x, y in map(patch_centre, range(len(PATCHES)))]
    return out


# --- The suite --------------------------------------------------------------------------------------------


def render_all(d):
    """{key: (status, headers, body)} of RENDERS."""
    body = frame_body()
    assert len(body) == WIDTH * HEIGHT * 3 * 4
    out = {}
    for key, query, _, _ in RENDERS:
        out[key] = request(d.port, "POST", f"/v1/render?{COMMON}&{query}", body,
                           {"Content-Type": "application/octet-stream"}, timeout=REQUEST_TIMEOUT_S)
    return out


def table(rows):
    """A patch-by-patch table for the points' text: rows [(label, [value per patch])]."""
    head = "patch     " + " ".join(f"{name:>15}" for name, _ in PATCHES)
    return "\n".join([head] + [f"{label:<9} " + " ".join(f"{str(v):>15}" for v in values) for label, values in rows])


def check_files(res):
    """Points on the files themselves; {key: bytes} of the images when they are usable, else None."""
    ok_all = True
    for key, query, ctype, space in RENDERS:
        status, headers, body = res[key]
        ok = (status == 200 and headers.get("content-type") == ctype
              and headers.get("x-output-colorspace") == space)
        ok_all &= point(f"{query}: 200 {ctype} with X-Output-Colorspace: {space}", ok,
                        f"status {status}, Content-Type {headers.get('content-type')}, X-Output-Colorspace "
                        f"{headers.get('x-output-colorspace')}\n{body[:300]!r}")
    if not ok_all:
        return None
    files = {key: res[key][2] for key, *_ in RENDERS}

    srgb_kinds = [k for k, _ in png_chunks(files["srgb_png"])]
    p3_kinds = [k for k, _ in png_chunks(files["p3_png"])]
    point("the sRGB PNG carries the sRGB chunk and no iCCP", b"sRGB" in srgb_kinds and b"iCCP" not in srgb_kinds,
          f"chunks {srgb_kinds}")
    point("the display_p3 PNG carries iCCP, cHRM and gAMA before IDAT and no sRGB chunk",
          {b"iCCP", b"cHRM", b"gAMA"} <= set(p3_kinds[:p3_kinds.index(b"IDAT")] if b"IDAT" in p3_kinds else [])
          and b"sRGB" not in p3_kinds, f"chunks {p3_kinds}")
    webp = files["p3_webp"]
    kinds = webp_chunks(webp)
    point("the display_p3 WebP is lossless VP8X with the ICC flag and an ICCP chunk",
          webp_size(webp) == (WIDTH, HEIGHT) and kinds[:2] == [b"VP8X", b"ICCP"] and b"VP8L" in kinds
          and webp[20] & 0x20, f"chunks {kinds}, VP8X flags {webp[20]:#x}" if len(webp) > 20 else repr(webp))

    srgb, p3 = png_decode(files["srgb_png"]), png_decode(files["p3_png"])
    untagged = png_untagged(files["p3_png"])
    files["untagged"] = untagged
    untagged_kinds = [k for k, _ in png_chunks(untagged)]
    point("the untagged copy has no colour chunk and the display_p3 PNG's samples",
          not set(untagged_kinds) & set(COLOUR_CHUNKS) and png_decode(untagged) == p3, f"chunks {untagged_kinds}")

    centres = [patch_centre(i) for i in range(len(PATCHES))]
    s_px = [pixel(srgb, x, y) for x, y in centres]
    p_px = [pixel(p3, x, y) for x, y in centres]
    want = [expected_samples(c) for _, c in PATCHES]
    flat = all(len(set(pixel(img, x + dx, y + dy) for dx in (-PATCH // 2, PATCH // 2 - 1)
                       for dy in (-PATCH // 2, PATCH // 2 - 1))) == 1 for img in (srgb, p3) for x, y in centres)
    rows = [("sRGB file", s_px), ("want", [w[0] for w in want]), ("P3 file", p_px), ("want", [w[1] for w in want])]
    point("both PNGs are flat patches of the frame's colours: the sRGB curve of Rec.709 (sRGB) and of the "
          "Rec.709 -> P3 matrix (display_p3), within 1 level",
          flat and srgb[:4] == p3[:4] == (WIDTH, HEIGHT, 3, 8)
          and all(diff(a, w[0]) <= 1 and diff(b, w[1]) <= 1 for a, b, w in zip(s_px, p_px, want)),
          f"sizes {srgb[:4]} {p3[:4]}, flat {flat}\n" + table(rows))
    levels = [diff(a, b) for a, b in zip(s_px, p_px)]
    saturated = [i for i, v in enumerate(levels) if v > SATURATED_LEVELS]
    grey = [i for i, (name, _) in enumerate(PATCHES) if name == "grey"]
    point(f"the display_p3 PNG is P3, not the sRGB image relabelled: its samples differ from the sRGB PNG's by "
          f"more than {SATURATED_LEVELS} levels on {len(saturated)} saturated patches (max {max(levels)}), "
          f"by at most 1 on grey",
          len(saturated) >= 4 and all(levels[i] <= 1 for i in grey),
          table([("|sRGB-P3|", levels)]))
    return files, s_px, p_px, saturated


def shoot(tmp, page, places, display):
    """One screenshot for a display: {key: [patch centres]} or None after a failed point."""
    shot, detail = screenshot(tmp, page, display)
    if not point(f"headless Chromium screenshots the page ({PAGE_W}x{PAGE_H}) for a {display} display",
                 shot is not None, detail):
        return None
    try:
        return screen_colours(shot, places)
    except PngError as e:
        point(f"the {display} screenshot is a PNG of the window's size", False, f"{e}\n{detail}")
        return None


def compare(screen, against, label):
    """Per-patch levels between the screen's colours and against's, and a table of both for the text."""
    levels = [diff(a, b) for a, b in zip(screen, against)]
    return levels, table([("on screen", screen), (label, against), ("levels", levels)])


def check_screen(tmp, files, s_px, p_px, saturated):
    """The browser's points: (1)-(4) on an sRGB display, (5) on a Display P3 one."""
    if not point("Chromium is installed (chromium on PATH, or the path given)",
                 CHROMIUM and os.access(CHROMIUM, os.X_OK),
                 f"no Chromium at {CHROMIUM!r}: install Debian's 'chromium' package (deploy/debian.sh's "
                 f"test packages) or pass its path as the second argument"):
        return
    names = {}
    for key, name, _ in SHOWN:
        names[key] = name
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(files[key])
    page, places = write_page(tmp, names)

    screen = shoot(tmp, page, places, "srgb")
    if screen:
        levels, text = compare(screen["srgb_png"], s_px, "file")
        point(f"(4) on an sRGB display the sRGB PNG is shown as its own samples, within {SRGB_TOLERANCE} level "
              f"on every patch (max {max(levels)})", max(levels) <= SRGB_TOLERANCE, text)
        for n, key, what in (("(1)", "p3_png", "PNG"), ("(2)", "p3_webp", "WebP")):
            levels, text = compare(screen[key], s_px, "sRGB file")
            point(f"{n} on an sRGB display the display_p3 {what} is shown in the sRGB PNG's colours, within "
                  f"{TAGGED_TOLERANCE} levels on every patch (max {max(levels)}, per patch {levels})",
                  max(levels) <= TAGGED_TOLERANCE, text)
        levels, text = compare(screen["untagged"], s_px, "sRGB file")
        raw = [diff(a, b) for a, b in zip(screen["untagged"], p_px)]
        sat = [levels[i] for i in saturated]
        point(f"(3) on an sRGB display the untagged copy of the P3 samples is shown differently: more than "
              f"{UNTAGGED_MIN} levels from the sRGB colours on the {len(saturated)} saturated patches (min "
              f"{min(sat) if sat else None}, per patch {levels}), being shown as its raw samples (within "
              f"{TAGGED_TOLERANCE}: max {max(raw)})",
              sat and min(sat) > UNTAGGED_MIN and max(raw) <= TAGGED_TOLERANCE,
              text + "\n" + table([("P3 file", p_px), ("raw lvls", raw)]))

    # A Display P3 screen (a recent Mac's, a phone's): the P3 files need no conversion and the sRGB file
    # becomes the P3 samples. The profile is then exactly P3's, not merely one that maps to sRGB's colours.
    # Only colours inside sRGB can show this: Chromium's software compositor (--disable-gpu) clips an image
    # to sRGB's gamut even for a P3 display (P3's green (0, 255, 0) is shown as (117, 251, 76), sRGB's green),
    # which is why every patch is inside sRGB.
    screen = shoot(tmp, page, places, "display-p3-d65")
    if screen:
        own = [diff(a, b) for key in ("p3_png", "p3_webp") for a, b in zip(screen[key], p_px)]
        conv, text = compare(screen["srgb_png"], p_px, "P3 file")
        point(f"(5) on a Display P3 display the display_p3 PNG and WebP are shown as their own samples within "
              f"{SRGB_TOLERANCE} level (max {max(own)}) and the sRGB PNG as the P3 PNG's samples within "
              f"{TAGGED_TOLERANCE} (max {max(conv)}, per patch {conv})",
              max(own) <= SRGB_TOLERANCE and max(conv) <= TAGGED_TOLERANCE,
              text + "\n" + table([("P3 PNG", screen["p3_png"]), ("P3 WebP", screen["p3_webp"])]))


def body(tmp):
    d = start_ready(EXE, "browser", ready_timeout=START_TIMEOUT_S)
    if not d:
        return
    try:
        res = render_all(d)
    finally:
        stop_clean(d)
    checked = check_files(res)
    if checked:
        check_screen(tmp, *checked)


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE], "hdrpostd-browser-", body))
