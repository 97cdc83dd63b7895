#!/usr/bin/env python3
"""One replica of hdrpostd per GPU on this host, and HAProxy in front of them (issue 37; docs/SCALING.md).

Reads the GPUs from `hdrpostd --list-devices` and writes, under --root (default /):
  etc/hdrpostd/hdrpostd@N.env                       replica N's settings, read after the shared hdrpostd.env: its
                                                    GPU by UUID, its loopback port, HAProxy as a trusted proxy
  etc/systemd/system/hdrpostd@N.service.d/cpus.conf its share of the host's CPUs (CPUAffinity=), from its
                                                    GPU's NUMA node (below)
  etc/haproxy/haproxy.cfg                           the load balancer: health from /readyz, least connections,
                                                    per-server maxconn from the replica's queue, connection
                                                    failures and 503 retried elsewhere, X-Forwarded-For
It prints the commands that install the unit and start everything. The replicas need a token behind a proxy
(HDRPOST_AUTH_TOKEN in the shared /etc/hdrpostd/hdrpostd.env): without one each serves its own machine alone,
and answers what HAProxy relays 403 proxy_needs_token. A host's own haproxy.cfg is kept as
haproxy.cfg.before-hdrpostd. The unit itself is
deploy/systemd/hdrpostd.service installed as /etc/systemd/system/hdrpostd@.service (docs/DEPLOY.md).

CPU shares. A replica's threads inflate EXR chunks into pinned host memory that its GPU then reads, and read the
frames back to encode them: on a host of several NUMA nodes (sockets, or SNC/NPS clusters), CPUs of the GPU's own
node keep that traffic off the link between them. So each GPU's node is read from
<sysfs>/bus/pci/devices/<PCI address>/numa_node and the node's CPUs from <sysfs>/devices/system/node/nodeK/cpulist;
the replicas of one node split its CPUs in whole cores (topology/thread_siblings_list), in --list-devices' order. A node
without a GPU gives its CPUs to the replicas of the nearest node with one (numa_shares says why). Where any
GPU's node is unknown (no sysfs, a VM, numa_node -1, a CPU device under --all) the CPUs are split contiguously in
--list-devices' order, as if the host had one node, and the script says so. The CPUs considered are this
process's allowed ones, or 0..N-1 with --cpus N (each node's list cut to them). Each replica's node and CPUs
are printed.

Usage: replicas.py [--hdrpostd PATH] [--root DIR] [--front ADDR:PORT] [--base-port N] [--queue-depth N]
                   [--cpus N] [--sysfs DIR] [--all]
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


def parse_cpulist(text):
    """The CPUs of a kernel cpulist ("0-15,64-79"; "" for a node without CPUs), sorted.
    Raises ValueError on anything else."""
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        lo, hi = int(lo), int(hi or lo)
        if lo < 0 or hi < lo:
            raise ValueError(f"bad cpulist range {part!r}")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def compact(cpus):
    """Sorted CPUs as CPUAffinity= and the kernel write them: "0-3,8-9,16"."""
    runs = []  # [first, last] of each run of consecutive CPUs
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def split(cpus, parts):
    """`cpus` (sorted) in `parts` contiguous chunks whose sizes differ by at most one. With fewer CPUs than
    parts no chunk may be empty (an empty CPUAffinity= means every CPU), so part k takes cpus[k*n//parts]
    alone and some parts share a CPU."""
    n = len(cpus)
    if n < parts:
        return [[cpus[k * n // parts]] for k in range(parts)]
    return [cpus[k * n // parts:(k + 1) * n // parts] for k in range(parts)]


def considered_cpus(cap):
    """The CPUs the replicas share. --cpus N: 0..N-1, as before and whatever this process may use (the files
    may be written for another host, or the last CPUs kept for other work; tests stay deterministic).
    Otherwise this process's allowed CPUs: online ones outside isolcpus= and outside a cpuset it was started
    in, which os.cpu_count()'s 0..N-1 would include."""
    if cap is not None:
        return list(range(cap))
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def read_text(path):
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def gpu_node(sysfs, pci):
    """(NUMA node, None) of the device at PCI address `pci` ("0000:3b:00.0", as --list-devices gives it and
    sysfs names it), or (None, why it is unknown)."""
    if not pci or pci == "-":
        return None, "no PCI address (a CPU device, or a driver that gives none)"
    path = os.path.join(sysfs, "bus/pci/devices", pci.lower(), "numa_node")
    text = read_text(path)
    if text is None:
        return None, f"no {path}"
    try:
        node = int(text)
    except ValueError:
        return None, f"{path} reads {text!r}"
    if node < 0:  # the firmware gave no proximity for the slot (a VM, a one-node host)
        return None, f"{path} reads {node}"
    return node, None


def cores(sysfs, cpus):
    """`cpus` grouped by core: each core's hardware threads together (sysfs's topology/thread_siblings_list; a
    CPU whose topology is unread is a core of its own), cores in the order of their first thread."""
    def core(c):
        text = read_text(os.path.join(sysfs, f"devices/system/cpu/cpu{c}/topology/thread_siblings_list"))
        try:
            return min(parse_cpulist(text)) if text else c
        except ValueError:
            return c
    groups = {}
    for c in sorted(cpus):
        groups.setdefault(core(c), []).append(c)
    return [groups[k] for k in sorted(groups)]


def split_cores(sysfs, cpus, parts, notes, what, spare=False):
    """`cpus` in `parts` shares of whole cores, contiguous in core order, so that two replicas never share a
    core's execution units. With fewer cores than parts: a spare node's (spare: the replicas have CPUs of their
    own) goes a core each to the first replicas and none to the rest; a GPU's node by thread in core order
    (threads of one core to neighbouring replicas), said in notes."""
    groups = cores(sysfs, cpus)
    if len(groups) >= parts:
        return [[c for g in chunk for c in g] for chunk in split(groups, parts)]
    if spare:
        return groups + [[] for _ in range(parts - len(groups))]
    notes.append(f"{what} has {len(groups)} core(s) for {parts} replicas: split by thread, so some share a core")
    return split([c for g in groups for c in g], parts)


def node_ids(sysfs):
    """The host's NUMA nodes, in the order of each node's distance file: online ones by id."""
    base = os.path.join(sysfs, "devices/system/node")
    online = read_text(os.path.join(base, "online"))
    if online is not None:
        try:
            return parse_cpulist(online)
        except ValueError:
            pass
    try:
        return sorted(int(d[4:]) for d in os.listdir(base) if d.startswith("node") and d[4:].isdigit())
    except OSError:
        return []


def node_distances(sysfs, node):
    """{other node: distance} from node's distance file (one column per node of node_ids); {} if unread,
    which makes every node equally near."""
    text = read_text(os.path.join(sysfs, f"devices/system/node/node{node}/distance"))
    ids = node_ids(sysfs)
    try:
        row = [int(x) for x in (text or "").split()]
    except ValueError:
        return {}
    return dict(zip(ids, row)) if len(row) == len(ids) else {}


def numa_shares(sysfs, found, considered):
    """Each replica's CPUs by its GPU's NUMA node: ([(node, cpus, spare nodes)], notes), or (None, why not).

    A node's CPUs go to the replicas of its GPUs in shares of whole cores (split_cores), in replica order.
    A node without a GPU (a socket whose slots hold none, a sub-NUMA cluster, a small CPU-only node) gives its
    CPUs to the replicas of the nearest node with a GPU (its distance file; equal distances, or none read,
    share them among those nodes' replicas), beside their own. The CPUs are the bound (docs/SCALING.md: a 4K
    WebP is 182 ms of one core, the GPU's part 1.1-1.4 ms), so a core a hop away still adds frames where,
    left idle, it adds none; the nearest node keeps the hop short (the same socket, under SNC or NPS)."""
    nodes = []
    for n, (_, _, pci, _, name) in enumerate(found):
        node, why = gpu_node(sysfs, pci)
        if node is None:
            return None, f"NUMA node unknown for replica {n} ({name}, PCI {pci}): {why}"
        nodes.append(node)
    allowed = set(considered)
    cpus_of, notes = {}, []
    for node in node_ids(sysfs) or sorted(set(nodes)):
        path = os.path.join(sysfs, f"devices/system/node/node{node}/cpulist")
        text = read_text(path)
        if text is None:
            if node in nodes:
                return None, f"no {path} for replica {nodes.index(node)}'s node {node}"
            continue
        try:
            cpus_of[node] = [c for c in parse_cpulist(text) if c in allowed]
        except ValueError as e:
            return None, f"{path}: {e}"
    for n, node in enumerate(nodes):
        if node not in cpus_of:
            return None, f"replica {n}'s node {node} is not among the host's nodes ({sysfs}/devices/system/node)"
        if not cpus_of[node]:
            return None, f"replica {n}'s node {node} has none of the CPUs considered ({compact(considered)})"
    own = {node: [n for n in range(len(found)) if nodes[n] == node] for node in sorted(set(nodes))}
    shares = [[nodes[n], [], []] for n in range(len(found))]
    for node, reps in own.items():
        if len(cpus_of[node]) < len(reps):
            notes.append(f"node {node} has {len(cpus_of[node])} CPU(s) for {len(reps)} replicas: some share a CPU")
        for n, chunk in zip(reps, split_cores(sysfs, cpus_of[node], len(reps), notes, f"node {node}")):
            shares[n][1].extend(chunk)
    for node, cpus in cpus_of.items():
        if node in own or not cpus:
            continue
        dist = node_distances(sysfs, node)
        near = min(dist.get(g, 0) for g in own)
        to = [g for g in own if dist.get(g, 0) == near]
        reps = sorted(n for g in to for n in own[g])
        notes.append(f"node {node} has no GPU: its CPUs {compact(cpus)} go to the replicas of node(s) "
                     f"{', '.join(map(str, to))}, "
                     + (f"the nearest with one (distance {near})" if dist else "no distances read: all alike"))
        for n, chunk in zip(reps, split_cores(sysfs, cpus, len(reps), notes, f"GPU-less node {node}", spare=True)):
            if chunk:
                shares[n][1].extend(chunk)
                shares[n][2].append(node)
    left = sorted(allowed - {c for cpus in cpus_of.values() for c in cpus})
    if left:
        notes.append(f"CPUs {compact(left)} are on no node in {sysfs}: left out")
    return [(node, sorted(cpus), spare) for node, cpus, spare in shares], notes


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
    ap.add_argument("--cpus", type=int, default=None,
                    help="the host's CPUs shared among replicas are 0..N-1 (default: this process's allowed CPUs)")
    ap.add_argument("--sysfs", default="/sys", help="where sysfs is (tests give a tree of their own)")
    ap.add_argument("--all", action="store_true", help="CPU devices (lavapipe) too")
    a = ap.parse_args()
    if a.cpus is not None and a.cpus < 1:
        ap.error(f"--cpus {a.cpus}: at least 1")
    found = devices(a.hdrpostd, a.all)
    if not found:
        sys.exit("replicas.py: no usable GPU (hdrpostd --list-devices); --all takes CPU devices too")
    considered = considered_cpus(a.cpus)
    numa, said = numa_shares(a.sysfs, found, considered)
    if numa is None:
        # Then usually no GPU's node is known (a VM, a kernel without NUMA, lavapipe): the split from before,
        # which a half-known topology would only make harder to predict, and the reason printed.
        print(f"replicas.py: {said}; CPUs {compact(considered)} split contiguously, ignoring NUMA")
        shares = [(None, chunk, []) for chunk in split(considered, len(found))]
    else:
        for note in said:
            print(f"replicas.py: {note}")
        shares = numa
    replicas = []
    for n, (index, uuid, pci, kind, name) in enumerate(found):
        port = a.base_port + n
        write(a.root, f"/etc/hdrpostd/hdrpostd@{n}.env",
              f"# Replica {n}: {name}, Vulkan device {index}, PCI {pci} (deploy/replicas.py). Read after\n"
              f"# /etc/hdrpostd/hdrpostd.env, whose token and settings it shares.\n"
              f"HDRPOST_DEVICE={uuid}\nHDRPOST_LISTEN=127.0.0.1:{port}\nHDRPOST_QUEUE_DEPTH={a.queue_depth}\n"
              f"HDRPOST_TRUSTED_PROXIES=127.0.0.1\n", 0o600)
        node, cpus, spare = shares[n]
        where = (f"NUMA node {node}'s, its GPU's" + "".join(f", and node {k}'s (no GPU)" for k in spare)
                 if node is not None else "a contiguous share, its GPU's NUMA node unknown")
        write(a.root, f"/etc/systemd/system/hdrpostd@{n}.service.d/cpus.conf",
              f"# Replica {n}'s share of the host's CPUs (deploy/replicas.py): {where}.\n"
              f"# The daemon sizes its threads by it.\n"
              f"[Service]\nCPUAffinity={compact(cpus)}\n")
        print(f"replicas.py: replica {n} ({name}, PCI {pci}): node {'?' if node is None else node}, "
              f"CPUs {compact(cpus)}")
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
