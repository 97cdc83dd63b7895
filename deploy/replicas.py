#!/usr/bin/env python3
"""One replica of hdrpostd per GPU on this host, and HAProxy in front of them (issue 37; docs/SCALING.md).

Reads the GPUs from `hdrpostd --list-devices` and writes, under --root (default /):
  etc/hdrpostd/hdrpostd@N.env                       replica N's settings, read after the shared hdrpostd.env: its
                                                    GPU by UUID, its loopback port, HAProxy as a trusted proxy
  etc/systemd/system/hdrpostd@N.service.d/cpus.conf its share of the host's CPUs (CPUAffinity=)
  etc/haproxy/haproxy.cfg                           the load balancer: health from /readyz, least connections,
                                                    per-server maxconn from the replica's queue, connection
                                                    failures and 503 retried elsewhere, X-Forwarded-For
It prints the commands that install the unit and start everything. The replicas need a token behind a proxy
(HDRPOST_AUTH_TOKEN in the shared /etc/hdrpostd/hdrpostd.env): without one each serves its own machine alone,
and answers what HAProxy relays 403 proxy_needs_token. A host's own haproxy.cfg is kept as
haproxy.cfg.before-hdrpostd. The unit itself is
deploy/systemd/hdrpostd.service installed as /etc/systemd/system/hdrpostd@.service (docs/DEPLOY.md).

Usage: replicas.py [--hdrpostd PATH] [--root DIR] [--front ADDR:PORT] [--base-port N] [--queue-depth N]
                   [--cpus N] [--all]
--all takes CPU devices too (lavapipe: for tests); by default only GPUs are given a replica.
"""
import argparse
import os
import shutil
import subprocess
import sys

# The frames a replica takes at once before answering 429: its queue, and the frames on the GPU and being
# encoded (the daemon's own count: /v1/gpu's queue.capacity plus frames_in_flight's two). HAProxy's per-server
# maxconn above that only moves the wait into the daemon; at it, HAProxy queues the rest and sends each to the
# first replica with room (least connections).
IN_FLIGHT = 2


