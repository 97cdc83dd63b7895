#!/usr/bin/env python3
"""hdrpost with several servers (issue 37, item 4 and item 5's last bullet; client/servers.h) against real daemons
on 127.0.0.1 (lavapipe in CI, the validation layer on).

Usage: test_servers.py PATH/TO/hdrpost PATH/TO/hdrpostd PATH/TO/make_frame. Prints TAP. Four daemons (a token
each, no warm-up frame, a GPU delay per frame that paces the runs: gpu_delay()), started together:
  - a shot of 24 frames (test_client.py's: a dim gradient a light moves into) over three servers: every frame
    once, byte-identical to one daemon's render, the same exposure.json, the frames spread and the summary's
    servers (--json, the log's lines, --timings' server column) agreeing;
  - a server nobody listens on in the list: named at the start, the run done on the others;
  - --servers FILE (comments, blank lines) the same as --server; every bad list refused (exit 2) naming why;
  - status of two servers (an array), one unreachable (exit 3, still both);
  - a pan across the park photograph (tests/data/pmndrs_park.pfm, 96x48 windows): one daemon killed (SIGKILL) and
    one drained (SIGTERM) while its frames are rendered: every frame rendered, whole and byte-identical, none by a
    server after it was gone, the killed one's attempts counted;
  - both servers of a run killed mid-run: exit 3, bounded, the frames never tried counted.
The group fake_servers checks the retry policy (client/servers.h) against scripted fake servers instead (Python's
http.server in threads of this process, no daemon, no GPU): every GPU lost (exit 5, bounded), one GPU lost (the
other renders everything), a relayed device_lost (Retry-After: a failure retried, never a wait), a 500 for one frame
(the request backs off, not the server), a busy server (its frames elsewhere at once) and a server that dies mid-run.
HDRPOST_TEST_QUICK=1 runs that group alone (harness.groups).
Standard library only; loopback only; every wait is bounded and scaled (harness.scaled).
"""

import base64
import http.server
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HDRPOST = sys.argv[1] if len(sys.argv) > 1 else "hdrpost"
EXE = sys.argv[2] if len(sys.argv) > 2 else "hdrpostd"
MAKE_FRAME = sys.argv[3] if len(sys.argv) > 3 else "make_frame"
HOST = "127.0.0.1"
TOKEN = "servers-test-token"
W, H, FRAMES, FIRST = 64, 32, 24, 1001
PAN_W, PAN_H, PAN_FRAMES = 96, 48, 16
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
DELAY_MS = 200  # every daemon's GPU thread sleeps this long per frame (gpu_delay): the runs' pace

from harness import free_port, png_decode, point, scaled  # noqa: E402
import harness  # noqa: E402
# test_client.py's shot (a dim gradient a light moves into), made the same way: its arguments are this file's.
from test_client import make_shot  # noqa: E402


def gpu_delay(ms):
    """--test_gpu_delay_ms (as test_client.py's): the runs' pace and the test's waits stretched alike by
    HDRPOST_TEST_TIME_FACTOR, so that a signal comes at the same point of a run in a slower build."""
    return f"--test_gpu_delay_ms={int(ms * harness.TIME_FACTOR)}"


def url(d_or_port):
    port = d_or_port if isinstance(d_or_port, int) else d_or_port.port
    return f"http://{HOST}:{port}"


def start_all(labels):
    """Daemons started together (their start-ups overlap), each then a point that it became ready; None for one
    that did not."""
    ds = [harness.Daemon(EXE, label, [f"--auth_token={TOKEN}", "--warm_frame=none", gpu_delay(DELAY_MS)],
                         ready_timeout=180) for label in labels]
    out = []
    for d in ds:
        if point(f"{d.label}: the daemon becomes ready (/readyz 200)", d.wait_ready(), d.log()):
            out.append(d)
        else:
            d.kill()
            d.dump()
            out.append(None)
    return out


# --- Frames -----------------------------------------------------------------------------------------------


def write_pfm(path, w, h, rows):
    """rows: top to bottom, each w*3 floats."""
    with open(path, "wb") as out:  # PFM rows bottom to top
        out.write(b"PF\n%d %d\n-1.0\n" % (w, h))
        for row in reversed(rows):
            out.write(struct.pack(f"<{len(row)}f", *row))


def to_exr(pfm, exr):
    subprocess.run([MAKE_FRAME, pfm, exr, "1", "zip"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)


def make_pan(tmp):
    """A camera pan across the park photograph (tests/data/pmndrs_park.pfm, 512x256, its real texture and its
    sun): PAN_FRAMES windows of PAN_W x PAN_H moving right and down, pan/park.NNNN.exr; the pattern."""
    with open(os.path.join(DATA, "pmndrs_park.pfm"), "rb") as f:
        data = f.read()
    parts = data.split(b"\n", 3)
    sw, sh = (int(v) for v in parts[1].split())
    little = float(parts[2]) < 0
    pixels = parts[3]
    fmt = ("<" if little else ">") + f"{sw * 3}f"
    rows = [struct.unpack_from(fmt, pixels, y * sw * 12) for y in range(sh)][::-1]  # top to bottom
    pan = os.path.join(tmp, "pan")
    os.makedirs(pan)
    for f in range(PAN_FRAMES):
        x0, y0 = 20 + f * 24, 60 + f * 4
        crop = [list(rows[y][x0 * 3:(x0 + PAN_W) * 3]) for y in range(y0, y0 + PAN_H)]
        pfm = os.path.join(tmp, f"pan{f}.pfm")
        write_pfm(pfm, PAN_W, PAN_H, crop)
        to_exr(pfm, os.path.join(pan, f"park.{FIRST + f:04d}.exr"))
    return os.path.join(pan, "park.####.exr")


# --- hdrpost ----------------------------------------------------------------------------------------------


def env():
    e = dict(os.environ)
    e.pop("HDRPOST_SERVER", None)
    e.pop("HDRPOST_TOKEN", None)
    return e


def hdrpost(*args, servers=None, timeout=180):
    """(exit code, stdout, stderr) of one hdrpost run; servers: a list of daemons or ports (--server a,b,...),
    or None when args name them."""
    argv = [HDRPOST, *args, "--token", TOKEN]
    if servers is not None:
        argv += ["--server", ",".join(url(s) for s in servers)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(timeout), env=env())
    return done.returncode, done.stdout, done.stderr


def spawn(label, *args, servers):
    """hdrpost in the background, its stderr lines collected as they come (harness.Child)."""
    return harness.Child(label, [HDRPOST, *args, "--token", TOKEN, "--server", ",".join(url(s) for s in servers)])


def summary_of(out):
    try:
        return json.loads(out) if out.strip().startswith("{") else {}
    except ValueError:
        return {}


def outputs(out_dir, ext=".png"):
    """{name: bytes} of the images in out_dir."""
    if not os.path.isdir(out_dir):
        return {}
    got = {}
    for n in sorted(os.listdir(out_dir)):
        if n.endswith(ext):
            with open(os.path.join(out_dir, n), "rb") as f:
                got[n] = f.read()
    return got


def differing(a, b):
    """The names where two renders differ (missing on one side, or other bytes)."""
    return sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))


def rendered_by(err):
    """[(frame name, URL)] of the log's "hdrpost: NAME rendered by URL (N ms)" lines, in order."""
    return re.findall(r"^hdrpost: (\S+) rendered by (\S+) \(\d+ ms\)$", err, re.M)


def server_lines(err):
    """{URL: (rendered, attempts failed, busy answers, state, last error or None)} of the summary's lines."""
    got = {}
    for m in re.finditer(r"^  (\S+): (\d+) rendered, (\d+) attempts failed, (\d+) busy answers, (in use|left|gone)"
                         r"(?:; last: (.*))?$", err, re.M):
        got[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5), m.group(6))
    return got


def servers_by_url(summary):
    return {s.get("url"): s for s in summary.get("servers", []) if isinstance(s, dict)}


