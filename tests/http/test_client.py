#!/usr/bin/env python3
"""hdrpost, the shot client, against the real daemon on 127.0.0.1 (lavapipe in CI, the validation layer on).

Usage: test_client.py PATH/TO/hdrpost PATH/TO/hdrpostd PATH/TO/make_frame. Prints TAP. The shot: 24 OpenEXR
frames (64x32, written from PFMs by tools/make_frame) of a dim gradient into which a bright light moves from
frame 8 on, from the right. Standard library only; loopback only; every wait is bounded. The OCIO points start a
daemon with tests/data/ocio/aces_builtin/config.ocio, and a stand-in for a daemon older than GET /v1/ocio.
"""

import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

HDRPOST = sys.argv[1] if len(sys.argv) > 1 else "hdrpost"
EXE = sys.argv[2] if len(sys.argv) > 2 else "hdrpostd"
MAKE_FRAME = sys.argv[3] if len(sys.argv) > 3 else "make_frame"
HOST = "127.0.0.1"
TOKEN = "client-test-token"
W, H, FRAMES, FIRST = 64, 32, 24, 1001
STATIC_COLUMNS = range(0, 16)  # the light never reaches the left quarter

from harness import free_port, png_decode, point, scaled  # noqa: E402
import harness  # noqa: E402


def gpu_delay(ms):
    """--test_gpu_delay_ms for the points that send SIGINT or SIGKILL a set time into a run: the run's pace
    (the GPU thread's sleep per frame) and the test's sleeps are stretched alike by HDRPOST_TEST_TIME_FACTOR,
    so that the signal still comes at the same point of the run (a few frames written, the shot being
    measured) when a sanitizer build is slower to start and to answer. The delay is the test's pacing, not
    something under test; at factor 1 it is the value given."""
    return f"--test_gpu_delay_ms={int(ms * harness.TIME_FACTOR)}"


def start(label, args=(), port=None):
    return harness.start_ready(EXE, label, [f"--auth_token={TOKEN}", "--warm_frame=none", *args], port=port)


def stop(d):
    harness.stop_clean(d)


def make_shot(tmp):
    """FRAMES EXR frames shot/beauty.NNNN.exr; returns the pattern."""
    shot = os.path.join(tmp, "shot")
    os.makedirs(shot)
    for f in range(FRAMES):
        rows = []
        for y in range(H):
            row = []
            for x in range(W):
                v = 0.1 + 0.1 * x / W
                if f >= 8 and x >= W - (f - 7) * 3 and 8 <= y < 24:
                    v = 40.0  # the light, wider every frame
                row += [v, v, v]
            rows.append(row)
        pfm = os.path.join(tmp, f"f{f}.pfm")
        with open(pfm, "wb") as out:  # PFM rows bottom to top
            out.write(b"PF\n%d %d\n-1.0\n" % (W, H))
            for row in reversed(rows):
                out.write(struct.pack(f"<{len(row)}f", *row))
        subprocess.run([MAKE_FRAME, pfm, os.path.join(shot, f"beauty.{FIRST + f:04d}.exr"), "1", "zip"], check=True,
                       stdout=subprocess.DEVNULL)
    return os.path.join(shot, "beauty.####.exr")


def hdrpost(*args, port, token=TOKEN, timeout=120, env=None):
    """(exit code, stdout, stderr) of one hdrpost run."""
    e = dict(os.environ, **(env or {}))
    e.pop("HDRPOST_SERVER", None)
    e.pop("HDRPOST_TOKEN", None)
    argv = [HDRPOST, *args, "--server", f"http://{HOST}:{port}"] + (["--token", token] if token else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(timeout), env=e)
    return done.returncode, done.stdout, done.stderr


def static_level(png_path):
    """The mean 8-bit level of the static region (left quarter) of an output."""
    with open(png_path, "rb") as f:
        w, h, channels, _, px = png_decode(f.read())
    total = count = 0
    for y in range(h):
        for x in STATIC_COLUMNS:
            total += px[(y * w + x) * channels + 1]  # green
            count += 1
    return total / count


def levels(out):
    return [static_level(os.path.join(out, f"beauty.{FIRST + f:04d}.png")) for f in range(FRAMES)]


def max_jump(values):
    return max(abs(b - a) for a, b in zip(values, values[1:]))


# --- The tests ------------------------------------------------------------------------------------------


