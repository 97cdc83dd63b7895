#!/usr/bin/env python3
"""Replicas behind a real HAProxy (issue 37; deploy/replicas.py, docs/SCALING.md).

Usage: test_haproxy.py PATH/TO/hdrpostd PATH/TO/make_frame PATH/TO/hdrpost. Prints TAP.
  - deploy/replicas.py --all (lavapipe is a CPU device) writes each replica's settings (its GPU by UUID as
    --list-devices says it, a loopback port, HAProxy trusted), its CPU share, and an haproxy.cfg that
    `haproxy -c` accepts;
  - three daemons on lavapipe and Debian's HAProxy with that configuration (three servers, a stats socket):
    HAProxy's view of each server agrees with its /readyz; frames through HAProxy are byte-identical to a
    daemon's own answer, and the daemons' logs name the client HAProxy passed on (X-Forwarded-For);
  - one daemon drained (SIGTERM) and one killed (SIGKILL) while frames are sent: HAProxy takes each out of
    rotation as /readyz (or the refused connection) says, and every frame is rendered, byte-identical, a
    frame answered 502 or 503 by a replica going away sent again as a client (hdrpost) does;
  - a replica that loses its GPU behind HAProxy: what HAProxy relays is answered 503 device_lost with
    Retry-After: 1 (a client asking it directly gets none), and hdrpost's shot through HAProxy ends with every
    frame, byte-identical, the other replica rendering those the lost one could not.
"""
import http.client
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import harness
from harness import point

EXE = sys.argv[1] if len(sys.argv) > 1 else "hdrpostd"
MAKE_FRAME = sys.argv[2] if len(sys.argv) > 2 else "make_frame"
HDRPOST = sys.argv[3] if len(sys.argv) > 3 else "hdrpost"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
SOURCE = os.path.join(ROOT, "tests", "data", "pmndrs_park.exr")
# Behind a proxy the replicas need a token: without one a daemon serves its own machine alone, and a request a
# trusted proxy relays may come from anywhere (403 proxy_needs_token; test_daemon.py's trusted_proxies).
TOKEN = "haproxy-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

spec = importlib.util.spec_from_file_location("replicas", os.path.join(ROOT, "deploy", "replicas.py"))
replicas = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replicas)


