#!/usr/bin/env python3
"""Holding the GPU's clocks while frames come (gpu_clock_hold; pipeline/clock_hold.h) over HTTP.

Usage: test_clock_hold.py PATH/TO/hdrpostd. Prints TAP. Three daemons on the test's device, with --validation
(any validation-layer message fails, harness.stop_clean):
  - the default, auto: /v1/gpu's clock_hold says it holds on a discrete GPU (its device_type) and not on
    another device (lavapipe is a CPU device), and a frame it renders is the reference PNG;
  - gpu_clock_hold=on: before the frame is queued, while its body is still arriving (sent in 15 pieces 0.1 s
    apart), holds are submitted (hdrpost_gpu_clock_holds_total, read mid-body); the frame's PNG is the first
    daemon's byte for byte; once answered and idle (the requests' memory given back) the count no longer
    moves; /v1/gpu's clock_hold agrees with /metrics, and its GPU seconds grew;
  - gpu_clock_hold=on again: SIGTERM while a body arrives and holds run drains it, answers it and exits 0.
"""

import os
import sys
import threading
import time

import harness
from harness import point

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
FRAME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "blender_street_960x540_singlelayer.exr")
REQUEST_TIMEOUT_S = 120
HOLDS = "hdrpost_gpu_clock_holds_total"


def clock_hold(port):
    status, _, body = harness.request(port, "GET", "/v1/gpu", timeout=10)
    return (harness.json_body(body) or {}).get("clock_hold") if status == 200 else None


def idle_memory(port, timeout=10.0):
    """Polls /v1/gpu until requests in flight hold no memory (bounded); True when they came to none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _, body = harness.request(port, "GET", "/v1/gpu", timeout=10)
        used = ((harness.json_body(body) or {}).get("inflight_memory") or {}).get("used_bytes")
        if status == 200 and used == 0:
            return True
        time.sleep(0.05)
    return False


def steady_holds(port, timeout=10.0):
    """Polls the holds' count until two reads 0.2 s apart agree (bounded); True when they did."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        now = harness.metric(port, HOLDS)
        if now is not None and now == last:
            return True
        last = now
        time.sleep(0.2)
    return False


def sigterm_while_holding(frame):
    """SIGTERM while a body arrives over 3 s and the GPU thread holds: the drain answers it, exit 0."""
    d = harness.start_ready(EXE, "on, SIGTERM", ["--gpu_clock_hold=on"])
    if not d:
        return
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=harness.post_trickled(
        d.port, frame, "output.format=png", pieces=30, gap_s=0.1, timeout=REQUEST_TIMEOUT_S)))
    t.start()
    time.sleep(1.0)
    holding = (harness.metric(d.port, HOLDS) or 0) > 0
    harness.stop_clean(d)  # SIGTERM; exit 0 and no validation message
    t.join()
    status, png = answer.get("r", (None, b""))
    point("on, SIGTERM: holds ran while the body arrived, and the drain still answered the frame",
          holding and status == 200 and png[:8] == b"\x89PNG\r\n\x1a\n", f"holding {holding}, {status}")


def body(tmp):
    with open(FRAME, "rb") as f:
        frame = f.read()
    with harness.serving(harness.start_ready(EXE, "auto")) as d:
        if not d:
            return
        _, _, gpu = harness.request(d.port, "GET", "/v1/gpu", timeout=10)
        info = harness.json_body(gpu) or {}
        kind = info.get("device_type")
        hold = info.get("clock_hold") or {}
        point(f"auto holds the clocks on a discrete GPU only ({info.get('device')}, {kind}: enabled "
              f"{hold.get('enabled')})", kind in ("discrete", "integrated", "virtual", "cpu", "other") and
              hold.get("enabled") is (kind == "discrete") and hold.get("holds") == 0, f"{hold}")
        status, _, reference = harness.request(d.port, "POST", "/v1/render?output.format=png", frame,
                                               timeout=REQUEST_TIMEOUT_S)
        point("auto: the frame renders (200, a PNG)", status == 200 and reference[:8] == b"\x89PNG\r\n\x1a\n",
              f"{status} {reference[:200]!r}")

    with harness.serving(harness.start_ready(EXE, "on", ["--gpu_clock_hold=on"])) as d:
        if not d:
            return
        before = harness.metric(d.port, HOLDS)
        point("on: /v1/gpu says the clocks are held, none yet", (clock_hold(d.port) or {}).get("enabled") is True
              and before == 0, f"{clock_hold(d.port)} {before}")
        answer = {}
        t = threading.Thread(target=lambda: answer.update(r=harness.post_trickled(
            d.port, frame, "output.format=png", pieces=15, gap_s=0.1, timeout=REQUEST_TIMEOUT_S)))
        t.start()
        time.sleep(0.7)
        during = harness.metric(d.port, HOLDS)
        still_arriving = t.is_alive()
        t.join()
        point("on: holds are submitted while the frame's body is still arriving (before it is queued)",
              still_arriving and during is not None and during > 0, f"{during} holds, arriving {still_arriving}")
        status, png = answer.get("r", (None, b""))
        point("on: the frame's PNG is the default daemon's byte for byte", status == 200 and png == reference,
              f"{status} {len(png)} bytes against {len(reference)}")
        # The request's completion gives its memory back just after the answer; a hold begun just before
        # that is counted when its submission returns: the count settles, then must stay.
        settled = idle_memory(d.port) and steady_holds(d.port)
        idle1 = harness.metric(d.port, HOLDS)
        time.sleep(1.0)
        idle2 = harness.metric(d.port, HOLDS)
        point("on: once answered and idle, no more holds", settled and idle1 is not None and idle1 == idle2 and
              idle1 >= during, f"memory settled {settled}, {during} -> {idle1} -> {idle2}")
        hold = clock_hold(d.port) or {}
        seconds = harness.metric(d.port, "hdrpost_gpu_clock_hold_seconds_total")
        point("on: /v1/gpu's clock_hold agrees with /metrics, and the holds took GPU time",
              hold.get("holds") == idle2 and seconds is not None and seconds > 0 and
              abs(hold.get("gpu_seconds", -1) - seconds) < 1e-5, f"{hold} {idle2} {seconds}")

    sigterm_while_holding(frame)


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE], "hdrpost-clock-hold-", body))