def exposure_lock(d, tmp, pattern):
    rng = f"{FIRST}-{FIRST + FRAMES - 1}"
    per_frame, shot = os.path.join(tmp, "out-frame"), os.path.join(tmp, "out-shot")
    rc1, _, err1 = hdrpost("render", pattern, "--frames", rng, "-o", per_frame, "--format", "png", "--exposure",
                           "frame", port=d.port)
    rc2, out2, err2 = hdrpost("render", pattern, "--frames", rng, "-o", shot, "--format", "png", "--json",
                              port=d.port)
    point("render --exposure frame: every frame written, exit 0", rc1 == 0 and len(os.listdir(per_frame)) == FRAMES,
          err1)
    summary = json.loads(out2) if rc2 == 0 else {}
    exposure = summary.get("exposure", {})
    point("render (shot by default for a shot): every frame written, exit 0, the --json summary says so with "
          "the shot's values", rc2 == 0 and summary.get("rendered") == FRAMES and exposure.get("mode") == "shot"
          and exposure.get("adaptation", 0) > 0 and summary.get("failed") == [], err2 + out2)
    jump_frame, jump_shot = max_jump(levels(per_frame)), max_jump(levels(shot))
    print(f"# static region, largest jump between frames: exposure frame {jump_frame:.2f} levels, "
          f"exposure shot {jump_shot:.2f} levels")
    point(f"--exposure frame: the light entering pumps the static region ({jump_frame:.1f} levels)", jump_frame > 3)
    point(f"--exposure shot: the static region holds within 1 level ({jump_shot:.2f})", jump_shot <= 1.0)
    with open(os.path.join(shot, "exposure.json")) as f:
        lock = json.load(f)
    values = {(fr["adaptation"], fr["key"], fr["white_point"]) for fr in lock["frames"]}
    point("exposure.json: one adaptation, key and white point for every frame of the shot",
          len(values) == 1 and lock["mode"] == "shot" and len(lock["frames"]) == FRAMES, str(values))
    # Every frame posted by hand with the same parameters: the daemon's own exposure scale and white point are
    # the same for every frame, and the bytes are the client's.
    scales, same_bytes = set(), 0
    for i, fr in enumerate(lock["frames"]):
        query = (f"output.format=png&exposure.mode=fixed&exposure.adaptation={fr['adaptation']!r}"
                 f"&exposure.key={fr['key']!r}&tonemap.white_point={fr['white_point']!r}")
        with open(pattern.replace("####", f"{FIRST + i:04d}"), "rb") as f:
            frame = f.read()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        status, _, body = harness.request(d.port, "POST", "/v1/render?" + query, frame, auth, timeout=60)
        _, _, doc = harness.request(d.port, "POST", "/v1/render?" + query, frame,
                                    dict(auth, Accept="application/json"), timeout=60)
        e = json.loads(doc).get("exposure", {})
        scales.add((round(e.get("scale", 0), 9), round(e.get("white", 0), 6)))
        with open(os.path.join(shot, f"beauty.{FIRST + i:04d}.png"), "rb") as f:
            same_bytes += status == 200 and body == f.read()
    point("the daemon's exposure scale and white point are the same for every frame of the shot",
          len(scales) == 1, str(scales))
    point("every output is byte for byte what posting its frame by hand with the same parameters gives",
          same_bytes == FRAMES, f"{same_bytes} of {FRAMES}")
    rc, out, err = hdrpost("render", pattern, "--frames", rng, "-o", shot, "--format", "png", port=d.port)
    point("outputs that exist are not overwritten by surprise: exit 2 naming --resume and --overwrite",
          rc == 2 and "--resume" in err and "--overwrite" in err, err)
    # drago takes the frame's log-average and maximum into its curve as well: locked with the exposure.
    drago = {}
    for mode in ("frame", "shot"):
        out_dir = os.path.join(tmp, f"out-drago-{mode}")
        rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out_dir, "--format", "png", "--set",
                             "tonemap.operator=drago", "--exposure", mode, port=d.port)
        drago[mode] = max_jump(levels(out_dir)) if rc == 0 else None
    print(f"# drago, static region, largest jump: exposure frame {drago['frame']}, shot {drago['shot']} levels")
    point("drago: --exposure frame pumps the static region, shot holds it within 1 level (its L_wa and L_wmax locked)",
          drago["frame"] is not None and drago["shot"] is not None and drago["frame"] > 3 and drago["shot"] <= 1.0,
          str(drago))
    win = os.path.join(tmp, "out-window")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", win, "--format", "png", "--exposure", "window=5",
                         port=d.port)
    with open(os.path.join(win, "exposure.json")) as f:
        adaptations = [fr["adaptation"] for fr in json.load(f)["frames"]]
    point("--exposure window=5: each frame's adaptation from the 5 around it, so it rises where the light enters",
          rc == 0 and adaptations[0] == adaptations[1] and adaptations[-1] > adaptations[0], str(adaptations))


def user_exposure(d, tmp, pattern):
    """The request's own exposure parameters with the lock: its key kept, its fixed exposure kept (the white
    point still locked), histogram refused; --set wins over --params."""
    rng = f"{FIRST}-{FIRST + 5}"
    out = os.path.join(tmp, "key")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out, "--set", "exposure.key=0.09", port=d.port)
    with open(os.path.join(out, "exposure.json")) as f:
        keys = {fr["key"] for fr in json.load(f)["frames"]} if rc == 0 else set()
    point("--set exposure.key=0.09 with the shot's lock: rendered with that key", rc == 0 and keys == {0.09}, err)
    out = os.path.join(tmp, "fixed")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out, "--format", "png", "--set",
                         "exposure.mode=fixed", "--set", "exposure.stops=2", port=d.port)
    with open(os.path.join(out, "exposure.json")) as f:
        whites = {fr["white_point"] for fr in json.load(f)["frames"]} if rc == 0 else set()
    point("a fixed exposure of the request's own (stops 2) is kept; the white point is still locked for the shot",
          rc == 0 and len(whites) == 1 and list(whites)[0] > 0, err)
    out = os.path.join(tmp, "fixed-auto-key")
    rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + FRAMES - 1}", "-o", out, "--format", "png",
                         "--set", "exposure.mode=fixed", "--set", "exposure.adaptation=0.2", "--set", "exposure.key=auto",
                         port=d.port)
    jump = max_jump(levels(out)) if rc == 0 else None
    point(f"a fixed adaptation with exposure.key=auto: the automatic key is the shot's, the static region holds "
          f"({jump} levels)", jump is not None and jump <= 1.0, err)
    # A resumed run whose recorded exposure does not fit (other frames, other parameters) is refused: the
    # frames already written would not match the rest.
    out = os.path.join(tmp, "seam")
    hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 3}", "-o", out, port=d.port)
    rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 11}", "-o", out, "--resume", port=d.port)
    rc2, _, err2 = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 3}", "-o", out, "--resume", "--set",
                           "exposure.key=0.5", port=d.port)
    os.remove(os.path.join(out, f"beauty.{FIRST + 2:04d}.webp"))
    rc3, _, err3 = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 3}", "-o", out, "--resume", port=d.port)
    point("--resume with other frames or other parameters than the recorded exposure's: exit 2 naming --overwrite; "
          "with the same: the recorded exposure", rc == 2 and "--overwrite" in err and rc2 == 2 and rc3 == 0
          and "exposure.json (--resume)" in err3, f"{rc} {err}\n{rc2} {err2}\n{rc3} {err3}")
    # Issue 35: each refusal a short sentence naming what changed and what to do.
    point("--resume refused: a sentence naming what changed (the frames: 4 then, 12 now; exposure.key: 0.18 then, "
          "0.5 now) and what to do (the same parameters, or --overwrite), without the --help hint",
          re.search(r"cannot resume: the frames changed since \S+exposure\.json was recorded \(4 then, 12 now", err)
          is not None and re.search(r"cannot resume: exposure\.key changed since \S+exposure\.json was recorded "
                                    r"\(0\.18 then, 0\.5 now\)\. Run with the same parameters and frames, or with "
                                    r"--overwrite", err2) is not None
          and "--help" not in err + err2 and len(err2.strip().splitlines()) == 1, f"{err}\n{err2}")
    point("--resume with one frame missing of four: a sentence saying 3 of 4 are done and the rest get the recorded "
          "exposure; exactly that frame rendered",
          "resuming: 3 of 4 frames already done; the rest are rendered with the exposure recorded in " in err3
          and len(re.findall(r" rendered \(", err3)) == 1, err3)
    rc4, out4, err4 = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 3}", "-o", out, "--resume", "--json",
                              port=d.port)
    summary = json.loads(out4) if rc4 == 0 and out4.strip() else {}
    point("--resume with every frame done: exit 0, \"nothing left to render: 4 frames already done (--resume)\", "
          "nothing posted (the --json summary: 0 rendered, 4 skipped)",
          rc4 == 0 and "nothing left to render: 4 frames already done (--resume)" in err4
          and " rendered (" not in err4 and " analysed (" not in err4 and summary.get("rendered") == 0
          and summary.get("skipped") == 4, f"{rc4}\n{out4}\n{err4}")
    # A look's exposure is the request's own (blender: fixed, 0 EV): the shot renders as its parameters sent
    # one by one, not at the lock's automatic exposure.
    outs = [os.path.join(tmp, "look"), os.path.join(tmp, "look-explicit")]
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", outs[0], "--format", "png", "--set",
                         "look=blender", port=d.port)
    rc2, _, err2 = hdrpost("render", pattern, "--frames", rng, "-o", outs[1], "--format", "png", "--set",
                           "exposure.mode=fixed", "--set", "exposure.stops=0", "--set", "tonemap.operator=agx",
                           "--set", "gamma.mode=srgb", port=d.port)
    pngs = [sorted(n for n in os.listdir(o) if n.endswith(".png")) if os.path.isdir(o) else [] for o in outs]
    same = rc == rc2 == 0 and pngs[0] == pngs[1] and len(pngs[0]) == 6 and all(
        open(os.path.join(outs[0], n), "rb").read() == open(os.path.join(outs[1], n), "rb").read() for n in pngs[0])
    point("--set look=blender over a shot renders byte for byte as the look's parameters set one by one", same,
          f"{rc} {err}\n{rc2} {err2}")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "hist"), "--set",
                         "exposure.mode=histogram", port=d.port)
    point("exposure.mode=histogram with the shot's lock: exit 2 saying why", rc == 2 and "histogram" in err, err)
    out = os.path.join(tmp, "order")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out, "--set", "output.format=png", "--params",
                         '{"output": {"format": "webp"}}', port=d.port)
    point("--set wins over --params, whatever their order", rc == 0 and all(
        n.endswith(".png") for n in os.listdir(out) if n != "exposure.json"), err)
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "dup"), "--params",
                         '{"tonemap": {"operator": "agx"}, "tonemap.operator": "hable"}', port=d.port)
    point("--params read by the daemon's own JSON parser: a name both nested and dotted is refused with its message",
          rc == 2 and "tonemap.operator" in err, err)