def exposure_frames(out_dir):
    """exposure.json's per-frame values (every key but a server's, should it name one) and its mode."""
    path = os.path.join(out_dir, "exposure.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        doc = json.load(f)
    return doc.get("mode"), [{k: v for k, v in fr.items() if k not in ("server", "url")} for fr in doc["frames"]]


def names(pattern, first, count, ext=".png"):
    base = os.path.basename(pattern)
    return [base.replace("####", f"{first + f:04d}").replace(".exr", ext) for f in range(count)]


# --- The points -------------------------------------------------------------------------------------------


def spread_shot(ds, tmp, pattern):
    """Item 4: a shot over three servers against the same shot on one: the same bytes and exposure, every frame
    once, each server some, the summary, the log and --timings agreeing on which rendered what."""
    a, b, c = ds[:3]
    rng = f"{FIRST}-{FIRST + FRAMES - 1}"
    one, three = os.path.join(tmp, "one"), os.path.join(tmp, "three")
    t0 = time.monotonic()
    rc1, out1, err1 = hdrpost("render", pattern, "--frames", rng, "-o", one, "--format", "png", "--jobs", "6",
                              "--json", servers=[a])
    t1 = time.monotonic()
    csv_path = os.path.join(tmp, "three-timings.csv")
    rc3, out3, err3 = hdrpost("render", pattern, "--frames", rng, "-o", three, "--format", "png", "--jobs", "6",
                              "--json", "--timings", csv_path, servers=[a, b, c])
    t3 = time.monotonic()
    print(f"# the shot on one server: {t1 - t0:.1f} s, on three: {t3 - t1:.1f} s", flush=True)
    single, spread = outputs(one), outputs(three)
    want = names(pattern, FIRST, FRAMES)
    point("the shot on one server (--server a): exit 0, every frame written",
          rc1 == 0 and sorted(single) == sorted(want), f"exit {rc1}\n{err1[-2000:]}")
    s3 = summary_of(out3)
    point("the shot on three servers (--server a,b,c --jobs 6 --json): exit 0, 24 rendered, none failed, skipped "
          "or not tried", rc3 == 0 and s3.get("rendered") == FRAMES and s3.get("failed") == []
          and s3.get("skipped") == 0 and s3.get("not_tried") == 0, f"exit {rc3}\n{out3[-1500:]}\n{err3[-2000:]}")
    bad = differing(single, spread)
    point("every output of the three servers is byte for byte the one server's", single and not bad,
          f"differ: {bad}")
    e1, e3 = exposure_frames(one), exposure_frames(three)
    point("exposure.json the same on one and on three servers (mode shot; each frame's adaptation, key and white "
          "point): the shot measured as one, whichever server analysed a frame",
          e1 is not None and e1 == e3 and e1[0] == "shot" and len(e1[1]) == FRAMES, f"{e1}\n{e3}")
    by_url = servers_by_url(s3)
    urls = [url(d) for d in (a, b, c)]
    counts = {u: by_url.get(u, {}).get("rendered") for u in urls}
    point(f"--json \"servers\": the three in the list's order, each in use, rendered counts {list(counts.values())} "
          f"summing to 24, each at least 1",
          [s.get("url") for s in s3.get("servers", [])] == urls and all(isinstance(n, int) and n >= 1
                                                                         for n in counts.values())
          and sum(n or 0 for n in counts.values()) == FRAMES
          and all(by_url[u].get("state") == "in use" for u in urls), json.dumps(s3.get("servers"), indent=1))
    lists = [by_url.get(u, {}).get("frames", []) for u in urls]
    flat = [n for fl in lists for n in fl]
    shot_names = [n[:-4] for n in want]
    point("--json: the servers' \"frames\" lists are the shot without a duplicate, each as long as its count",
          sorted(flat) == sorted(shot_names) and len(flat) == len(set(flat))
          and all(len(fl) == counts[u] for fl, u in zip(lists, urls)), f"{lists}")
    logged = rendered_by(err3)
    from_log = {u: sorted(n for n, v in logged if v == u) for u in urls}
    point("the log's \"hdrpost: NAME rendered by URL (N ms)\" lines: one per frame, each naming the server the "
          "--json summary gives it", len(logged) == FRAMES and all(from_log[u] == sorted(fl) for u, fl in
                                                                   zip(urls, lists)),
          f"{from_log}\n{lists}\n{err3[-2000:]}")
    analysed = re.findall(r"^hdrpost: (\S+) analysed by (\S+) \(\d+ ms\)$", err3, re.M)
    point("the measuring pass spread too: a line \"NAME analysed by URL\" per frame, on more than one server",
          len(analysed) == FRAMES and len({v for _, v in analysed}) > 1, err3[-2000:])
    lines = server_lines(err3)
    point("the summary's line per server (\"  URL: N rendered, N attempts failed, N busy answers, in use\") "
          "agrees with --json", re.search(r"^hdrpost render: 24 rendered, 0 skipped, 0 failed, 0 not tried of 24 "
                                          r"frames", err3, re.M) is not None
          and list(lines) == urls and all(lines[u][:4] == (by_url[u].get("rendered"), by_url[u].get("failed_attempts"),
                                                          by_url[u].get("busy_answers"), by_url[u].get("state"))
                                          for u in urls), err3[-1500:])
    rows = open(csv_path).read().splitlines() if os.path.exists(csv_path) else []
    header = rows[0].split(",") if rows else []
    from_csv = {}
    for r in rows[1:]:
        f = r.split(",")
        if len(f) >= 3:
            from_csv.setdefault(f[2], []).append(f[0])
    point("--timings: columns frame, status, server, ...; a row per frame, its server the one the summary names",
          header[:3] == ["frame", "status", "server"] and len(rows) == FRAMES + 1
          and all(sorted(from_csv.get(u, [])) == sorted(fl) for u, fl in zip(urls, lists)),
          "\n".join(rows[:4]) + f"\n{from_csv}")
    return single


def subset_reference(ds, tmp, pattern):
    """The first 8 frames on one server (c): the reference of the runs with a server missing and from a file."""
    out = os.path.join(tmp, "eight-one")
    rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 7}", "-o", out, "--format", "png",
                         servers=[ds[2]])
    got = outputs(out)
    point("8 frames on one server (--server c): exit 0, each written", rc == 0 and len(got) == 8, err[-1500:])
    return got


def unreachable_one(ds, tmp, pattern, reference):
    """A server nobody listens on, in the middle of the list: named at the start, the run done on the others."""
    a, b = ds[:2]
    dead = free_port()
    out = os.path.join(tmp, "with-dead")
    rc, stdout, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 7}", "-o", out, "--format", "png",
                              "--jobs", "4", "--json", servers=[a, dead, b])
    s = summary_of(stdout)
    by_url = servers_by_url(s)
    named = re.search(rf"^hdrpost render: .*{re.escape(url(dead))}.*; its frames go to the other servers until it "
                      r"answers$", err, re.M)
    point("a server nobody listens on in --server a,DEAD,b: exit 0, every frame rendered, the outputs byte for byte "
          "one server's", rc == 0 and s.get("rendered") == 8 and not differing(reference, outputs(out)),
          f"exit {rc}\n{err[-2000:]}")
    others = re.search(rf"{re.escape(url(a))}.*its frames go to|{re.escape(url(b))}.*its frames go to", err)
    point("stderr names the unreachable server, after a ready one in the list, at the start: \"hdrpost render: "
          "<why>; its frames go to the other servers until it answers\" (and names no other)",
          named is not None and not others, "the start of stderr:\n" + "\n".join(err.splitlines()[:6]))
    dead_entry = by_url.get(url(dead), {})
    point("--json: the unreachable server listed with 0 rendered and no frames, the other two all 8",
          dead_entry.get("rendered") == 0 and dead_entry.get("frames") == []
          and by_url.get(url(a), {}).get("rendered", 0) + by_url.get(url(b), {}).get("rendered", 0) == 8,
          json.dumps(s.get("servers"), indent=1))
    # The same server first in the list, before any ready one.
    rc2, _, err2 = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 1}", "-o", os.path.join(tmp, "dead-first"),
                           "--format", "png", "--exposure", "frame", servers=[dead, a])
    point("the unreachable server first in the list (--server DEAD,a): exit 0, and it is named the same way",
          rc2 == 0 and re.search(rf"^hdrpost render: .*{re.escape(url(dead))}.*; its frames go to the other servers "
                                 r"until it answers$", err2, re.M) is not None, f"exit {rc2}\n{err2[-1500:]}")
    moved = re.findall(rf"^hdrpost: \S+: {re.escape(url(dead))}: no answer \([^)]*\), retry \d+ on (\S+) (now|in "
                       r"[0-9.]+ s)$", err, re.M)
    tried = dead_entry.get("failed_attempts", 0)
    point(f"each frame tried on the unreachable server ({tried} attempt(s) failed, counted in --json and on its "
          f"summary line) went on to another at once (\"retry N on URL now\")",
          len(moved) == tried and all(to in (url(a), url(b)) and when == "now" for to, when in moved)
          and server_lines(err).get(url(dead), (None, -1))[:2] == (0, tried), f"{moved}\n{err[-2000:]}")


