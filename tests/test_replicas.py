"""deploy/replicas.py's CPU shares (issue 37): each replica's CPUAffinity= from its GPU's NUMA node, on fake
sysfs trees, with a fake hdrpostd whose --list-devices prints the daemon's format (pipeline/gpu.c,
hp_gpu_list_devices). No GPU, no daemon, no root: a second or so.

- the replicas of a node split its CPUs in contiguous chunks of its cpulist ordered by core, in --list-devices'
  order (two nodes of two GPUs each; three GPUs on one node and one on the other; cores of two threads;
  cpulists of several ranges);
- a node without a GPU gives its CPUs to the replicas of the nearest node with one (its distance file), or to
  every replica when no distances are read;
- --cpus N keeps CPUs 0..N-1 of each node's list; a GPU's node left with none falls back to the plain split;
  without --cpus, the CPUs are this process's allowed ones (os.sched_getaffinity);
- any GPU's node unknown (numa_node -1, no sysfs tree, a CPU device without a PCI address) writes the plain
  contiguous split, as before this change, and says so.

Usage: test_replicas.py [SOURCE_ROOT]     (default: the repository holding this file)"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402
from harness import point  # noqa: E402

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "deploy", "replicas.py")


def fake_hdrpostd(tmp, gpus):
    """An executable that prints --list-devices' table for gpus [(pci, name)] (pci "-": a CPU device)."""
    rows = ["# index\tuuid\tpci_address\ttype\tusable\tname"]
    for i, (pci, name) in enumerate(gpus):
        kind = "CPU" if pci == "-" else "discrete GPU"
        rows.append(f"{i}\tGPU-{i:08x}-0000-0000-0000-000000000000\t{pci}\t{kind}\tusable\t{name}")
    table = os.path.join(tmp, "devices.tsv")
    with open(table, "w") as f:
        f.write("\n".join(rows) + "\n")
    exe = os.path.join(tmp, "hdrpostd")
    with open(exe, "w") as f:
        f.write(f'#!/bin/sh\n[ "$1" = --list-devices ] || exit 2\nexec cat "{table}"\n')
    os.chmod(exe, 0o755)
    return exe


def fake_sysfs(tmp, nodes, gpu_nodes, distances=None, online=True, siblings=None):
    """A sysfs tree: nodes {id: cpulist}, gpu_nodes {pci: numa_node text, None: no numa_node file},
    distances {id: "10 21"} (none: no distance files), online: write devices/system/node/online,
    siblings {cpu: thread_siblings_list} (none: no topology files)."""
    sysfs = os.path.join(tmp, "sys")
    for cpu, text in (siblings or {}).items():
        d = os.path.join(sysfs, "devices/system/cpu", f"cpu{cpu}", "topology")
        os.makedirs(d)
        with open(os.path.join(d, "thread_siblings_list"), "w") as f:
            f.write(text + "\n")
    for node, cpulist in nodes.items():
        d = os.path.join(sysfs, "devices/system/node", f"node{node}")
        os.makedirs(d)
        with open(os.path.join(d, "cpulist"), "w") as f:
            f.write(cpulist + "\n")
        if distances:
            with open(os.path.join(d, "distance"), "w") as f:
                f.write(distances[node] + "\n")
    if online and nodes:
        with open(os.path.join(sysfs, "devices/system/node/online"), "w") as f:
            f.write(",".join(str(n) for n in sorted(nodes)) + "\n")
    for pci, node in gpu_nodes.items():
        d = os.path.join(sysfs, "bus/pci/devices", pci)
        os.makedirs(d)
        if node is not None:
            with open(os.path.join(d, "numa_node"), "w") as f:
                f.write(f"{node}\n")
    return sysfs