def analyze_and_status(d, tmp, pattern):
    rng = f"{FIRST}-{FIRST + 3}"
    rc, out, err = hdrpost("analyze", pattern, "--frames", rng, "--csv", port=d.port)
    rows = out.strip().splitlines()
    point("analyze --csv: a header and a row per frame", rc == 0 and len(rows) == 5
          and rows[0].startswith("frame,log_average"), out + err)
    rc, out, err = hdrpost("analyze", pattern, "--frames", rng, "--json", port=d.port)
    doc = json.loads(out) if rc == 0 else []
    point("analyze --json: the daemon's statistics for every frame",
          len(doc) == 4 and all("stats" in x["analysis"] for x in doc), out[:300] + err)
    rc, out, err = hdrpost("status", port=d.port)
    point("status: ready, the device and the queue on one screen", rc == 0 and "ready    yes" in out
          and "queue" in out and "device" in out, out + err)
    # Issue 35: an exit status a script can gate on; the two refusals told apart.
    rc, out, err = hdrpost("status", port=d.port, token="wrong")
    rc2, _, err2 = hdrpost("status", port=d.port, token=None)
    rc3, _, err3 = hdrpost("status", port=free_port())
    point("status exits 4 for a refused token (\"refused the token given\") and for none (\"none was given\"), 3 "
          "for an unreachable server", rc == 4 and "the daemon refused the token given" in err and rc2 == 4
          and "needs a token and none was given" in err2 and rc3 == 3 and "unreachable" in err3,
          f"{rc} {err}\n{rc2} {err2}\n{rc3} {err3}")
    rc, out, err = hdrpost("status", "--json", port=free_port())
    doc = json.loads(out) if out.strip().startswith("{") else {}
    point("status --json of an unreachable server: its object still, exit_status 3, ready false",
          rc == 3 and doc.get("exit_status") == 3 and doc.get("ready") is False, f"{rc} {out!r} {err}")