def servers_file(ds, tmp, pattern, reference):
    """--servers FILE the same as --server; each bad list refused before a frame (exit 2), naming what is wrong."""
    a, b, c = ds[:3]
    path = os.path.join(tmp, "farm.txt")
    with open(path, "w") as f:
        f.write(f"# the render farm\n\n{url(a)}\n   {url(b)}/   # the second, a trailing slash\n\n"
                f"\t{url(c)}\n# the end\n")
    out = os.path.join(tmp, "from-file")
    rc, stdout, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 7}", "-o", out, "--format", "png",
                              "--jobs", "6", "--json", "--servers", path)
    s = summary_of(stdout)
    point("--servers FILE (comments, blank lines, indentation, a trailing slash): exit 0, the three servers in its "
          "order, every frame rendered once, byte for byte one server's",
          rc == 0 and [v.get("url") for v in s.get("servers", [])] == [url(a), url(b), url(c)]
          and s.get("rendered") == 8 and sum(v.get("rendered", 0) for v in s.get("servers", [])) == 8
          and len(rendered_by(err)) == 8 and not differing(reference, outputs(out)),
          f"exit {rc}\n{stdout[-1500:]}\n{err[-1500:]}")

    def refused(label, args, *want):
        out_dir = os.path.join(tmp, "refused-" + re.sub(r"\W", "", label))
        rc, _, err = hdrpost("render", pattern, "--frames", f"{FIRST}-{FIRST + 1}", "-o", out_dir, *args)
        point(f"{label}: exit 2 before a frame, saying {' / '.join(want)}",
              rc == 2 and all(w in err for w in want) and not os.path.exists(out_dir)
              and len(err.strip().splitlines()) <= 2, f"exit {rc}\n{err}")

    refused("--server a,,b (an empty one)", ["--server", f"{url(a)},,{url(b)}"], "--server:", "an empty server")
    refused("--server a, (a trailing comma)", ["--server", f"{url(a)},"], "--server:", "an empty server")
    refused("--server ftp://x (not http)", ["--server", f"{url(a)},ftp://x"], "ftp://x",
            "not an http:// or https:// URL")
    refused("--server a,b,a (the same URL twice)", ["--server", f"{url(a)},{url(b)},{url(a)}"], url(a),
            "given twice")
    refused("--server a,a/ (the same URL twice, once with a slash)", ["--server", f"{url(a)},{url(a)}/"],
            "given twice")
    missing = os.path.join(tmp, "no-such-list.txt")
    refused("--servers of a missing file", ["--servers", missing], "--servers:", missing,
            "No such file or directory")
    empty = os.path.join(tmp, "empty-list.txt")
    with open(empty, "w") as f:
        f.write("# nothing here yet\n\n   \n")
    refused("--servers of a file of comments and blank lines", ["--servers", empty], "--servers:", empty,
            "no server in it")
    twice = os.path.join(tmp, "twice.txt")
    with open(twice, "w") as f:
        f.write(f"{url(a)}\n# again:\n{url(a)}\n")
    refused("--servers of a file naming a server twice", ["--servers", twice], f"{twice} line 3", "given twice")
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write(f"{url(a)}\nftp://x\n")
    refused("--servers of a file with an ftp:// line", ["--servers", bad], f"{bad} line 2", "ftp://x",
            "not an http:// or https:// URL")
    refused("--server with --servers", ["--server", url(a), "--servers", path], "--server and --servers together")


def status_of_two(ds, tmp, pattern):
    """hdrpost status of several servers: a JSON array, one object per server in the list's order."""
    a, b = ds[:2]
    rc, out, err = hdrpost("status", "--json", servers=[a, b])
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    point("status --server a,b --json: exit 0, an array of two objects, their \"server\" a's and b's, each ready",
          rc == 0 and isinstance(doc, list) and [o.get("server") for o in doc] == [url(a), url(b)]
          and all(o.get("ready") is True and o.get("exit_status") == 0 for o in doc), f"exit {rc}\n{out}\n{err}")
    dead = free_port()
    rc, out, err = hdrpost("status", "--json", servers=[a, dead])
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    point("status --server a,DEAD --json: exit 3, the array still has both, the unreachable one ready false and "
          "exit_status 3, named on stderr", rc == 3 and isinstance(doc, list)
          and [o.get("server") for o in doc] == [url(a), url(dead)] and doc[0].get("exit_status") == 0
          and doc[1].get("ready") is False and doc[1].get("exit_status") == 3 and url(dead) in err
          and "unreachable" in err, f"exit {rc}\n{out}\n{err}")
    rc, out, err = hdrpost("status", servers=[a, b])
    point("status --server a,b: a screen per server, each naming its server, exit 0",
          rc == 0 and f"server   {url(a)}\n" in out and f"server   {url(b)}\n" in out
          and out.count("ready    yes") == 2,
          f"exit {rc}\n{out}\n{err}")


def kill_and_drain(ds, tmp, pan):
    """Item 5's last bullet: one daemon killed and one drained while the pan's frames are rendered on three."""
    a, b, c, d = ds
    rng = f"{FIRST}-{FIRST + PAN_FRAMES - 1}"
    one = os.path.join(tmp, "pan-one")
    rc, _, err = hdrpost("render", pan, "--frames", rng, "-o", one, "--format", "png", "--jobs", "6", servers=[d])
    reference = outputs(one)
    point(f"the pan of the park photograph ({PAN_FRAMES} frames of {PAN_W}x{PAN_H}) on one server (--server d): "
          "exit 0, each written", rc == 0 and len(reference) == PAN_FRAMES, err[-1500:])
    out = os.path.join(tmp, "pan-three")
    run = spawn("hdrpost over a, b, c", "render", pan, "--frames", rng, "-o", out, "--format", "png", "--jobs", "6",
                "--json", servers=[a, b, c])
    try:
        # The frames' rendering begun (after the measuring pass): the first "rendered by" line.
        first = run.wait_line(r" rendered by ", 120)
        b.kill()  # SIGKILL: connections refused from now on
        c.proc.send_signal(signal.SIGTERM)  # drained: its frames in flight finish, then it exits
        killed_at = len(run.lines)
        time.sleep(scaled(0.5))  # an answer b had sent whole before it died may still be logged
        b_after = len(run.lines)
        drained_rc = c.wait_exit(60)
        time.sleep(scaled(0.5))
        c_after = len(run.lines)
        rc = run.wait_exit(180)
    finally:
        run.kill()
    err = run.log()
    lines = run.lines
    s = summary_of("\n".join(run.stdout))
    got = outputs(out)
    point("SIGKILL to b and SIGTERM to c once frames were being rendered (" + str(first) + "): exit 0, all "
          f"{PAN_FRAMES} rendered, none failed", first is not None and rc == 0 and s.get("rendered") == PAN_FRAMES
          and s.get("failed") == [] and len(got) == PAN_FRAMES, f"exit {rc}\n{err[-3000:]}")
    whole = []
    for n, data in got.items():
        try:
            w, h, *_ = png_decode(data)
            whole.append(n if (w, h) == (PAN_W, PAN_H) else None)
        except harness.PngError:
            pass
    partial = [n for n in (os.listdir(out) if os.path.isdir(out) else []) if ".part" in n]
    point("every output decodes whole as a PNG of the frame's size, and no partial file is left",
          len([n for n in whole if n]) == PAN_FRAMES and not partial, f"{len(whole)} whole, partial {partial}")
    bad = differing(reference, got)
    point("every output byte for byte the one server's render", reference and not bad, f"differ: {bad}")
    point("the drained daemon (SIGTERM) exits 0 once its frames in flight are done", drained_rc == 0,
          c.log()[-1500:])
    by_b_late = [l for l in lines[b_after:] if re.search(rf" rendered by {re.escape(url(b))} ", l)]
    by_c_late = [l for l in lines[c_after:] if re.search(rf" rendered by {re.escape(url(c))} ", l)]
    by_a_late = [l for l in lines[killed_at:] if re.search(rf" rendered by {re.escape(url(a))} ", l)]
    point("no frame rendered by b after it was killed, nor by c after it exited; a, the survivor, rendered frames "
          f"after the kill ({len(by_a_late)})", not by_b_late and not by_c_late and by_a_late,
          "\n".join(by_b_late + by_c_late) + f"\n{err[-2500:]}")
    logged = rendered_by(err)
    point("the log's \"rendered by\" lines: each frame once, every frame of the pan",
          sorted(n for n, _ in logged) == sorted(n[:-4] for n in reference) and len(logged) == PAN_FRAMES,
          f"{logged}")
    by_url = servers_by_url(s)
    sb = by_url.get(url(b), {})
    moved = re.findall(rf"^hdrpost: \S+: {re.escape(url(b))}: no answer \([^)]*\), retry \d+ on (\S+) (?:now|in "
                       r"[0-9.]+ s)$", err, re.M)
    # Its state at the end is "left": its last attempt failed (servers.h), never "gone" (that is a lost GPU's).
    point(f"the killed server's attempts counted ({sb.get('failed_attempts')} failed, --json and its summary line "
          f"alike), its last error said, its state \"left\" ({sb.get('state')!r}) and each of "
          f"its frames in flight sent on to another server ({len(moved)})",
          sb.get("failed_attempts", 0) >= 1 and sb.get("last_error") and sb.get("state") == "left"
          and moved and all(to != url(b) for to in moved)
          and server_lines(err).get(url(b), (None,))[1:4] == (sb.get("failed_attempts"), sb.get("busy_answers"),
                                                              sb.get("state")),
          json.dumps(sb) + f"\n{moved}\n{err[-2500:]}")
    frames = {u: set(by_url.get(u, {}).get("frames", [])) for u in (url(a), url(b), url(c))}
    point("--json: the three servers' frames together are the pan, none twice, matching the log",
          sum(len(v) for v in frames.values()) == PAN_FRAMES
          and set().union(*frames.values()) == {n[:-4] for n in reference}
          and all(frames[u] == {n for n, v in logged if v == u} for u in frames), f"{frames}")
    point("the drained daemon's log has no validation-layer message", not harness.validation_lines(c),
          "\n".join(harness.validation_lines(c)))