def run(gpus, nodes=None, gpu_nodes=None, distances=None, online=True, cpus=None, sysfs=None, args=(),
        siblings=None):
    """replicas.py on a fresh fake host: (exit code, its output, [each replica's CPUAffinity= value],
    [each replica's cpus.conf])."""
    tmp = tempfile.mkdtemp(prefix="hdrpost-replicas-")
    try:
        exe = fake_hdrpostd(tmp, gpus)
        if sysfs is None:
            sysfs = fake_sysfs(tmp, nodes or {}, gpu_nodes or {}, distances, online, siblings)
        root = os.path.join(tmp, "root")
        argv = [sys.executable, SCRIPT, "--hdrpostd", exe, "--root", root, "--sysfs", sysfs, *args]
        if cpus is not None:
            argv += ["--cpus", str(cpus)]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        confs = []
        for n in range(len(gpus)):
            path = os.path.join(root, f"etc/systemd/system/hdrpostd@{n}.service.d/cpus.conf")
            confs.append(open(path).read() if os.path.exists(path) else "")
        shares = [(re.findall(r"^CPUAffinity=(.*)$", c, re.M) or [None])[0] for c in confs]
        return p.returncode, p.stdout + p.stderr, shares, confs
    finally:
        shutil.rmtree(tmp)


def expect(name, result, want, said=()):
    """A point: exit 0, the CPUAffinity= values want in replica order, and each of said in the output."""
    rc, out, shares, confs = result
    missing = [s for s in said if s not in out]
    return point(name, rc == 0 and shares == want and not missing,
                 f"exit {rc}; CPUAffinity= {shares}, want {want}; not said: {missing}\n{out}\n" + "".join(confs))


def the_plain_split(n, cpus):
    """What replicas.py wrote before it knew NUMA: CPUs 0..cpus-1 in n contiguous shares."""
    return [(f"{k * cpus // n}-{(k + 1) * cpus // n - 1}" if (k + 1) * cpus // n - 1 > k * cpus // n
             else f"{k * cpus // n}") for k in range(n)]