def refusals(d, tmp, pattern):
    rng = f"{FIRST}-{FIRST + 1}"
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "r1"), port=d.port,
                         token="wrong")
    point("a wrong token: exit 4 saying the token given was refused, with the daemon's message",
          rc == 4 and "the daemon refused the token given" in err and "unauthorized" in err and "--help" not in err,
          err)
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "r1"), port=d.port, token=None)
    point("no token to a daemon that needs one: exit 4 saying none was given and how to give one",
          rc == 4 and "needs a token and none was given: --token TOKEN or HDRPOST_TOKEN" in err
          and "refused the token given" not in err, err)
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "r2"), port=free_port())
    point("an unreachable server: exit 3 saying so", rc == 3 and "unreachable" in err, err)
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "r3"), "--set",
                         "tonemap.white_point=-1", port=d.port)
    point("a bad parameter: exit 2 before a frame is sent, with the daemon's own message (no --help hint: it is "
          "not an option's fault)", rc == 2 and "tonemap.white_point must be a number in [0, 1e9], got -1" in err
          and not os.path.exists(os.path.join(tmp, "r3")) and "--help" not in err, err)
    rc, _, err = hdrpost("render", pattern, "-o", os.path.join(tmp, "r4"), port=d.port)
    point("a pattern without --frames: exit 2 saying what to add", rc == 2 and "--frames" in err, err)
    # Issue 35: the --help hint for a command line that is wrong, not for a missing file.
    rc, _, err = hdrpost("render", os.path.join(tmp, "no-such-frame.exr"), "-o", os.path.join(tmp, "r6"), port=d.port)
    rc2, _, err2 = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "r6"), "--no-such-option",
                           port=d.port)
    point("a missing file: exit 2 naming it, without \"--help lists the options\"; an unknown option: with it",
          rc == 2 and "no-such-frame.exr: No such file or directory" in err and "--help" not in err
          and rc2 == 2 and "(hdrpost render --help lists the options)" in err2, f"{err}\n{err2}")
    rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST + 23}-{FIRST}", "-o", os.path.join(tmp, "r7"),
                         port=d.port)
    point("--frames 1024-1001: exit 2 saying the first frame is after the last",
          rc == 2 and f"the first frame ({FIRST + 23}) is after the last ({FIRST})" in err, err)
    out_dir = os.path.join(tmp, "r8")
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out_dir, "--resume", "--overwrite", port=d.port)
    point("--resume with --overwrite: exit 2 before anything is sent, saying they contradict",
          rc == 2 and "--resume and --overwrite together" in err and not os.path.exists(out_dir), err)
    # A corrupt frame in the shot: that frame fails with the daemon's message, the others are written.
    shot = os.path.join(tmp, "corrupt")
    os.makedirs(shot)
    src = os.path.dirname(pattern)
    for f in range(4):
        name = f"beauty.{FIRST + f:04d}.exr"
        with open(os.path.join(src, name), "rb") as i, open(os.path.join(shot, name), "wb") as o:
            data = i.read()
            o.write(data[:200] if f == 2 else data)
    out_dir = os.path.join(tmp, "r5")
    rc, out, err = hdrpost("render", shot, "-o", out_dir, "--format", "png", "--json", port=d.port)
    summary = json.loads(out) if out.strip() else {}
    failed = summary.get("failed", [])
    point("a corrupt frame: exit 1, that frame named with the daemon's message, the other three written",
          rc == 1 and len(failed) == 1 and failed[0]["frame"] == f"beauty.{FIRST + 2:04d}"
          and "malformed_image" in failed[0]["error"] and summary.get("rendered") == 3
          and sorted(os.listdir(out_dir)) == sorted([f"beauty.{FIRST + f:04d}.png" for f in (0, 1, 3)] +
                                                    ["exposure.json"]), out + err)


def timings(d, tmp, pattern):
    """Issue 35: --timings has a column for every phase the daemon reports, png_gpu of a GPU-encoded PNG among them:
    the same names, in the same order, as the Server-Timing of the same request sent by hand."""
    frame = pattern.replace("####", f"{FIRST:04d}")
    csv_path = os.path.join(tmp, "timings.csv")
    rc, _, err = hdrpost("render", frame, pattern.replace("####", f"{FIRST + 1:04d}"), "-o", os.path.join(tmp, "tm"),
                         "--format", "png", "--set", "output.png_encoder=gpu", "--timings", csv_path, port=d.port)
    with open(frame, "rb") as f:
        status, headers, _ = harness.request(d.port, "POST", "/v1/render?output.format=png&output.png_encoder=gpu",
                                             f.read(), {"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    phases = [field.split(";")[0].strip() for field in headers.get("server-timing", "").split(",")]
    rows = open(csv_path).read().splitlines() if os.path.exists(csv_path) else []
    header = rows[0].split(",") if rows else []
    point(f"--timings of a GPU-encoded PNG: the columns are frame, status, server and every phase of the daemon's "
          f"Server-Timing ({', '.join(phases)}), png_gpu among them, a value in each for both frames",
          rc == 0 and status == 200 and "png_gpu" in phases and header == ["frame", "status", "server", *phases]
          and len(rows) == 3 and all(len(r.split(",")) == len(header) and "" not in r.split(",") for r in rows[1:]),
          f"{rows}\n{phases}\n{err}")


def busy_daemon(tmp, pattern):
    """queue_depth 1 and --jobs 8: frames refused 429 are waited out and none is lost."""
    d = start("busy daemon", ["--queue_depth=1", "--test_gpu_delay_ms=100"])
    if not d:
        return
    try:
        out_dir = os.path.join(tmp, "busy")
        rng = f"{FIRST}-{FIRST + 15}"
        rc, out, err = hdrpost("render", pattern, "--frames", rng, "-o", out_dir, "--jobs", "8", "--exposure", "frame",
                               "--json", port=d.port, timeout=300)
        _, _, metrics = harness.request(d.port, "GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        refused = sum(float(l.split()[-1]) for l in metrics.decode().splitlines()
                      if l.startswith("hdrpost_requests_total{route=\"/v1/render\",status=\"429\"}"))
        point(f"queue_depth 1, --jobs 8: all 16 frames written through {refused:.0f} answers 429, none lost",
              rc == 0 and len(os.listdir(out_dir)) == 16 and refused > 0, err[-2000:])
        # Issue 35: every 429 waited out is said in the log and counted in the summary, as many as the daemon sent.
        summary = json.loads(out) if rc == 0 else {}
        said = len(re.findall(r"hdrpost: beauty\.\d+: the daemon's queue is full \(HTTP 429\), retry \d+ in", err))
        counted = summary.get("retries", {}).get("busy_429")
        point(f"the 429s: {said} line(s) in the log, {counted} in the --json summary and on its line, "
              f"{refused:.0f} sent by the daemon", said == counted == refused > 0
              and f", {said} answers 429" in err, err[-2000:])
        text, rc = on_terminal([HDRPOST, "render", pattern, "--frames", rng, "-o", os.path.join(tmp, "busy-tty"),
                                "--jobs", "8", "--exposure", "frame", "--server", f"http://{HOST}:{d.port}",
                                "--token", TOKEN], timeout=300)
        point("on a terminal, the progress line says the wait: \"waiting: the daemon's queue is full (HTTP 429), "
              "retry N in T s\"", rc == 0 and re.search(r"rendering \d+/16, 0 failed, [0-9.]+ frames/s, ETA [0-9]+ s; "
                                                       r"waiting: the daemon's queue is full \(HTTP 429\), retry \d+ "
                                                       r"in [0-9.]+ s", text) is not None, repr(text[-800:]))
    finally:
        stop(d)


def interrupted_and_resumed(tmp, pattern):
    d = start("slow daemon", [gpu_delay(400)])
    if not d:
        return
    try:
        rng = f"{FIRST}-{FIRST + 11}"

        def interrupt(out_dir, after_s, *extra):
            argv = [HDRPOST, "render", pattern, "--frames", rng, "-o", out_dir, "--jobs", "2", "--format", "png",
                    *extra, "--server", f"http://{HOST}:{d.port}", "--token", TOKEN]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(scaled(after_s))  # with gpu_delay(): the same point of the run at any factor
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=scaled(60))
            return proc.returncode, err

        out_dir = os.path.join(tmp, "resume")
        rc, err = interrupt(out_dir, 1.5, "--exposure", "frame")
        written = [n for n in os.listdir(out_dir) if n.endswith(".png")]
        partial = [n for n in os.listdir(out_dir) if ".part-" in n]
        point("SIGINT: frames in flight finish, no new one starts, exit 1, no partial file",
              rc == 1 and 0 < len(written) < 12 and not partial and "interrupted" in err,
              f"exit {rc}, {len(written)} written, partial {partial}\n{err}")
        rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", out_dir, "--jobs", "2", "--exposure", "frame",
                             "--format", "png", "--resume", port=d.port)
        rendered = len(re.findall(r" rendered \(", err))
        point(f"--resume renders only the {12 - len(written)} missing frames",
              rc == 0 and rendered == 12 - len(written) and len(os.listdir(out_dir)) == 12, err)
        # SIGINT while the shot is being measured: nothing rendered, no exposure recorded, exit 1.
        out_dir = os.path.join(tmp, "resume-analysis")
        rc, err = interrupt(out_dir, 1.0)
        point("SIGINT while measuring the shot: exit 1, nothing rendered, no exposure.json",
              rc == 1 and "interrupted" in err and not os.path.exists(os.path.join(out_dir, "exposure.json"))
              and not [n for n in os.listdir(out_dir) if n.endswith(".png")], f"exit {rc}\n{err}")
        # SIGINT while rendering a locked shot, then --resume: the recorded exposure, no second analysis.
        out_dir = os.path.join(tmp, "resume-shot")
        rc, err = interrupt(out_dir, 7.0)  # the analysis takes 12 x 0.4 s on the delayed GPU thread
        with open(os.path.join(out_dir, "exposure.json"), "rb") as f:
            recorded = f.read()
        rc2, _, err2 = hdrpost("render", pattern, "--frames", rng, "-o", out_dir, "--jobs", "2", "--format", "png",
                               "--resume", port=d.port)
        with open(os.path.join(out_dir, "exposure.json"), "rb") as f:
            after = f.read()
        point("--resume of a locked shot renders the rest with the exposure recorded, without measuring again",
              rc == 1 and rc2 == 0 and " analysed (" not in err2 and "exposure.json (--resume)" in err2
              and recorded == after and len([n for n in os.listdir(out_dir) if n.endswith(".png")]) == 12,
              f"first exit {rc}, second {rc2}\n{err2}")
    finally:
        stop(d)