def all_gone(ds, tmp, pattern):
    """Every server of a run killed mid-run: the run stops with exit 3 once a frame has had its retries, the
    frames never tried counted."""
    a, d = ds[0], ds[3]
    run = spawn("hdrpost over a, d", "render", pattern, "--frames", f"{FIRST}-{FIRST + FRAMES - 1}", "-o",
                os.path.join(tmp, "all-gone"), "--format", "png", "--exposure", "frame", "--jobs", "2",
                "--retries", "1", "--json", servers=[a, d])
    try:
        first = run.wait_line(r" rendered by ", 120)
        a.kill()
        d.kill()
        t0 = time.monotonic()
        rc = run.wait_exit(120)
        took = time.monotonic() - t0
    finally:
        run.kill()
    err = run.log()
    s = summary_of("\n".join(run.stdout))
    # --retries 1 with two servers: a frame fails after 3 attempts (one more per further server), the servers'
    # back-offs (0.5, 1 s, ... doubling once a round) the only waits.
    stop = re.search(r"^hdrpost render: stopped: every server unreachable after \d+ attempt\(s\)", err, re.M)
    point(f"both servers of a run killed once frames were rendered ({first}): exit 3, the stop saying no server "
          f"answered, in {took:.1f} s (at most {scaled(20):.0f})", first is not None and rc == 3 and stop is not None
          and took < scaled(20), f"exit {rc}\n{err[-2500:]}")
    left = s.get("not_tried", -1)
    line = re.search(rf"(\d+) rendered, 0 skipped, (\d+) failed, (\d+) not tried of {FRAMES} frames", err)
    point(f"the summary counts the {left} frame(s) never tried (--json and its line), every frame rendered, "
          "failed or not tried", left > 0 and s.get("rendered", 0) + len(s.get("failed", [])) + left == FRAMES
          and line is not None and int(line.group(3)) == left, f"{json.dumps(s)[:1500]}\n{err[-1500:]}")
    by_url = servers_by_url(s)
    point("--json: both servers with failed attempts and a last error",
          all(by_url.get(u, {}).get("failed_attempts", 0) >= 1 and by_url.get(u, {}).get("last_error")
              for u in (url(a), url(d))), json.dumps(s.get("servers"), indent=1))
    for x in (a, d):
        point(f"{x.label}: no validation-layer message in its log", not harness.validation_lines(x),
              "\n".join(harness.validation_lines(x)))


# --- Scripted fake servers ----------------------------------------------------------------------------------
# The retry policy (client/servers.h: hp_servers_send, kind_of) checked against fake servers whose every answer a
# test scripts: Python's http.server in threads of this process, on 127.0.0.1. hdrpost neither decodes a frame it
# posts (--exposure frame: no measuring pass) nor the image it gets back (written as it comes), so a frame is a
# few KB of its own bytes and an answer any bytes.
#
# The fakes' answer delays pace the runs; they are not stretched by HDRPOST_TEST_TIME_FACTOR, so that a point
# comparing a time with the policy's own (a back-off of 0.5 s or more, a Retry-After of 2 s) keeps its meaning.
# Every wait of the test (a run's time limit, a "bounded" run) is scaled.

# A few KB: libcurl sends such a body with the request's headers. A larger one (1 MB and more with libcurl 7.88)
# comes after Expect: 100-continue, which the fakes answer too (BaseHTTPRequestHandler.handle_expect_100).
FAKE_FRAME_BYTES = 3000


def error_body(code, message):
    """The daemon's error body."""
    return json.dumps({"error": {"code": code, "message": message, "field": None}}).encode()


def frame_of(body):
    """The frame number a fake frame's bytes begin with ("frame-1003 ..."), or None."""
    m = re.match(rb"frame-(\d+) ", body or b"")
    return int(m.group(1)) if m else None


OK_PNG = b"\x89PNG\r\n\x1a\n" + b"not decoded by hdrpost" * 8
LOST = (503, {}, error_body("device_lost", "the GPU was lost before this frame ran"))


def answer(status, headers=None, body=None, delay=0.0):
    """A script's answer: (status, headers, body, delay before it is sent)."""
    if body is None:
        body = OK_PNG if status == 200 else error_body("test", f"HTTP {status}")
    return status, dict(headers or {}), body, delay