def main():
    if not os.path.isfile(SCRIPT):
        print(f"not ok 1 - {SCRIPT} exists\n1..1")
        return 1
    two_nodes = {0: "0-15", 1: "16-31"}

    # Two nodes of two GPUs each, listed node 1, node 0, node 0, node 1: a contiguous split by list order
    # would give replica 0 node 0's first CPUs and replica 1 half of each node.
    r = run([("0000:9b:00.0", "H200 a"), ("0000:19:00.0", "H200 b"), ("0000:3b:00.0", "H200 c"),
             ("0000:bb:00.0", "H200 d")], two_nodes,
            {"0000:9b:00.0": 1, "0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:bb:00.0": 1}, cpus=32)
    expect("2 nodes x 2 GPUs: each replica gets half of its GPU's node, the node's lower half to its first "
           "replica in --list-devices' order, and each replica's node and CPUs are printed",
           r, ["16-23", "0-7", "8-15", "24-31"],
           ["replica 0 (H200 a, PCI 0000:9b:00.0): node 1, CPUs 16-23", "replica 3 (H200 d, PCI 0000:bb:00.0): node 1"])
    point("and cpus.conf names the node in its comment", "NUMA node 1's, its GPU's" in r[3][0], r[3][0])
    point("and no node-less fallback is printed", "ignoring NUMA" not in r[1], r[1])

    # Three GPUs on node 0, one on node 1 (the one listed first).
    r = run([("0000:9b:00.0", "n1"), ("0000:19:00.0", "n0a"), ("0000:3b:00.0", "n0b"), ("0000:5d:00.0", "n0c")],
            two_nodes, {"0000:9b:00.0": 1, "0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0}, cpus=32)
    expect("3 GPUs on node 0 and 1 on node 1: node 0's 16 CPUs in chunks of 5, 5, 6; the lone replica has all of "
           "node 1", r, ["16-31", "0-4", "5-9", "10-15"])

    # Cores of two hardware threads, the second threads numbered after all the first (CPU c's sibling is c + 16
    # on node 0, c + 8 on node 1's 4 cores): a replica gets whole cores, both threads of each, never one
    # thread of a core whose other thread is another replica's.
    sib = {c: f"{c},{c + 16}" for c in range(8)} | {c + 16: f"{c},{c + 16}" for c in range(8)}
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:9b:00.0", "c")],
            {0: "0-7,16-23", 1: "8-15,24-31"}, {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:9b:00.0": 1},
            cpus=32, siblings=sib)
    expect("cores of two threads: node 0's 8 cores to its two replicas 4 whole cores each (0-3,16-19 and "
           "4-7,20-23); node 1, whose topology is unread, by its sorted list", r,
           ["0-3,16-19", "4-7,20-23", "8-15,24-31"])

    # Three replicas on 8 cores of two threads (CPU c's sibling is c + 8): cores split 2, 3, 3, never one core's
    # threads to two replicas, as a split of the 16 threads in threes would.
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c")], {0: "0-15"},
            {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0}, cpus=16,
            siblings={c: f"{c % 8},{c % 8 + 8}" for c in range(16)})
    expect("3 replicas on 8 cores of two threads: whole cores each (0-1,8-9; 2-4,10-12; 5-7,13-15)", r,
           ["0-1,8-9", "2-4,10-12", "5-7,13-15"])
    # Fewer cores than replicas: by thread, said.
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c")], {0: "0-3"},
            {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0}, cpus=4,
            siblings={c: f"{c % 2},{c % 2 + 2}" for c in range(4)})
    expect("3 replicas on 2 cores of two threads: split by thread in core order (0; 2; 1,3), said", r,
           ["0", "2", "1,3"],
           ["node 0 has 2 core(s) for 3 replicas: split by thread"])

    # A GPU-less node of 2 two-thread cores beside a node of 3 replicas: a whole core each to the first two,
    # none to the third (it has its own node's CPUs), never a core's threads to two replicas.
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c")], {0: "0-5", 1: "6-9"},
            {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0}, cpus=10,
            siblings={6: "6,8", 8: "6,8", 7: "7,9", 9: "7,9"})
    expect("a GPU-less node of 2 cores for 3 replicas: a whole core each to the first two, none to the third",
           r, ["0-1,6,8", "2-3,7,9", "4-5"])

    # Cpulists of several ranges, as a host numbering its second hardware threads after all the first writes
    # them; CPUs 21.. of --cpus 24 are on no node.
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c"), ("0000:9b:00.0", "d")],
            {0: "0-3,8-11,16", 1: "4-7,12-15,17-20"},
            {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0, "0000:9b:00.0": 1}, cpus=24)
    expect("cpulists of several ranges: node 0's 9 CPUs (0-3,8-11,16) in 3 chunks of its sorted list, written "
           "as compact ranges; node 1's whole list to its one replica; CPUs on no node said to be left out",
           r, ["0-2", "3,8-9", "10-11,16", "4-7,12-15,17-20"], ["CPUs 21-23 are on no node"])

    # An 8-CPU node with no GPU, beside one with two.
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b")], {0: "0-7", 1: "8-15"},
            {"0000:19:00.0": 0, "0000:3b:00.0": 0}, {0: "10 21", 1: "21 10"}, cpus=16)
    expect("a node without a GPU gives its CPUs to the replicas of the nearest node with one, split between "
           "them beside their own", r, ["0-3,8-11", "4-7,12-15"],
           ["node 1 has no GPU: its CPUs 8-15 go to the replicas of node(s) 0, the nearest with one (distance 21)"])
    point("and cpus.conf says which node's CPUs those are", "and node 1's (no GPU)" in r[3][1], r[3][1])

    # Sub-NUMA clusters: two nodes a socket, a GPU on one node of each (node 2's listed first). Node 1 is 11 from
    # node 0 and 21 from node 2; node 3 the other way round. No online file: the nodes are read from the folder.
    snc = {0: "0-7", 1: "8-15", 2: "16-23", 3: "24-31"}
    snc_dist = {0: "10 11 21 21", 1: "11 10 21 21", 2: "21 21 10 11", 3: "21 21 11 10"}
    snc_gpus = {"0000:9b:00.0": 2, "0000:19:00.0": 0}
    r = run([("0000:9b:00.0", "socket 1"), ("0000:19:00.0", "socket 0")], snc, snc_gpus, snc_dist, online=False,
            cpus=32)
    expect("sub-NUMA clusters: each GPU-less node's CPUs go to the replica on its own socket (distance 11), not "
           "across (21)", r, ["16-31", "0-15"])
    r = run([("0000:9b:00.0", "socket 1"), ("0000:19:00.0", "socket 0")], snc, snc_gpus, None, cpus=32)
    expect("without distance files, a GPU-less node's CPUs are split among every replica, in replica order",
           r, ["8-11,16-27", "0-7,12-15,28-31"], ["no distances read"])

    # More replicas than CPUs on a node: none may be empty (an empty CPUAffinity= is every CPU).
    r = run([("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c"), ("0000:9b:00.0", "d")],
            {0: "0-1", 1: "2-3"}, {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 0, "0000:9b:00.0": 1},
            cpus=4)
    expect("3 replicas on a node of 2 CPUs: each gets one, two share one, and the script says so",
           r, ["0", "0", "1", "2-3"], ["node 0 has 2 CPU(s) for 3 replicas"])

    # --cpus caps each node's list: 16 keeps the first hardware threads of a host numbering the second after.
    ht = {0: "0-7,16-23", 1: "8-15,24-31"}
    ht_gpus = {"0000:19:00.0": 0, "0000:9b:00.0": 1}
    r = run([("0000:19:00.0", "a"), ("0000:9b:00.0", "b")], ht, ht_gpus, cpus=16)
    expect("--cpus 16 keeps CPUs 0-15 of each node's list", r, ["0-7", "8-15"])
    r = run([("0000:19:00.0", "a"), ("0000:9b:00.0", "b")], ht, ht_gpus, cpus=8)
    expect("--cpus 8 leaves node 1's GPU no CPU: the plain split of 0-7, said", r, ["0-3", "4-7"],
           ["replica 1's node 1 has none of the CPUs considered", "split contiguously, ignoring NUMA"])

    # Without --cpus: this process's allowed CPUs (the script's child inherits the test's mask).
    allowed = sorted(os.sched_getaffinity(0))
    r = run([("0000:19:00.0", "a")], {0: "0-4095"}, {"0000:19:00.0": 0})
    want = harness_compact(allowed)
    expect(f"without --cpus the CPUs are this process's allowed ones ({want}), cut to the node's", r, [want])

    # Fallbacks: any node unknown gives the split of before, said in the output and the file.
    four = [("0000:19:00.0", "a"), ("0000:3b:00.0", "b"), ("0000:5d:00.0", "c"), ("0000:9b:00.0", "d")]
    r = run(four, two_nodes, {"0000:19:00.0": 0, "0000:3b:00.0": -1, "0000:5d:00.0": 1, "0000:9b:00.0": 1}, cpus=32)
    expect("one GPU's numa_node -1: the plain contiguous split of 0-31, with the reason printed",
           r, the_plain_split(4, 32),
           ["NUMA node unknown for replica 1 (b, PCI 0000:3b:00.0)", "reads -1", "ignoring NUMA"])
    point("and cpus.conf says the node is unknown", "NUMA node unknown" in r[3][1], r[3][1])
    r = run(four, two_nodes, {"0000:19:00.0": 0, "0000:3b:00.0": 0, "0000:5d:00.0": 1, "0000:9b:00.0": None},
            cpus=32)
    expect("a GPU without a numa_node file: the plain split", r, the_plain_split(4, 32), ["ignoring NUMA"])
    r = run(four, sysfs="/nonexistent/sys", cpus=30)
    expect("no sysfs tree at all: the plain split of --cpus 30, as before (7, 8, 7, 8)", r, the_plain_split(4, 30),
           ["/nonexistent/sys/bus/pci/devices/0000:19:00.0/numa_node", "ignoring NUMA"])
    r = run([("-", "llvmpipe (LLVM 15.0.6, 256 bits)")], two_nodes, {}, cpus=4, args=["--all"])
    expect("lavapipe under --all (no PCI address): CPUs 0-3 for --cpus 4, as haproxy_http expects",
           r, ["0-3"], ["no PCI address"])

    # What the script does to a bad cpulist: the plain split and the file named, never a traceback.
    r = run([("0000:19:00.0", "a"), ("0000:9b:00.0", "b")], {0: "0-7", 1: "15-8"},
            {"0000:19:00.0": 0, "0000:9b:00.0": 1}, cpus=16)
    expect("a cpulist it cannot read (15-8): the plain split, naming the file", r, ["0-7", "8-15"],
           ["node1/cpulist: bad cpulist range '15-8'"])

    print(f"1..{harness.count()}")
    return 1 if harness.failed() else 0


def harness_compact(cpus):
    """Sorted CPUs as ranges, written here independently of replicas.py's compact()."""
    runs = []
    for c in cpus:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


if __name__ == "__main__":
    sys.exit(main())