def daemon_gone(tmp, pattern):
    """A daemon that dies for good mid-run: the run stops with exit 2 once a frame has had every retry."""
    d = start("daemon to lose", [gpu_delay(300)])
    if not d:
        return
    argv = [HDRPOST, "render", pattern, "--frames", f"{FIRST}-{FIRST + 23}", "-o", os.path.join(tmp, "gone"),
            "--jobs", "2", "--exposure", "frame", "--retries", "2", "--json", "--server", f"http://{HOST}:{d.port}",
            "--token", TOKEN]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(scaled(1.0))  # mid-run (gpu_delay: the same point of the run at any factor)
    d.kill()
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=scaled(120))
    took = time.monotonic() - t0
    # The 20 s is not stretched by HDRPOST_TEST_TIME_FACTOR: it is what the point checks, that the run stops
    # once one frame has had its retries (2: 0.5 + 1 s of back-off, the client's own clock) rather than
    # after every frame's, and a dead port is refused at once in any build.
    point(f"the daemon gone mid-run: exit 3 saying it is unreachable, in {took:.1f} s, not frame after frame",
          proc.returncode == 3 and "unreachable" in err and took < 20, err[-1500:])
    # Issue 35: the summary counts the frames never tried, on stderr and in --json, and every frame is one of
    # rendered, failed or not tried.
    summary = json.loads(out) if out.strip() else {}
    left = summary.get("not_tried", -1)
    line = re.search(r"(\d+) rendered, 0 skipped, (\d+) failed, (\d+) not tried of 24 frames", err)
    point(f"the daemon gone: the summary counts the {left} frame(s) never tried, and the stop says --resume does them",
          left > 0 and summary.get("rendered", 0) + len(summary.get("failed", [])) + left == 24 and line is not None
          and int(line.group(3)) == left and f"{left} frame(s) not tried (--resume does them)" in err,
          f"{out}\n{err[-1500:]}")


def restarted_daemon(tmp, pattern):
    port = free_port()
    d = start("daemon to restart", [gpu_delay(300)], port=port)
    if not d:
        return
    out_dir = os.path.join(tmp, "restart")
    argv = [HDRPOST, "render", pattern, "--frames", f"{FIRST}-{FIRST + 9}", "-o", out_dir, "--jobs", "2",
            "--exposure", "frame", "--format", "png", "--server", f"http://{HOST}:{port}", "--token", TOKEN]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(scaled(1.0))
    d.kill()  # SIGKILL mid-run
    time.sleep(scaled(1.0))
    d2 = start("the daemon restarted", [gpu_delay(300)], port=port)
    try:
        out, err = proc.communicate(timeout=scaled(120))
        point("the daemon killed mid-run and restarted: the client retries and finishes every frame",
              proc.returncode == 0 and len([n for n in os.listdir(out_dir) if n.endswith(".png")]) == 10, err)
        # Issue 35: the retries are said, each in the log, and counted in the summary.
        no_answer = re.findall(r"^hdrpost: beauty\.\d+: no answer \([^)]*\), retry \d+ in [0-9.]+ s$", err, re.M)
        waits = re.findall(r"^hdrpost: beauty\.\d+: .*, retry \d+ in [0-9.]+ s$", err, re.M)
        counted = re.search(r"; (\d+) retries: (\d+) after no answer or a 5xx, ", err)
        point(f"the restart's waits: {len(no_answer)} line(s) in the log saying no answer and the retry "
              f"({len(waits)} waits in all), and the summary counts every one",
              no_answer and counted is not None and int(counted.group(1)) == len(waits)
              and int(counted.group(2)) >= len(no_answer), err)
    finally:
        if proc.poll() is None:
            proc.kill()
        if d2:
            stop(d2)