class FakeLog:
    """Every request the fakes of a point got: dicts of server, method, path, n (the server's POST count), frame,
    t_in (its body read), t_out (its answer sent, or it dropped), status (None: no answer), auth (its Authorization
    header, or None)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, **entry):
        with self.lock:
            self.items.append(entry)

    def posts(self, server=None):
        with self.lock:
            return [e for e in self.items if e["method"] == "POST" and (server is None or e["server"] == server)]


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a connection the test dropped on purpose (FakeServer.kill)


class FakeServer:
    """A scripted HTTP server: /readyz 200, /v1/gpu a queue of 4, POST /v1/render answered by
    script(name, n, body) -> answer(...), n counting the server's POSTs from 1; a status of None there kills the
    server (FakeServer.kill) with that request unanswered. POST /v1/analyze: 404, or with analysis (a dict) that
    as JSON, 200, outside the script and its count (the measuring pass of a shot's exposure lock). HTTP/1.1 kept
    alive, Content-Length on every answer, Expect: 100-continue answered
    (BaseHTTPRequestHandler.handle_expect_100)."""

    def __init__(self, name, script, log, analysis=None):
        self.name, self.script, self.log, self.analysis = name, script, log, analysis
        self.lock = threading.Lock()
        self.posts = 0
        self.dead = False
        self.conns = set()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = scaled(60)  # an idle kept-alive connection's

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with fake.lock:
                    fake.conns.add(self.connection)

            def finish(self):
                with fake.lock:
                    fake.conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _body(self):
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        chunk = self.rfile.read(size + 2)[:size]
                        if not size:
                            break
                        data += chunk
                    return data
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status, headers, body, ctype=None):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, str(v))
                self.send_header("Content-Type", ctype or ("image/png" if status == 200 else "application/json"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def _drop(self):
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def do_GET(self):
                t_in = time.monotonic()
                if fake.dead:
                    return self._drop()
                if self.path == "/readyz":
                    status, body = 200, b'{"status":"ready"}'
                elif self.path == "/v1/gpu":
                    status, body = 200, json.dumps({"queue": {"capacity": 4}}).encode()
                else:
                    status, body = 404, error_body("not_found", "no such route on a fake")
                self._send(status, {}, body, "application/json")
                fake.log.add(server=fake.name, method="GET", path=self.path, n=None, frame=None, t_in=t_in,
                             t_out=time.monotonic(), status=status, auth=self.headers.get("Authorization"))

            def do_POST(self):
                body = self._body()
                t_in = time.monotonic()
                auth = self.headers.get("Authorization")
                if self.path.startswith("/v1/analyze") and fake.analysis is not None and not fake.dead:
                    self._send(200, {}, json.dumps(fake.analysis).encode(), "application/json")
                    return fake.log.add(server=fake.name, method="POST", path=self.path, n=None, frame=frame_of(body),
                                        t_in=t_in, t_out=time.monotonic(), status=200, auth=auth)
                with fake.lock:
                    fake.posts += 1
                    n = fake.posts
                if not self.path.startswith("/v1/render"):
                    status, headers, out, delay = 404, {}, error_body("not_found", "a fake renders only"), 0
                else:
                    status, headers, out, delay = fake.script(fake.name, n, body)
                if delay:
                    time.sleep(delay)
                if status is None:
                    fake.kill()
                if status is None or fake.dead:
                    fake.log.add(server=fake.name, method="POST", path=self.path, n=n, frame=frame_of(body),
                                 t_in=t_in, t_out=time.monotonic(), status=None, auth=auth)
                    return self._drop()
                self._send(status, headers, out)
                fake.log.add(server=fake.name, method="POST", path=self.path, n=n, frame=frame_of(body), t_in=t_in,
                             t_out=time.monotonic(), status=status, auth=auth)

        self.httpd = _QuietServer((HOST, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def kill(self):
        """As a killed daemon: the listener closed (connections refused), every connection dropped."""
        with self.lock:
            if self.dead:
                return
            self.dead = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def fake_shot(tmp, count):
    """count fake frames fake-shot/f.NNNN.exr of FAKE_FRAME_BYTES each, each beginning "frame-NNNN "; the pattern."""
    d = os.path.join(tmp, "fake-shot")
    os.makedirs(d, exist_ok=True)
    for f in range(FIRST, FIRST + count):
        path = os.path.join(d, f"f.{f:04d}.exr")
        if not os.path.exists(path):
            head = b"frame-%d " % f
            with open(path, "wb") as out:
                out.write(head + bytes((f * 7 + k) % 251 for k in range(FAKE_FRAME_BYTES - len(head))))
    return os.path.join(d, "f.####.exr")


def fake_render(tmp, label, fakes, count, *args, timeout=60):
    """hdrpost render of count fake frames over the fakes (--exposure frame --format png --json): (exit code or
    None when it ran past timeout (scaled), stdout, stderr, seconds)."""
    pattern = fake_shot(tmp, count)
    argv = [HDRPOST, "render", pattern, "--frames", f"{FIRST}-{FIRST + count - 1}", "-o",
            os.path.join(tmp, "fake-" + label), "--format", "png", "--exposure", "frame", "--json", *args,
            "--token", TOKEN, "--server", ",".join(url(f.port) for f in fakes)]
    t0 = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(timeout), env=env())
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        text = [v.decode(errors="replace") if isinstance(v, bytes) else v or "" for v in (e.stdout, e.stderr)]
        rc, out, err = None, text[0], text[1] + f"\n(killed after {scaled(timeout):.0f} s)"
    return rc, out, err, time.monotonic() - t0


def retry_lines(err):
    """[(frame, from URL, to URL, "now" or "in N s")] of the log's retry lines with several servers."""
    return re.findall(r"^hdrpost: (\S+): (http://\S+): .*, retry \d+ on (\S+) (now|in [0-9.]+ s)$", err, re.M)


def fake_fields(s):
    """What a point's diagnostics show of a summary."""
    return json.dumps({k: s.get(k) for k in ("rendered", "failed", "not_tried", "retries", "servers")}, indent=1)


def fake_servers(tmp):
    """The retry policy over scripted fake servers: each point a run of hdrpost render against fakes."""
    fakes = []

    def start(name, script, log, analysis=None):
        f = FakeServer(name, script, log, analysis)
        fakes.append(f)
        return f

    try:
        fake_every_gpu_lost(tmp, start)
        fake_one_gpu_lost(tmp, start)
        fake_relayed_device_lost(tmp, start)
        fake_500_for_one_frame(tmp, start)
        fake_busy_server(tmp, start)
        fake_server_dies(tmp, start)
        fake_credentials_render(tmp, start)
        fake_credentials_status(tmp, start)
        credentials_in_refused_lists(tmp)
    finally:
        for f in fakes:
            f.kill()


def fake_every_gpu_lost(tmp, start):
    """Both servers answer device_lost (503, no Retry-After) after a frame or two: the run stops at once."""
    log = FakeLog()
    count = 12

    def script(name, n, body):
        return answer(200, delay=0.05) if n <= (1 if name == "a" else 2) else answer(*LOST, delay=0.05)

    a, b = start("a", script, log), start("b", script, log)
    rc, out, err, took = fake_render(tmp, "every-gpu-lost", [a, b], count, "--jobs", "4")
    s = summary_of(out)
    by_url = servers_by_url(s)
    point(f"fakes: every server's GPU lost (device_lost 503 without Retry-After after 1 and 2 frames): exit 5 in "
          f"{took:.1f} s (at most {scaled(5):.0f})", rc == 5 and took < scaled(5),
          f"exit {rc}\n{err[-2500:]}")
    point("fakes: every GPU lost: both servers \"gone\" in --json",
          [by_url.get(url(f.port), {}).get("state") for f in (a, b)] == ["gone", "gone"], fake_fields(s))
    failed = s.get("failed") if isinstance(s.get("failed"), list) else []
    rendered, not_tried = s.get("rendered"), s.get("not_tried")
    point(f"fakes: every GPU lost: rendered {rendered} + failed {len(failed)} + not tried {not_tried} = {count}, "
          "the rendered ones those the fakes answered 200",
          isinstance(rendered, int) and isinstance(not_tried, int) and rendered + len(failed) + not_tried == count
          and rendered == sum(1 for e in log.posts() if e["status"] == 200), fake_fields(s) + f"\n{err[-1500:]}")
    bad = [f for f in failed if not (f.get("error") or "").strip() or "0 attempt(s)" in f.get("error", "")
           or "device_lost" not in f.get("error", "")]
    point(f"fakes: every GPU lost: each of the {len(failed)} failure(s) names device_lost, none with an empty reason "
          "or \"0 attempt(s)\"", failed and not bad and re.search(r"^hdrpost render: stopped: .*device_lost", err,
                                                                  re.M), f"{json.dumps(bad, indent=1)}\n{err[-1500:]}")


def fake_one_gpu_lost(tmp, start):
    """A's GPU lost (device_lost on every frame), B renders: every frame B's, A never tried again."""
    log = FakeLog()
    count = 48  # 12 rounds of the 4 jobs on B, 1.2 s: longer than the 0.5 s a failed server would be left for

    def script(name, n, body):
        # A answers late enough that both frames the run's first four jobs give it are there before its answer.
        return answer(*LOST, delay=0.2) if name == "a" else answer(200, delay=0.1)

    a, b = start("a", script, log), start("b", script, log)
    rc, out, err, took = fake_render(tmp, "one-gpu-lost", [a, b], count, "--jobs", "4")
    s = summary_of(out)
    by_url = servers_by_url(s)
    sa, sb = by_url.get(url(a.port), {}), by_url.get(url(b.port), {})
    point(f"fakes: A's GPU lost, B fine (--jobs 4): exit 0, all {count} rendered, every one by B",
          rc == 0 and s.get("rendered") == count and s.get("failed") == [] and sb.get("rendered") == count
          and len(log.posts("b")) >= count, f"exit {rc}\n{fake_fields(s)}\n{err[-1500:]}")
    point("fakes: A \"gone\" with 0 rendered, its last error device_lost",
          sa.get("state") == "gone" and sa.get("rendered") == 0 and "device_lost" in (sa.get("last_error") or ""),
          json.dumps(sa))
    on_a = log.posts("a")
    first_lost = min((e["t_out"] for e in on_a), default=None)
    late = [e for e in on_a if first_lost is not None and e["t_in"] > first_lost]
    point(f"fakes: A tried {len(on_a)} time(s), at most the 2 frames sent to it before its first answer, none after "
          "it said device_lost", 1 <= len(on_a) <= 2 and not late, f"{on_a}\n{err[-1500:]}")


def fake_relayed_device_lost(tmp, start):
    """A device_lost with Retry-After (a replica behind a proxy): a failure retried against --retries, then exit 5;
    never a busy answer waited out (600 s)."""
    log = FakeLog()
    count, retries = 6, 2

    def script(name, n, body):
        return answer(LOST[0], {"Retry-After": 1}, LOST[2])

    a = start("a", script, log)
    rc, out, err, took = fake_render(tmp, "relayed-lost", [a], count, "--jobs", "2", "--retries", str(retries),
                                     timeout=90)
    s = summary_of(out)
    per_frame = {}
    for e in log.posts():
        per_frame[e["frame"]] = per_frame.get(e["frame"], 0) + 1
    point(f"fakes: device_lost 503 with Retry-After: 1 on every frame (--retries {retries}): exit 5 in {took:.1f} s "
          f"(at most {scaled(15):.0f}), no frame tried more than {retries + 1} times and one that many",
          rc == 5 and took < scaled(15) and per_frame and max(per_frame.values()) == retries + 1,
          f"exit {rc}\nattempts per frame {per_frame}\n{err[-2000:]}")
    w = s.get("retries") or {}
    sa = (s.get("servers") or [{}])[0]
    line = re.search(r"; (\d+) retries: (\d+) after no answer or a 5xx, (\d+) answers 429, (\d+) answers 503 "
                     r"waited out", err)
    point("fakes: relayed device_lost: the retries counted as failures (\"after no answer or a 5xx\", --json's "
          "no_answer_or_5xx, the server's failed_attempts), none as a 503 waited out or a busy answer",
          w.get("no_answer_or_5xx", 0) >= retries and w.get("busy_503") == 0 and w.get("busy_429") == 0
          and sa.get("busy_answers") == 0 and sa.get("failed_attempts", 0) >= retries + 1
          and line is not None and int(line.group(2)) >= retries and line.group(4) == "0",
          f"--json retries {w}, server {json.dumps(sa)}\nsummary line: {line.group(0) if line else None}")


def fake_500_for_one_frame(tmp, start):
    """A 500 internal_error for one frame: that request backs off, the server serves the others meanwhile."""
    log = FakeLog()
    count, retries, bad_frame = 24, 2, FIRST + 2

    def script(name, n, body):
        if frame_of(body) == bad_frame:
            return answer(500, {}, error_body("internal_error", "the test's frame fails"))
        return answer(200, delay=0.15)

    a = start("a", script, log)
    rc, out, err, took = fake_render(tmp, "500-one-frame", [a], count, "--jobs", "3", "--retries", str(retries))
    s = summary_of(out)
    posts = log.posts()
    bad = [e for e in posts if e["frame"] == bad_frame]
    served = [e for e in posts if e["frame"] != bad_frame and e["status"] == 200]
    gaps = [(x["t_out"], y["t_in"]) for x, y in zip(bad, bad[1:])]
    # The server left for a back-off would take no frame for 0.5 s at least after the 500: the frames the other
    # two jobs had in flight (0.15 s each) are answered, and the next come at once.
    arrived = [[e for e in served if t0 < e["t_in"] < t1] for t0, t1 in gaps]
    soon = [min((e["t_in"] - t0 for e in served if e["t_in"] > t0), default=None) for t0, _ in gaps]
    point(f"fakes: a 500 for one frame (--jobs 3 --retries {retries}): the frame tried {len(bad)} times "
          f"({retries + 1} expected), other frames arriving between its attempts ({[len(x) for x in arrived]}), the "
          f"first of them {['%.2f s' % v if v is not None else None for v in soon]} after each 500 (under 0.45: "
          "the server not backed off)",
          len(bad) == retries + 1 and all(len(x) >= 2 for x in arrived)
          and all(v is not None and v < 0.45 for v in soon),
          "\n".join(f"{e['t_in']:.3f} {e['t_out']:.3f} frame {e['frame']} {e['status']}" for e in posts[:60]))
    failed = s.get("failed") if isinstance(s.get("failed"), list) else []
    point("fakes: a 500 for one frame: exit 1, that frame alone failed, listed with HTTP 500 internal_error",
          rc == 1 and [f.get("frame") for f in failed] == [f"f.{bad_frame:04d}"]
          and "HTTP 500" in failed[0].get("error", "") and "internal_error" in failed[0].get("error", ""),
          f"exit {rc}\n{fake_fields(s)}\n{err[-1500:]}")
    written = outputs(os.path.join(tmp, "fake-500-one-frame"))
    point(f"fakes: a 500 for one frame: the other {count - 1} rendered and written",
          s.get("rendered") == count - 1 and s.get("not_tried") == 0
          and sorted(written) == sorted(f"f.{f:04d}.png" for f in range(FIRST, FIRST + count) if f != bad_frame),
          f"{sorted(written)}\n{fake_fields(s)}")


def fake_busy_server(tmp, start):
    """A answers 429 with Retry-After: 2 to everything, B renders: A's frames go to B at once, and A is left alone
    for its 2 s while B takes frames."""
    log = FakeLog()
    count, pace = 96, 0.2  # 12 rounds of the 8 jobs on B: the run outlasts A's Retry-After

    def script(name, n, body):
        # A answers after the frames the run's first jobs give it are all there: a 429 settles them all.
        return answer(429, {"Retry-After": 2}, error_body("queue_full", "the queue is full"), delay=0.1) \
            if name == "a" else answer(200, delay=pace)

    a, b = start("a", script, log), start("b", script, log)
    rc, out, err, took = fake_render(tmp, "busy", [a, b], count)  # --jobs from the queues: 8
    s = summary_of(out)
    by_url = servers_by_url(s)
    sa, sb = by_url.get(url(a.port), {}), by_url.get(url(b.port), {})
    on_a = log.posts("a")
    point(f"fakes: A busy (429, Retry-After: 2), B fine: exit 0, all {count} rendered by B, A's {len(on_a)} busy "
          "answer(s) counted (its busy_answers, --json's busy_429)",
          rc == 0 and s.get("rendered") == count and sb.get("rendered") == count and sa.get("rendered") == 0
          and on_a and sa.get("busy_answers") == len(on_a)
          and (s.get("retries") or {}).get("busy_429") == len(on_a), f"exit {rc}\n{fake_fields(s)}\n{err[-1500:]}")
    moved = retry_lines(err)
    slowest = max((int(ms) for ms in re.findall(r"^hdrpost: \S+ rendered by \S+ \((\d+) ms\)$", err, re.M)),
                  default=None)
    bound = scaled(count / 8 * pace + 3)
    # 1.5 s: a frame on B takes 0.2 s (0.3 after a 429 of A's); one that waited A's Retry-After took 2 s more.
    point(f"fakes: A busy: no frame waited A's 2 s (the slowest took {slowest} ms, under 1500; the run {took:.1f} s, "
          f"under {bound:.1f}), each frame A answered sent on to B at once ({len(moved)} \"retry N on B now\")",
          slowest is not None and slowest < 1500 and took < bound and len(moved) == len(on_a)
          and all(fr == url(a.port) and to == url(b.port) and when == "now" for _, fr, to, when in moved),
          f"{moved}\n{err[-1500:]}")
    first = min((e["t_out"] for e in on_a), default=None)
    again = [round(e["t_in"] - first, 3) for e in on_a if first is not None and first < e["t_in"] < first + 1.5]
    b_late = [e for e in log.posts("b") if first is not None and e["t_in"] > first + 1.5]
    point(f"fakes: A busy: no request reached A within 1.5 s of its first 429, while B took frames beyond that "
          f"({len(b_late)})", on_a and not again and b_late, f"arrivals at A after its first 429 (s): {again}")


def fake_server_dies(tmp, start):
    """A dies at its third frame (its listener closed, its connections dropped, that frame unanswered): the run
    done on B. Nothing is started on A's port after: the policy tries a left server again after its back-off (it
    takes frames once it answers), so a replacement there would rightly be given frames."""
    log = FakeLog()
    count = 16

    def script(name, n, body):
        if name == "a" and n >= 3:
            return None, {}, b"", 0.05
        return answer(200, delay=0.1)

    a, b = start("a", script, log), start("b", script, log)
    rc, out, err, took = fake_render(tmp, "dies", [a, b], count, "--jobs", "4")
    s = summary_of(out)
    by_url = servers_by_url(s)
    sa, sb = by_url.get(url(a.port), {}), by_url.get(url(b.port), {})
    a_ok = [e["frame"] for e in log.posts("a") if e["status"] == 200]
    dropped = [e["frame"] for e in log.posts("a") if e["status"] is None]
    b_frames = set(sb.get("frames") or [])
    point(f"fakes: A dies at its third frame ({len(dropped)} dropped): exit 0, all {count} rendered, A's {len(a_ok)} "
          "before it died and the rest by B, the dropped ones among them",
          a.dead and rc == 0 and s.get("rendered") == count and s.get("failed") == []
          and sa.get("rendered") == len(a_ok) and sb.get("rendered") == count - len(a_ok) and dropped
          and all(f"f.{f:04d}" in b_frames for f in dropped), f"exit {rc}\n{fake_fields(s)}\n{err[-1500:]}")
    moved = retry_lines(err)
    point(f"fakes: A dead: \"left\" ({sa.get('state')!r}) with {sa.get('failed_attempts')} failed attempt(s) and a "
          f"last error, each of its frames sent on to B ({len(moved)})",
          sa.get("state") == "left" and sa.get("failed_attempts", 0) >= 1 and sa.get("last_error")
          and len(moved) >= len(dropped) and all(fr == url(a.port) and to == url(b.port) for _, fr, to, _ in moved),
          json.dumps(sa) + f"\n{moved}\n{err[-1500:]}")


# --- A password in a server's URL ----------------------------------------------------------------------------
# "http://user:s3cr3t-pw@host:port" (a proxy with Basic auth before the daemons): libcurl sends the credentials,
# and the client names the server "http://user:***@host:port" wherever it names one (client/servers.h,
# hp_url_redact). No --token in these runs: a request has one Authorization header, and a bearer token's takes the
# place of the Basic one.
USER, PASSWORD = "user", "s3cr3t-pw"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def with_password(port):
    return f"http://{USER}:{PASSWORD}@{HOST}:{port}"


def shown(port):
    return f"http://{USER}:***@{HOST}:{port}"


def password_in(texts, out_dir=None):
    """Where the password is found: the names of the texts (a dict) that hold it, then every file of out_dir that
    does (read as bytes: images and all)."""
    found = [name for name, text in texts.items() if PASSWORD in (text or "")]
    for root, _, files in (os.walk(out_dir) if out_dir else ()):
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                if PASSWORD.encode() in f.read():
                    found.append(os.path.join(root, n))
    return found


def fake_credentials_render(tmp, start):
    """A render over three servers whose URLs carry user:s3cr3t-pw@: a renders, b answers 502 to every frame (its
    frames go on to a, its last error said), nobody listens on the third. The measuring pass of the exposure lock
    too, so that DIR/exposure.json is written."""
    log = FakeLog()
    count = 8
    stats = {"stats": {"log_average": 0.2, "mean": 0.3, "min": 0.001, "max": 4.0},
             "percentiles": {"p01": 0.01, "p50": 0.15, "p99": 2.5}}

    def script(name, n, body):
        if name == "b":
            return answer(502, {}, error_body("bad_gateway", "no replica behind the proxy"), delay=0.05)
        return answer(200, delay=0.05)

    a, b = start("a", script, log, stats), start("b", script, log, stats)
    dead = free_port()
    ports = [a.port, b.port, dead]
    out_dir = os.path.join(tmp, "fake-credentials")
    timings = os.path.join(tmp, "fake-credentials-timings.csv")
    argv = [HDRPOST, "render", fake_shot(tmp, count), "--frames", f"{FIRST}-{FIRST + count - 1}", "-o", out_dir,
            "--format", "png", "--exposure", "shot", "--jobs", "4", "--json", "--timings", timings,
            "--server", ",".join(with_password(p) for p in ports)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60), env=env())
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", f"(killed after {scaled(60):.0f} s)"
    s = summary_of(out)
    by_url = servers_by_url(s)
    label = "fakes, user:s3cr3t-pw@ in the URLs of a, b (502 to every frame) and an unreachable one"
    point(f"{label} (--exposure shot --json --timings): exit 0, all {count} rendered by a, exposure.json written",
          rc == 0 and s.get("rendered") == count and by_url.get(shown(a.port), {}).get("rendered") == count
          and os.path.exists(os.path.join(out_dir, "exposure.json")), f"exit {rc}\n{fake_fields(s)}\n{err[-2000:]}")
    seen = {(e["server"], e["method"], e["path"].split("?")[0]) for e in log.items}
    wrong = [e for e in log.items if e.get("auth") != BASIC]
    point(f"{label}: every request the fakes got ({len(log.items)}: /readyz, /v1/gpu, /v1/analyze and /v1/render on "
          f"both) carried the URL's credentials as \"Authorization: {BASIC}\": the real URL was the request's",
          not wrong and all((n, m, pth) in seen for n in ("a", "b") for m, pth in
                            (("GET", "/readyz"), ("GET", "/v1/gpu"), ("POST", "/v1/analyze"), ("POST", "/v1/render"))),
          f"{sorted(seen)}\nwithout it: {wrong[:5]}")
    csv = open(timings).read() if os.path.exists(timings) else None
    leaks = password_in({"stdout": out, "stderr": err, "the --timings file": csv}, out_dir)
    point(f"{label}: \"{PASSWORD}\" in none of stdout (--json), stderr, the --timings file, or a file of the output "
          "directory (exposure.json, the images)", csv is not None and os.listdir(out_dir) and not leaks,
          f"found in: {leaks}\n{out[-1500:]}\n{err[-2000:]}")
    sb = by_url.get(shown(b.port), {})
    point(f"{label}: --json \"servers\" names them {shown('PORT')}, in the list's order; b left with its failed "
          "attempts and its last error",
          [v.get("url") for v in s.get("servers", [])] == [shown(p) for p in ports] and sb.get("state") == "left"
          and sb.get("failed_attempts", 0) >= 1 and "bad_gateway" in (sb.get("last_error") or ""),
          json.dumps(s.get("servers"), indent=1))
    lines = server_lines(err)
    moved = retry_lines(err)
    analysed = re.findall(r"^hdrpost: (\S+) analysed by (\S+) \(\d+ ms\)$", err, re.M)
    point(f"{label}: stderr names them the same way: the unreachable one at the start, the \"analysed by\" and "
          "\"rendered by\" lines, the retry notes (FROM: reason, retry N on TO), the summary's line a server with "
          "b's last error", re.search(rf"^hdrpost render: {re.escape(shown(dead))}: unreachable: .*; its frames go to "
                                     r"the other servers until it answers$", err, re.M) is not None
          and len(analysed) == count and all(v in (shown(a.port), shown(b.port)) for _, v in analysed)
          and [v for _, v in rendered_by(err)] == [shown(a.port)] * count
          and moved and all(fr in (shown(b.port), shown(dead)) and to in map(shown, ports) for _, fr, to, _ in moved)
          and list(lines) == [shown(p) for p in ports] and "bad_gateway" in (lines[shown(b.port)][4] or ""),
          f"retry notes {moved}\n{err[-2500:]}")
    rows = [r.split(",") for r in (csv or "").splitlines()]
    point(f"{label}: --timings' server column {shown('PORT')} on each of the {count} rows",
          rows and rows[0][:3] == ["frame", "status", "server"] and len(rows) == count + 1
          and all(r[2] == shown(a.port) for r in rows[1:]), csv)