def stats(sock_path):
    """HAProxy's status of each server of the backend ("UP", "DOWN", ...), from its stats socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(sock_path)
            s.sendall(b"show stat\n")
            data = harness.read_to_end(s)
    except OSError:
        return {}
    out = {}
    for line in data.decode(errors="replace").splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == "replicas" and f[1].startswith("gpu"):
            out[f[1]] = f[17].split(" ")[0]
    return out


def wait_status(sock_path, want, timeout=20):
    deadline = time.monotonic() + harness.scaled(timeout)
    got = {}
    while time.monotonic() < deadline:
        got = stats(sock_path)
        if got == want:
            return got
        time.sleep(0.2)
    return got


def start_haproxy(haproxy, tmp, name, ds, uuid):
    """Debian's HAProxy in front of the daemons started, with deploy/replicas.py's configuration (its log on
    stdout, a stats socket, no chroot): (the child, its front port, the socket's path)."""
    front = harness.free_port()
    sock_path = os.path.join(tmp, f"{name}.sock")
    cfg_path = os.path.join(tmp, f"{name}.cfg")
    with open(cfg_path, "w") as f:
        f.write(replicas.haproxy_cfg(f"127.0.0.1:{front}", [(d.port, uuid, "lavapipe") for d in ds if d],
                                     10, log="stdout format raw", stats_socket=sock_path, drop_root=False))
    return harness.Child("haproxy", [haproxy, "-f", cfg_path, "-db"]), front, sock_path


def stop_all(hp, ds):
    """HAProxy and the daemons gone, whatever happened."""
    hp.stop()
    hp.kill()
    for d in ds:
        if d:
            d.kill()


def render(port, frame, tries=4):
    """A frame through HAProxy, sent again after a 502 or 503 or a failed connection (as hdrpost does):
    (status, body, how many sends)."""
    status, body = 0, b""
    for n in range(1, tries + 1):
        try:
            status, _, body = harness.request(port, "POST", "/v1/render?output.format=png", frame,
                                              {"Content-Type": "image/x-exr", **AUTH}, timeout=120)
        except OSError:
            status = 0
        if status not in (0, 502, 503):
            return status, body, n
        time.sleep(harness.scaled(0.5) * n)  # as hdrpost backs off
    return status, body, tries


def body(tmp):
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    point("HAProxy is installed (Debian's; deploy/debian.sh test installs it)", haproxy is not None, "")
    if not haproxy:
        return
    # --- the generator ------------------------------------------------------------------------------------
    root = os.path.join(tmp, "root")
    gen = subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "replicas.py"), "--hdrpostd", EXE, "--root",
                          root, "--all", "--cpus", "4", "--base-port", "18081"], capture_output=True, text=True,
                         timeout=120)
    listed = subprocess.run([EXE, "--list-devices"], capture_output=True, text=True, timeout=60).stdout
    uuid = next((ln.split("\t")[1] for ln in listed.splitlines() if ln and not ln.startswith("#")), "")
    env0 = open(os.path.join(root, "etc/hdrpostd/hdrpostd@0.env")).read() if gen.returncode == 0 else ""
    cpus0 = open(os.path.join(root, "etc/systemd/system/hdrpostd@0.service.d/cpus.conf")).read() \
        if gen.returncode == 0 else ""
    cfg = os.path.join(root, "etc/haproxy/haproxy.cfg")
    check = subprocess.run([haproxy, "-c", "-f", cfg], capture_output=True, text=True, timeout=60) \
        if gen.returncode == 0 else None
    point("deploy/replicas.py writes replica 0's settings (its GPU by the UUID --list-devices gives, a loopback "
          "port, HAProxy trusted), its CPU share, and an haproxy.cfg that haproxy -c accepts",
          gen.returncode == 0 and f"HDRPOST_DEVICE={uuid}\n" in env0 and "HDRPOST_LISTEN=127.0.0.1:18081" in env0
          and "HDRPOST_TRUSTED_PROXIES=127.0.0.1" in env0 and "CPUAffinity=0-3" in cpus0 and check is not None
          and check.returncode == 0, f"{gen.stdout}{gen.stderr}\n{env0}\n{cpus0}\n{check and check.stdout + check.stderr}")

    # --- three replicas behind HAProxy --------------------------------------------------------------------
    frame_path = os.path.join(tmp, "park.exr")
    subprocess.run([MAKE_FRAME, SOURCE, frame_path, "1", "zip"], check=True, capture_output=True, timeout=120)
    frame = open(frame_path, "rb").read()
    ds = [harness.start_ready(EXE, f"replica {n}", ["--trusted_proxies=127.0.0.1", "--log_level=info",
                                                    f"--auth_token={TOKEN}"], ready_timeout=90) for n in range(3)]
    hp, front, sock_path = start_haproxy(haproxy, tmp, "haproxy", ds, uuid)
    try:
        if not all(ds):
            return
        up = wait_status(sock_path, {"gpu0": "UP", "gpu1": "UP", "gpu2": "UP"})
        point("HAProxy has the three replicas in rotation, as their /readyz say (200)",
              up == {"gpu0": "UP", "gpu1": "UP", "gpu2": "UP"}
              and all(harness.request(d.port, "GET", "/readyz")[0] == 200 for d in ds), f"{up}\n{hp.log()}")
        s, _, direct = harness.request(ds[0].port, "POST", "/v1/render?output.format=png", frame,
                                       {"Content-Type": "image/x-exr", **AUTH}, timeout=120)
        answers = [render(front, frame) for _ in range(6)]
        point("six frames through HAProxy: each 200 and byte-identical to a replica's own answer",
              s == 200 and all(a[0] == 200 and a[1] == direct for a in answers), f"{s} {[a[0] for a in answers]}")
        # A client at 127.0.0.2 (HAProxy reaches the replicas from 127.0.0.1, their trusted proxy), which also
        # sends an X-Forwarded-For line of its own: the log must name 127.0.0.2, HAProxy's word, not the client's.
        conn = http.client.HTTPConnection("127.0.0.1", front, timeout=30, source_address=("127.0.0.2", 0))
        conn.request("GET", "/livez", headers={"X-Forwarded-For": "198.51.100.66"})
        status = conn.getresponse().status
        conn.close()
        time.sleep(0.3)
        named = sum("GET /livez" in ln and ln.endswith("for 127.0.0.2") for d in ds for ln in d.log().splitlines())
        point("a client at 127.0.0.2 sending its own X-Forwarded-For: the replica's log names 127.0.0.2, the client "
              "HAProxy passed on (trusted_proxies), not the address the client wrote", status == 200 and named == 1,
              f"{status}\n" + "\n".join(d.log()[-600:] for d in ds))

        # --- a drain and a death while frames are sent ------------------------------------------------------
        results, lock = [], threading.Lock()

        def sender(k):
            for _ in range(4):
                r = render(front, frame)
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        time.sleep(harness.scaled(1.0))
        ds[1].proc.send_signal(signal.SIGTERM)  # drained: /readyz 503 at once, then it exits
        ds[2].proc.kill()                       # gone: connections refused
        after = wait_status(sock_path, {"gpu0": "UP", "gpu1": "DOWN", "gpu2": "DOWN"})
        for t in threads:
            t.join()
        point("after SIGTERM to one replica and SIGKILL to another, HAProxy has only the third in rotation, as "
              "/readyz (503, then gone) and the refused connections say", after == {"gpu0": "UP", "gpu1": "DOWN",
                                                                                       "gpu2": "DOWN"},
              f"{after}\n{hp.log()[-2000:]}")
        resent = sum(r[2] > 1 for r in results)
        point(f"every one of the 12 frames sent meanwhile is rendered, byte-identical ({resent} sent again after a "
              "replica going away answered 502 or 503, as hdrpost does): no frame lost",
              len(results) == 12 and all(r[0] == 200 and r[1] == direct for r in results),
              f"{[(r[0], r[2]) for r in results]}")
        rc = ds[1].wait_exit(harness.scaled(60))
        point("the drained replica exits 0", rc == 0, ds[1].log()[-1000:])
        final = [render(front, frame) for _ in range(2)]
        point("the last replica serves on through HAProxy, the same bytes", all(a[0] == 200 and a[1] == direct
                                                                                for a in final), f"{final}")
    finally:
        stop_all(hp, ds)
    lost_gpu_behind_proxy(tmp, haproxy, uuid, frame_path, direct if s == 200 else None)


