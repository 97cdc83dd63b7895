#!/usr/bin/env python3
"""The CPU tools a user would reach for to turn an EXR into a display image (issue 6), timed the way the
daemon is: one frame at a time, and as many frames per second as one process per core gives.

    bench/peers/cpu_tools.py FRAME.exr [--repeat N] [--procs P] [--out DIR] [--json PATH]

Tools (Debian packages pfstools, luminance-hdr, openimageio-tools), each writing a PNG:
  pfstools          pfsin | pfstmo_reinhard02 | pfsgamma -g 2.2 | pfsout   (Reinhard 2002, as hdrpostd's
                    reinhard; the issue's reference peer)
  luminance-hdr-cli --tmo reinhard02 (Qt offscreen)
  oiiotool          --powc 1/2.2, 8 bits (no tone curve: the plain conversion a pipeline script does)
A tool that is not installed is reported as such, not timed. Prints a markdown table: seconds per frame
(median of --repeat runs), frames per second with --procs processes at once, and what each wrote (size,
bit depth from the PNG header); --json PATH also writes the same results as JSON, for the benchmark to
combine. The tools are taken from PATH (and their libraries from LD_LIBRARY_PATH), so a private prefix is
used by entering it first: on the GPU host, which has none of them, `source .peerdeps/enter.sh` (which
enters .devdeps too; bench/peers/prepare_peers.sh, run once on a machine with apt, carries them as Debian
12 packages, and check_peers.sh checks them here); on a machine with apt they are one `apt-get install`
away."""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

TOOLS = {
    "pfstools (reinhard02)": (["pfsin", "pfstmo_reinhard02", "pfsgamma", "pfsout"],
                              "pfsin {inp} | pfstmo_reinhard02 | pfsgamma -g 2.2 | pfsout {out}"),
    "luminance-hdr-cli (reinhard02)": (["luminance-hdr-cli"],
                                       "luminance-hdr-cli -l {inp} --tmo reinhard02 -o {out} >/dev/null"),
    "oiiotool (gamma 1/2.2, 8-bit)": (["oiiotool"], "oiiotool {inp} --powc 0.454545 -d uint8 -o {out}"),
}


def png_header(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        head = f.read(33)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width, height, depth, colour = struct.unpack(">IIBB", head[16:26])
    return width, height, depth, {2: "RGB", 6: "RGBA", 0: "grey", 4: "grey+alpha"}.get(colour, str(colour))


def run_once(cmd, inp, out):
    if os.path.exists(out):
        os.remove(out)  # so that a run that writes nothing is not read as one that did
    t0 = time.monotonic()
    done = subprocess.run(PIPEFAIL + cmd.format(inp=inp, out=out), shell=True, executable=SHELL, env=ENV,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = done.stderr.decode(errors="replace").strip().splitlines()
    return time.monotonic() - t0, done.returncode, err[-1] if err else ""


def throughput(cmd, inp, tmp, procs, frames_each):
    """procs shells, each converting the frame frames_each times back to back: frames per second."""
    script = PIPEFAIL + " && ".join(cmd.format(inp=inp, out=os.path.join(tmp, f"p{{p}}_{i}.png"))
                                    for i in range(frames_each))
    t0 = time.monotonic()
    running = [subprocess.Popen(script.replace("{p}", str(p)), shell=True, executable=SHELL, env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in range(procs)]
    ok = all(p.wait() == 0 for p in running)
    return procs * frames_each / (time.monotonic() - t0) if ok else None


ENV = dict(os.environ, QT_QPA_PLATFORM="offscreen")
# A pipeline's status is its last command's: with pipefail (bash; dash has none) a pfsin that fails
# fails the run instead of leaving pfsout to write nothing and exit 0.
SHELL = shutil.which("bash") or "/bin/sh"
PIPEFAIL = "set -o pipefail; " if SHELL.endswith("bash") else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("frame")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None, help="also write the results as JSON to this path")
    a = ap.parse_args()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    size = os.path.getsize(a.frame)
    report = {"frame": a.frame, "frame_bytes": size, "cores": os.cpu_count(), "repeat": a.repeat,
              "procs": a.procs, "date": time.strftime("%Y-%m-%d"), "tools": []}
    print(f"# CPU peers: {a.frame} ({size / 1e6:.1f} MB), {os.cpu_count()} cores, {a.repeat} runs, "
          f"{a.procs} processes for throughput, {time.strftime('%Y-%m-%d')}\n")
    print("| tool | s per frame (median) | frames/s, one process per core | output |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="hdrpost-peers-") as tmp:
        for name, (needs, cmd) in TOOLS.items():
            entry = {"tool": name, "command": cmd, "paths": {n: shutil.which(n) for n in needs}}
            report["tools"].append(entry)
            missing = [n for n in needs if not shutil.which(n)]
            if missing:
                entry.update(status="not installed", missing=missing)
                print(f"| {name} | not installed ({', '.join(missing)}) | | |", flush=True)
                continue
            out = os.path.join(a.out or tmp, name.split()[0] + ".png")
            times, failed = [], None
            for _ in range(a.repeat):
                t, rc, err = run_once(cmd, a.frame, out)
                if rc:
                    failed = rc
                    break
                times.append(t)
            if failed is None and png_header(out) is None:
                failed, err = 0, "no PNG written"
            if failed is not None:
                entry.update(status="failed", exit=failed, stderr=err)
                print(f"| {name} | failed (exit {failed}{': ' + err if err else ''}) | | |", flush=True)
                continue
            hdr = png_header(out)
            what = f"{hdr[0]}x{hdr[1]} {hdr[2]}-bit {hdr[3]}, {os.path.getsize(out) / 1e6:.1f} MB" if hdr else "?"
            fps = throughput(cmd, a.frame, tmp, a.procs, 1)
            entry.update(status="ok", seconds=times, seconds_median=statistics.median(times), fps=fps,
                         output={"width": hdr[0], "height": hdr[1], "bits": hdr[2], "channels": hdr[3],
                                 "bytes": os.path.getsize(out)} if hdr else None)
            print(f"| {name} | {statistics.median(times):.2f} | {fps:.2f} | {what} |" if fps else
                  f"| {name} | {statistics.median(times):.2f} | failed | {what} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