def fake_credentials_status(tmp, start):
    """hdrpost status of a server whose URL carries user:s3cr3t-pw@, and of one nobody listens on: the screens,
    --json and the message name them with the password hidden; the request carried it."""
    log = FakeLog()
    a = start("a", lambda name, n, body: answer(200), log)
    dead = free_port()
    servers = ",".join(with_password(p) for p in (a.port, dead))
    done = subprocess.run([HDRPOST, "status", "--json", "--server", servers], capture_output=True, text=True,
                          timeout=scaled(60), env=env())
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = None
    point(f"fakes: status --json of user:s3cr3t-pw@a and of an unreachable one: exit 3, \"server\" "
          f"{shown('PORT')} for both, the unreachable one named so on stderr, \"{PASSWORD}\" in neither stream",
          done.returncode == 3 and isinstance(doc, list) and [o.get("server") for o in doc] == [shown(a.port),
                                                                                              shown(dead)]
          and f"hdrpost status: {shown(dead)}: unreachable" in done.stderr
          and not password_in({"stdout": done.stdout, "stderr": done.stderr}),
          f"exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    screen = subprocess.run([HDRPOST, "status", "--server", with_password(a.port)], capture_output=True, text=True,
                            timeout=scaled(60), env=env())
    wrong = [e for e in log.items if e.get("auth") != BASIC]
    point(f"fakes: status of user:s3cr3t-pw@a: exit 0, its screen \"server   {shown('PORT')}\", \"{PASSWORD}\" in "
          "neither stream; every request of both runs carried the credentials as Basic auth",
          screen.returncode == 0 and f"server   {shown(a.port)}\n" in screen.stdout
          and not password_in({"stdout": screen.stdout, "stderr": screen.stderr}) and log.items and not wrong,
          f"exit {screen.returncode}\n{screen.stdout}\n{screen.stderr}\nwithout the credentials: {wrong[:5]}")