def lost_gpu_behind_proxy(tmp, haproxy, uuid, frame_path, direct):
    """A replica whose GPU is lost after two frames, beside a sound one, behind HAProxy; hdrpost sends a shot of
    ten copies of the frame through HAProxy."""
    ds = [harness.start_ready(EXE, "sound replica", ["--trusted_proxies=127.0.0.1", f"--auth_token={TOKEN}"],
                              ready_timeout=90),
          harness.start_ready(EXE, "replica to lose its GPU", ["--trusted_proxies=127.0.0.1", f"--auth_token={TOKEN}",
                                                               "--test_lose_device_after=2", "--warm_frame=none"],
                              ready_timeout=90)]
    hp, front, sock_path = start_haproxy(haproxy, tmp, "haproxy-lost", ds, uuid)
    try:
        if not all(ds) or direct is None:
            point("the replicas for the lost GPU start", False, "")
            return
        wait_status(sock_path, {"gpu0": "UP", "gpu1": "UP"})
        shot = os.path.join(tmp, "lost-shot")
        os.makedirs(shot)
        for n in range(10):
            shutil.copy(frame_path, os.path.join(shot, f"park.{1001 + n}.exr"))
        out = os.path.join(tmp, "lost-out")
        run = subprocess.run([HDRPOST, "render", shot, "-o", out, "--server", f"http://127.0.0.1:{front}", "--token",
                              TOKEN, "--exposure", "frame", "--format", "png", "--jobs", "4", "--json"],
                             capture_output=True, text=True, timeout=harness.scaled(300))
        pngs = sorted(n for n in os.listdir(out) if n.endswith(".png")) if os.path.isdir(out) else []
        same = all(open(os.path.join(out, n), "rb").read() == direct for n in pngs)
        ready = harness.request(ds[1].port, "GET", "/readyz")
        point("the replica's GPU was lost mid-shot (its /readyz 503, device lost), yet hdrpost's shot through HAProxy "
              f"ends 0 with all 10 frames, byte-identical to a sound replica's ({len(pngs)} written)",
              ready[0] == 503 and b"device lost" in ready[2] and run.returncode == 0 and len(pngs) == 10 and same,
              f"{ready[0]} {ready[2][:200]}\n{run.stderr[-2000:]}")
        xff = {**AUTH, "X-Forwarded-For": "192.0.2.7"}
        relayed = harness.request(ds[1].port, "POST", "/v1/render?output.format=png", b"x", xff, timeout=30)
        # The proxy's own address without X-Forwarded-For: a client on the proxy's host (deploy/replicas.py's
        # replicas listen on loopback, which they trust) talking to the replica directly.
        local = harness.request(ds[1].port, "POST", "/v1/render?output.format=png", b"x", AUTH, timeout=30)
        health = harness.request(ds[1].port, "GET", "/readyz", None, xff, timeout=30)
        conn = http.client.HTTPConnection("127.0.0.1", ds[1].port, timeout=30, source_address=("127.0.0.2", 0))
        conn.request("POST", "/v1/render?output.format=png", body=b"x", headers=xff)
        r = conn.getresponse()
        alone = (r.status, r.getheader("Retry-After"), r.read())
        conn.close()
        point("the lost replica answers a frame its trusted proxy relays (X-Forwarded-For) 503 device_lost with "
              "Retry-After: 1 (the proxy sends it again elsewhere); without one to a client on the proxy's address "
              "that is not relayed, to an untrusted address however it names its client, and on /readyz (this "
              "process takes no frame again)",
              relayed[0] == 503 and relayed[1].get("retry-after") == "1" and b"device_lost" in relayed[2]
              and local[0] == 503 and "retry-after" not in local[1] and b"device_lost" in local[2]
              and health[0] == 503 and "retry-after" not in health[1]
              and alone[0] == 503 and alone[1] is None and b"device_lost" in alone[2],
              f"{relayed}\n{local}\n{health}\n{alone}")
    finally:
        stop_all(hp, ds)


if __name__ == "__main__":
    sys.exit(harness.run_suite([EXE, MAKE_FRAME, HDRPOST], "hdrpost-haproxy-", body))