def on_terminal(argv, timeout=60):
    """(what hdrpost wrote to its standard error, a terminal (a pty), exit status) of one run."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        r, _, _ = select.select([primary], [], [], 0.5)
        if r:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=scaled(30))
    os.close(primary)
    return seen.decode("utf-8", "replace"), proc.returncode


def progress(d, tmp, pattern):
    rng = f"{FIRST}-{FIRST + 3}"
    argv = [HDRPOST, "render", pattern, "--frames", rng, "-o", os.path.join(tmp, "tty"), "--server",
            f"http://{HOST}:{d.port}", "--token", TOKEN]
    text, rc = on_terminal(argv)
    point("on a terminal: one progress line redrawn in place (carriage returns), frames done/total and frames/s",
          rc == 0 and "\r" in text and re.search(r"rendering 4/4, 0 failed, [0-9.]+ frames/s", text)
          and " rendered (" not in text, repr(text[-500:]))
    text, rc = on_terminal(argv + ["--resume"])
    point("on a terminal, --resume with nothing left: the sentence \"nothing left to render: 4 frames already done "
          "(--resume)\", no progress line drawn (no \"rendering 0/0\")",
          rc == 0 and "nothing left to render: 4 frames already done (--resume)" in text and "rendering" not in text,
          repr(text[-500:]))
    rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "pipe"), port=d.port)
    point("in a pipe: a plain line per frame, no carriage return", rc == 0 and "\r" not in err
          and len(re.findall(r"beauty\.\d+ rendered \(", err)) == 4, err)


# --- Studio colour through the daemon's OCIO config (issue 34) ----------------------------------------------

ACES_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ocio", "aces_builtin",
                           "config.ocio")


def direct_render(d, query, frame_path):
    with open(frame_path, "rb") as f:
        frame = f.read()
    return harness.request(d.port, "POST", "/v1/render?" + query, frame, {"Authorization": f"Bearer {TOKEN}"},
                           timeout=scaled(60))


def ocio_names_left_to_daemon(d, tmp, pattern):
    """Against a daemon without a config: the client has none either, so it sends the names and the daemon says."""
    rc, _, err = hdrpost("render", pattern.replace("####", f"{FIRST:04d}"), "-o", os.path.join(tmp, "no-config"),
                         "--set", "ocio.view=Un-tone-mapped", port=d.port)
    point("--set ocio.view to a daemon without an OCIO config: sent, and its no_ocio_config stops the run (exit 2)",
          rc == 2 and "no_ocio_config" in err and "stopped" in err, err)
    rc, out, err = hdrpost("status", port=d.port)
    point("status of a daemon without an OCIO config: \"ocio     none\"", rc == 0 and "\nocio     none\n" in out,
          out + err)


# The daemon's own looks (studio_looks), which hdrpost learns from GET /v1/params.
STUDIO_LOOKS = ("review: ocio.view=Un-tone-mapped&exposure.mode=fixed&exposure.stops=1; "
                "pq16: ocio.display=Rec.2100-PQ%20-%20Display&output.format=png&output.bit_depth=16")


def studio_looks(d, tmp, pattern):
    """look=<a studio look> through hdrpost: the client reads it as the daemon will (no shot lock over a look's
    fixed exposure, the look's format names the files), and a look the daemon lacks stops the run before a frame."""
    frames = [pattern.replace("####", f"{FIRST + n:04d}") for n in (12, 13)]
    out = os.path.join(tmp, "studio-look")
    rc, _, err = hdrpost("render", *frames, "-o", out, "--set", "look=review", port=d.port)
    same = rc == 0
    for frame in frames:
        status, _, body = direct_render(d, "ocio.view=Un-tone-mapped&exposure.mode=fixed&exposure.stops=1", frame)
        written = os.path.join(out, os.path.basename(frame).replace(".exr", ".webp"))
        same = same and status == 200 and os.path.exists(written) and open(written, "rb").read() == body
    lock = {}
    if os.path.exists(os.path.join(out, "exposure.json")):
        with open(os.path.join(out, "exposure.json")) as f:
            lock = json.load(f)
    request = lock.get("request") or {}
    point("render two frames --set look=review (a studio look: a view at a fixed +1 stop): exit 0, each frame byte "
          "for byte the spelled-out request's, and the shot's record keeps the look's fixed +1 stop (no shot "
          "adaptation laid over it)", same and request.get("fixed") is True and request.get("fixed_stops") == 1.0,
          f"exit {rc}, exposure.json {lock}\n{err}")
    out = os.path.join(tmp, "studio-pq")
    rc, _, err = hdrpost("render", frames[0], "-o", out, "--set", "look=pq16", port=d.port)
    written = os.path.join(out, os.path.basename(frames[0]).replace(".exr", ".png"))
    point("render --set look=pq16 (a studio look setting output.format=png, 16-bit PQ): the file is .png and a PNG",
          rc == 0 and os.path.exists(written) and open(written, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
          f"exit {rc}, {os.listdir(out) if os.path.isdir(out) else 'no output folder'}\n{err}")
    out = os.path.join(tmp, "studio-none")
    rc, _, err = hdrpost("render", frames[0], "-o", out, "--set", "look=dailies", port=d.port)
    point("render --set look=dailies (neither hdrpost's nor the daemon's): exit 2 before a frame, listing the "
          "daemon's looks", rc == 2 and "review" in err and "pq16" in err and "dailies" in err
          and not (os.path.isdir(out) and os.listdir(out)), f"exit {rc}\n{err}")


def ocio_config(tmp, pattern):
    d = start("daemon with an OCIO config", [f"--ocio_config={ACES_CONFIG}", f"--studio_looks={STUDIO_LOOKS}"])
    if not d:
        return
    try:
        frame = pattern.replace("####", f"{FIRST + 12:04d}")
        out = os.path.join(tmp, "ocio")
        look = "+ACES 1.3 Reference Gamut Compression"
        rc, _, err = hdrpost("render", frame, "-o", out, "--format", "png", "--set", "ocio.view=Un-tone-mapped",
                             "--set", "input.colorspace=ACEScg", "--params", json.dumps({"ocio": {"looks": look}}),
                             port=d.port)
        query = ("ocio.view=Un-tone-mapped&input.colorspace=ACEScg&ocio.looks=%2BACES%201.3%20Reference%20Gamut"
                 "%20Compression&output.format=png")
        status, _, body = direct_render(d, query, frame)
        written = os.path.join(out, f"beauty.{FIRST + 12:04d}.png")
        same = rc == 0 and status == 200 and os.path.exists(written) and open(written, "rb").read() == body
        point("render --set ocio.view=Un-tone-mapped --set input.colorspace=ACEScg (a name of the config, which the "
              "client cannot check) and ocio.looks from --params: exit 0, byte for byte the direct request's image",
              same, f"exit {rc}, direct {status}\n{err}")
        rc, _, err = hdrpost("render", frame, "-o", os.path.join(tmp, "ocio-bad"), "--set", "ocio.view=No Such View",
                             port=d.port)
        status, _, body = direct_render(d, "ocio.view=No%20Such%20View", frame)
        message = (harness.json_body(body) or {}).get("error", {}).get("message", "?")
        point("a view the config lacks: exit 2, the daemon's 400 message shown, nothing written",
              rc == 2 and status == 400 and "HTTP 400" in err and message in err
              and not [n for n in os.listdir(tmp) if n == "ocio-bad" and os.listdir(os.path.join(tmp, n))],
              f"exit {rc}, daemon: {message}\n{err}")
        rc, _, err = hdrpost("render", frame, "-o", os.path.join(tmp, "ocio-conflict"), "--set",
                             "ocio.view=Un-tone-mapped", "--set", "tonemap.operator=agx", port=d.port)
        point("an operator with a view: exit 2 before a frame is sent, with the daemon's own ocio_conflict message",
              rc == 2 and "tonemap.operator does not apply with an OCIO view" in err
              and not os.path.exists(os.path.join(tmp, "ocio-conflict")), err)
        rc, out, err = hdrpost("status", port=d.port)
        rc2, out2, _ = hdrpost("status", "--json", port=d.port)
        doc = json.loads(out2) if rc2 == 0 else {}
        point("status names the OCIO config: its name, path and displays (and --json gives /v1/ocio's answer)",
              rc == 0 and re.search(r"\nocio     hdrpostd-aces-builtin-v1 \(.*aces_builtin/config\.ocio\), 5 displays",
                                    out) is not None
              and doc.get("ocio", {}).get("config", {}).get("name") == "hdrpostd-aces-builtin-v1", out + err)
        studio_looks(d, tmp, pattern)
    finally:
        stop(d)


def older_daemon_status(tmp=None, pattern=None):
    """A daemon from before GET /v1/ocio (a stand-in: /readyz and /v1/gpu, 404 elsewhere): status says unknown."""
    import http.server
    import threading

    class Old(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            known = {"/readyz": b'{"ready": true}', "/v1/gpu": b'{"device": "stand-in", "queue": {"capacity": 1}}'}
            body = known.get(self.path, b'{"error": {"code": "not_found", "message": "no such route"}}')
            self.send_response(200 if self.path in known else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((HOST, 0), Old)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rc, out, err = hdrpost("status", port=server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    point("status of a daemon older than /v1/ocio (404): \"ocio     unknown\"",
          rc == 0 and "\nocio     unknown" in out, out + err)


def warming_daemon(tmp, pattern):
    """Issue 35: a daemon that is starting. GET /v1/gpu's 503 says when to come back (Retry-After, as /readyz's);
    status exits 5 while it warms; render and analyze wait for it (up to --wait), saying so, then do every frame. The
    warm-up frames (64x32) each wait gpu_delay on the GPU thread: the daemon stays starting for seconds after its
    device is up, long beyond the client's start."""
    d = harness.Daemon(EXE, "warming daemon", [f"--auth_token={TOKEN}", "--warm_frame=64x32", gpu_delay(4000)])
    render = analyze = None
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        answers = []  # (status, Retry-After) of /v1/gpu from the daemon's first answer until its device is up
        out_dir = os.path.join(tmp, "warming")
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline and d.proc.poll() is None and (not answers or answers[-1][0] != 200):
            try:
                status, headers, _ = harness.request(d.port, "GET", "/v1/gpu", headers=auth)
                answers.append((status, headers.get("retry-after")))
            except OSError:
                pass  # not listening yet
            if answers and not render:
                # Started at the daemon's first answer: most likely while its device is still being made (/v1/gpu
                # 503), else during the warm-up frames (/readyz 503 alone); they must wait through either.
                server = ["--server", f"http://{HOST}:{d.port}", "--token", TOKEN]
                render = subprocess.Popen([HDRPOST, "render", pattern, "--frames", f"{FIRST}-{FIRST + 1}", "-o",
                                           out_dir, "--exposure", "frame", "--format", "png", *server],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                analyze = subprocess.Popen([HDRPOST, "analyze", pattern, "--frames", f"{FIRST}-{FIRST + 1}", "--csv",
                                            *server], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.01)
        early = [a for a in answers if a[0] == 503]
        point(f"GET /v1/gpu while the daemon is starting: {len(early)} answer(s) 503, each with Retry-After: 1, "
              "then 200", early and all(a == (503, "1") for a in early) and answers[-1][0] == 200,
              f"{answers[:5]} ... {answers[-3:]}\n{d.log()[-1500:]}")
        rc, out, err = hdrpost("status", port=d.port)
        rc_json, out_json, _ = hdrpost("status", "--json", port=d.port)
        doc = json.loads(out_json) if out_json.strip() else {}
        point("status of a warming daemon: exit 5 saying it is not ready (and --json: ready false, exit_status 5)",
              rc == 5 and "not ready" in err and "starting" in err and rc_json == 5 and doc.get("ready") is False
              and doc.get("exit_status") == 5, f"{rc} {out}{err}")
        short_dir = os.path.join(tmp, "warming-short")
        rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 1}", "-o", short_dir, "--exposure",
                             "frame", "--wait", "0.5", port=d.port)
        point("render --wait 0.5 against a daemon still warming: exit 5, still not ready after the wait, nothing "
              "written", rc == 5 and "still not ready after" in err and "--wait 0.5" in err
              and not [n for n in (os.listdir(short_dir) if os.path.isdir(short_dir) else []) if n.endswith(".png")],
              err)
        _, err = render.communicate(timeout=scaled(300)) if render else ("", "not started: the daemon never answered")
        point("render started at the daemon's first answer: it says it waits for the daemon to be ready, then that "
              "it is, and renders every frame (exit 0)", render and render.returncode == 0
              and "waiting for the daemon to be ready" in err and "--wait" in err
              and re.search(r"the daemon is ready after [0-9.]+ s", err) is not None
              and len([n for n in os.listdir(out_dir) if n.endswith(".png")]) == 2, err)
        out, err = analyze.communicate(timeout=scaled(300)) if analyze else ("", "not started")
        point("analyze started with it: waits the same way, then a row per frame (exit 0)", analyze
              and analyze.returncode == 0 and "waiting for the daemon to be ready" in err
              and "the daemon is ready after" in err and len(out.strip().splitlines()) == 3, out + err)
        rc, out, err = hdrpost("status", port=d.port)
        point("status once it is ready: exit 0", rc == 0 and "ready    yes" in out, out + err)
    finally:
        for proc in (render, analyze):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        harness.stop_clean(d)


def formats(d, tmp, pattern):
    """Every format the daemon writes: --format jpeg writes name.jpg JPEGs, a look or --set that names avif writes
    name.avif, and a format the daemon does not have is refused before a frame is sent, naming the choices."""
    frame = pattern.replace("####", f"{FIRST:04d}")
    out = os.path.join(tmp, "formats")
    rc, _, err = hdrpost("render", frame, "-o", out, "--format", "jpeg", port=d.port)
    name = os.path.splitext(os.path.basename(frame))[0]
    jpg = os.path.join(out, name + ".jpg")
    data = open(jpg, "rb").read(3) if os.path.exists(jpg) else b""
    point("--format jpeg: name.jpg, a JPEG", rc == 0 and data == b"\xff\xd8\xff", f"{rc} {os.listdir(out) if os.path.isdir(out) else []}\n{err}")
    rc, _, err = hdrpost("render", frame, "-o", out, "--set", "output.format=avif", port=d.port)
    avif = os.path.join(out, name + ".avif")
    data = open(avif, "rb").read(12) if os.path.exists(avif) else b""
    point("--set output.format=avif: name.avif, an AVIF (ftyp avif)", rc == 0 and data[4:12] == b"ftypavif",
          f"{rc} {data!r} {os.listdir(out) if os.path.isdir(out) else []}\n{err}")
    rc, _, err = hdrpost("render", frame, "-o", os.path.join(tmp, "formats_bad"), "--format", "tiff", port=d.port)
    point("--format tiff: refused (exit 2) naming output.format and the formats the daemon writes",
          rc == 2 and "output.format" in err and "png" in err and "avif" in err
          and not os.path.exists(os.path.join(tmp, "formats_bad", name + ".webp")), f"{rc}\n{err}")


def device_lost_daemon(tmp, pattern):
    """A daemon that loses its GPU mid-run answers every later frame 503 without Retry-After: the run stops at
    once with exit 5 (not ready), retrying nothing, with the frames never tried counted, in both the per-frame
    exposure and the shot's measuring pass."""
    with harness.serving(start("device lost", ["--test_lose_device_after=1"])) as d:
        if not d:
            return
        rng = f"{FIRST}-{FIRST + 5}"
        rc, out, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "lost"), "--format", "png",
                               "--exposure", "frame", "--json", "--retries", "5", "--jobs", "1", port=d.port)
        summary = json.loads(out) if rc is not None and out.strip().startswith("{") else {}
        point("GPU lost mid-run: exit 5, no frame retried, the rest counted as not tried, the reason named",
              rc == 5 and "device" in err and summary.get("retries", {}).get("no_answer_or_5xx", -1) == 0
              and summary.get("rendered", 0) + len(summary.get("failed", [])) + summary.get("not_tried", 0) == 6
              and summary.get("not_tried", 0) >= 1, f"rc {rc}\n{out}\n{err}")
        rc, _, err = hdrpost("render", pattern, "--frames", rng, "-o", os.path.join(tmp, "lost_shot"), "--format",
                             "png", port=d.port)
        point("GPU lost before the shot is measured: exit 5 too", rc == 5 and "device" in err, f"rc {rc}\n{err}")


def client_daemon(tmp, pattern):
    with harness.serving(start("client daemon")) as d:
        if d:
            for group in (exposure_lock, user_exposure, analyze_and_status, refusals, timings, formats, progress,
                          ocio_names_left_to_daemon):
                group(d, tmp, pattern)


# Under HDRPOST_TEST_QUICK (the ThreadSanitizer pass): SIGINT while the client's frames are in flight on its
# threads, then --resume (where TSan found the stop flag's race).
QUICK = (interrupted_and_resumed,)


def main():
    def suite(tmp):
        pattern = make_shot(tmp)
        for group in harness.groups((client_daemon, busy_daemon, interrupted_and_resumed, restarted_daemon,
                                     daemon_gone, warming_daemon, device_lost_daemon, ocio_config, older_daemon_status), QUICK):
            group(tmp, pattern)

    return harness.run_suite([HDRPOST, EXE, MAKE_FRAME], "hdrpost-client-", suite)


if __name__ == "__main__":
    sys.exit(main())