def credentials_in_refused_lists(tmp):
    """The parser's edge cases, through the messages that name a refused server (exit 2 before any request): what
    is userinfo and what is not, and a password never shown, neither whole nor cut."""
    twice = os.path.join(tmp, "credentials-twice.txt")
    with open(twice, "w") as f:
        f.write(f"http://{HOST}:1\n# the proxy:\n{with_password(2)}\n{with_password(2)}/\n")
    long_password = PASSWORD + "x" * 600
    cases = [
        ("a password: hidden, the user kept", [with_password(1), with_password(1)], f"{shown(1)} given twice"),
        ("an IPv6 literal host", ["http://u:s3cr3t-pw@[::1]:8080", "http://u:s3cr3t-pw@[::1]:8080/"],
         "http://u:***@[::1]:8080 given twice"),
        ("'@' in the path: hidden up to it (a server's URL has none of its own, a password may hold '/')",
         [f"http://{HOST}:1/farm@b", f"http://{HOST}:1/farm@b"], f"http://{HOST}:***@b given twice"),
        ("'@' in the query: likewise", [f"http://{HOST}:1?to=a@b", f"http://{HOST}:1?to=a@b"],
         f"http://{HOST}:***@b given twice"),
        ("'#' in the password, unencoded", [f"http://{USER}:{PASSWORD}#z@{HOST}:1"] * 2, f"{shown(1)} given twice"),
        ("'?' and '/' in the password, unencoded", [f"http://{USER}:{PASSWORD}?z/y@{HOST}:1"] * 2,
         f"{shown(1)} given twice"),
        ("',' in the password: the list is cut only where a URL follows",
         [f"http://{USER}:{PASSWORD},z@{HOST}:1"] * 2, f"{shown(1)} given twice"),
        ("a user and no password: as given", [f"http://{USER}@{HOST}:1"] * 2, f"http://{USER}@{HOST}:1 given twice"),
        ("'@' in the password: hidden to the last '@'",
         [f"http://{USER}:{PASSWORD}@x@{HOST}:1/p@q"] * 2, f"http://{USER}:***@q given twice"),
        ("percent-encoded characters left as they are", [f"http://us%40er:{PASSWORD}%3A@{HOST}:1"] * 2,
         f"http://us%40er:***@{HOST}:1 given twice"),
        ("not http:// (ftp://)", [f"ftp://{USER}:{PASSWORD}@x"], f"ftp://{USER}:***@x: not an http:// or https:// URL"),
        ("no scheme at all", [f"{USER}:{PASSWORD}@{HOST}:8080"],
         f"{USER}:***@{HOST}:8080: not an http:// or https:// URL"),
        ("too long, by a password of 609 characters", [f"http://{USER}:{long_password}@{HOST}:1"],
         f"{shown(1)}: a URL longer than 511 characters"),
        ("too long, by its path: the 300 characters shown, the password hidden in them",
         [f"{with_password(1)}/{'p' * 600}"], f"{shown(1)}/ppp"),
    ]
    for label, urls, want in cases:
        done = subprocess.run([HDRPOST, "status", "--server", ",".join(urls)], capture_output=True, text=True,
                              timeout=scaled(30), env=env())
        point(f"a refused --server list, {label}: exit 2, \"{want}\", no \"{PASSWORD}\"",
              done.returncode == 2 and want in done.stderr
              and not password_in({"stdout": done.stdout, "stderr": done.stderr}),
              f"exit {done.returncode}\n{done.stderr}")
    hash_in = os.path.join(tmp, "credentials-hash.txt")
    with open(hash_in, "w") as f:
        f.write(f"http://{USER}:{PASSWORD}#z@{HOST}:1  # a comment after a blank\n"
                f"http://{USER}:{PASSWORD}#z@{HOST}:1\n")
    long_line = os.path.join(tmp, "credentials-long.txt")
    with open(long_line, "w") as f:
        f.write(f"http://{USER}:{PASSWORD}{'x' * 1100}@{HOST}:1\n")
    for path, want, label in [
            (twice, f"{twice} line 4: {shown(2)} given twice", "a line of a URL with a password given twice"),
            (hash_in, f"{hash_in} line 2: {shown(1)} given twice",
             "'#' in a password (a comment starts at a line's start or after a blank)"),
            (long_line, f"{long_line} line 1: {shown(1)}: a URL longer than 511 characters",
             "a line of 1,100 characters of password (read whole)")]:
        done = subprocess.run([HDRPOST, "status", "--servers", path], capture_output=True, text=True,
                              timeout=scaled(30), env=env())
        point(f"a refused --servers FILE, {label}: exit 2, \"{want}\", no \"{PASSWORD}\"",
              done.returncode == 2 and want in done.stderr
              and not password_in({"stdout": done.stdout, "stderr": done.stderr}),
              f"exit {done.returncode}\n{done.stderr}")