def devices(hdrpostd, take_cpus):
    """The usable devices: (index, uuid, pci, type, name)."""
    out = subprocess.run([hdrpostd, "--list-devices"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"replicas.py: {hdrpostd} --list-devices failed (exit {out.returncode}): {out.stderr.strip()}")
    found, seen = [], set()
    for line in out.stdout.splitlines():
        if not line or line.startswith("#"):
            continue
        index, uuid, pci, kind, usable, name = line.split("\t", 5)
        # one replica a GPU: two driver manifests can list the same GPU twice, with one UUID
        if usable == "usable" and (take_cpus or kind.lower() != "cpu") and uuid not in seen:
            seen.add(uuid)
            found.append((int(index), uuid, pci, kind, name))
    return found


def cpu_ranges(cpus, parts):
    """The host's CPUs 0..cpus-1 in `parts` contiguous shares, as CPUAffinity= ranges."""
    out = []
    for k in range(parts):
        lo, hi = k * cpus // parts, (k + 1) * cpus // parts - 1
        out.append(f"{lo}-{hi}" if hi > lo else f"{lo}")
    return out


def write(root, path, text, mode=0o644):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(full, mode)
    return full


def haproxy_cfg(front, replicas, maxconn, log="/dev/log", stats_socket="/run/haproxy/admin.sock", drop_root=True):
    # Started as root by its unit, HAProxy then runs as its own user in a chroot, as Debian's configuration has it.
    privileges = ("    user haproxy\n    group haproxy\n    chroot /var/lib/haproxy\n" if drop_root else "")
    servers = "\n".join(f"    server gpu{n} 127.0.0.1:{port} check  # {uuid} ({name})"
                        for n, (port, uuid, name) in enumerate(replicas))
    return f"""# hdrpostd's replicas behind HAProxy, written by deploy/replicas.py (docs/SCALING.md).
global
    log {log} local0
    maxconn 4096
{privileges}
    # "show stat" and "show servers state" on it: which replicas HAProxy has in rotation.
    stats socket {stats_socket} mode 660 level admin

defaults
    mode http
    log global
    option httplog
    timeout connect 5s
    # A 4K frame's body, its queue and its answer: a shot's frames are long requests.
    timeout client 300s
    timeout server 300s
    timeout queue 120s
    timeout http-request 60s

frontend hdrpost
    bind {front}
    default_backend replicas

backend replicas
    # The replica with the fewest requests in flight: frames cost alike, so this spreads the GPUs' work.
    balance leastconn
    # In rotation while /readyz says 200: starting, draining or a lost GPU take a replica out.
    option httpchk GET /readyz
    http-check expect status 200
    # The client's address to the daemon (its trusted_proxies names this host): logs and limits mean a client.
    option forwardfor
    # A connection that fails is sent to another replica; a 503 (draining, a lost GPU) is tried again on
    # another. A request is only retried while HAProxy still holds all of it (bodies up to its buffer):
    # a frame's body is not, so a frame answered 503 comes back to the client, which retries (hdrpost does).
    retries 2
    option redispatch 1
    retry-on conn-failure empty-response 503
    default-server inter 1s fall 2 rise 2 maxconn {maxconn}
{servers}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hdrpostd", default="/usr/local/bin/hdrpostd")
    ap.add_argument("--root", default="/")
    ap.add_argument("--front", default="0.0.0.0:8080", help="where HAProxy listens for clients")
    ap.add_argument("--base-port", type=int, default=8081, help="replica N listens on 127.0.0.1:(this + N)")
    ap.add_argument("--queue-depth", type=int, default=8, help="each replica's HDRPOST_QUEUE_DEPTH")
    ap.add_argument("--cpus", type=int, default=os.cpu_count(), help="the host's CPUs shared among replicas")
    ap.add_argument("--all", action="store_true", help="CPU devices (lavapipe) too")
    a = ap.parse_args()
    found = devices(a.hdrpostd, a.all)
    if not found:
        sys.exit("replicas.py: no usable GPU (hdrpostd --list-devices); --all takes CPU devices too")
    shares = cpu_ranges(a.cpus, len(found))
    replicas = []
    for n, (index, uuid, pci, kind, name) in enumerate(found):
        port = a.base_port + n
        write(a.root, f"/etc/hdrpostd/hdrpostd@{n}.env",
              f"# Replica {n}: {name}, Vulkan device {index}, PCI {pci} (deploy/replicas.py). Read after\n"
              f"# /etc/hdrpostd/hdrpostd.env, whose token and settings it shares.\n"
              f"HDRPOST_DEVICE={uuid}\nHDRPOST_LISTEN=127.0.0.1:{port}\nHDRPOST_QUEUE_DEPTH={a.queue_depth}\n"
              f"HDRPOST_TRUSTED_PROXIES=127.0.0.1\n", 0o600)
        write(a.root, f"/etc/systemd/system/hdrpostd@{n}.service.d/cpus.conf",
              f"# Replica {n}'s share of the host's CPUs (deploy/replicas.py): the daemon sizes its threads by it.\n"
              f"[Service]\nCPUAffinity={shares[n]}\n")
        replicas.append((port, uuid, name))
    old = os.path.join(a.root, "etc/haproxy/haproxy.cfg")
    if os.path.exists(old) and not os.path.exists(old + ".before-hdrpostd"):
        shutil.copy2(old, old + ".before-hdrpostd")  # the host's own, kept once
    cfg = write(a.root, "/etc/haproxy/haproxy.cfg", haproxy_cfg(a.front, replicas, a.queue_depth + IN_FLIGHT))
    units = " ".join(f"hdrpostd@{n}" for n in range(len(found)))
    print(f"replicas.py: {len(found)} replica(s) written under {a.root}; HAProxy's configuration: {cfg}")
    print("then, as root:\n"
          "  install -m 0644 deploy/systemd/hdrpostd.service /etc/systemd/system/hdrpostd@.service\n"
          f"  systemctl daemon-reload && systemctl enable --now {units} && systemctl reload-or-restart haproxy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