def real_daemons(tmp):
    """The points against four real daemons (the module's list above)."""
    pattern = make_shot(tmp)
    pan = make_pan(tmp)
    ds = start_all(["server a", "server b", "server c", "server d"])
    try:
        if not all(ds):
            return
        spread_shot(ds, tmp, pattern)
        reference = subset_reference(ds, tmp, pattern)
        unreachable_one(ds, tmp, pattern, reference)
        servers_file(ds, tmp, pattern, reference)
        status_of_two(ds, tmp, pattern)
        kill_and_drain(ds, tmp, pan)
        all_gone(ds, tmp, pattern)
    finally:
        for x in ds:
            if x:
                x.kill()
                if harness.failed():
                    x.dump()


# Under HDRPOST_TEST_QUICK: the scripted fake servers alone. They set the client's threads against each other (its
# jobs sharing the servers' states, frames moved between servers while others are in flight) in seconds, with no
# daemon to start; it is also how to run this group alone.
QUICK = (fake_servers,)


def main():
    def suite(tmp):
        for group in harness.groups((real_daemons, fake_servers), QUICK):
            group(tmp)

    return harness.run_suite([HDRPOST, EXE, MAKE_FRAME], "hdrpost-servers-", suite)


if __name__ == "__main__":
    sys.exit(main())
