#!/usr/bin/env python3
"""The plots of docs/BENCHMARKS.md's end-to-end section, from bench_http.py --json (and, when given,
bench/peers/cpu_tools.py --json for the CPU tools' frames per second on the same host).

  plot_http.py HTTP.json OUT_DIR [--peers PEERS.json] [--label "H200, 2026-11-22"]

Writes OUT_DIR/http_throughput.png (frames per second against concurrent clients, per frame and output
format, the CPU tools as flat lines) and OUT_DIR/http_breakdown.png (where one 4K frame's time goes: the
p50 of each Server-Timing phase, one stacked bar per frame and output format). Needs matplotlib (Debian:
python3-matplotlib); run it where the results were copied, not on the GPU host."""
import argparse
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

PHASES = ["recv", "decode", "queue", "upload", "reduce", "dof", "tonemap", "download", "encode"]


def throughput_plot(result, peers, label, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = {}
    for row in result["throughput"]:
        series.setdefault((row["frame"], row["output"]), []).append((row["clients"], row["fps"]))
    for (frame, output), points in sorted(series.items()):
        points.sort()
        ax.plot([c for c, _ in points], [f for _, f in points], marker="o",
                label=f"hdrpostd, {frame.upper()} EXR -> {output.upper()}")
    shades = iter(["black", "dimgray", "darkgray"])
    for tool in (peers or {}).get("tools", []):  # cpu_tools.py --json: one process per core
        if tool.get("status") == "ok" and tool.get("fps"):
            ax.axhline(tool["fps"], linestyle="--", linewidth=1, color=next(shades, "gray"),
                       label=f"{tool['tool']}, {peers.get('procs', '?')} processes -> PNG")
    ax.set_xscale("log", base=2)
    clients = sorted({row["clients"] for row in result["throughput"]})
    ax.set_xticks(clients)
    ax.set_xticklabels([str(c) for c in clients])
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("frames per second (3840x2160)")
    ax.set_title(f"Throughput over HTTP, 4K half EXR in ({label})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def breakdown_plot(result, label, path):
    names, stacks = [], []
    for key, rows in sorted(result["latency"].items()):
        names.append(key.replace("zip", "ZIP").replace("piz", "PIZ"))
        med = {p: statistics.median([r[p] for r in rows if p in r]) if any(p in r for r in rows) else 0.0
               for p in PHASES + ["total"]}
        other = max(0.0, med["total"] - sum(med[p] for p in PHASES))
        stacks.append([med[p] for p in PHASES] + [other])
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(names) + 2))
    left = [0.0] * len(names)
    for i, phase in enumerate(PHASES + ["other"]):
        widths = [s[i] for s in stacks]
        if not any(widths):
            continue
        ax.barh(names, widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel("ms (p50 of each phase, one client)")
    ax.set_title(f"Where a 4K frame's time goes ({label})")
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("http_json")
    ap.add_argument("out_dir")
    ap.add_argument("--peers")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    with open(a.http_json) as f:
        result = json.load(f)
    peers = None
    if a.peers:
        with open(a.peers) as f:
            peers = json.load(f)
    os.makedirs(a.out_dir, exist_ok=True)
    label = a.label or result.get("date", "")
    throughput_plot(result, peers, label, os.path.join(a.out_dir, "http_throughput.png"))
    breakdown_plot(result, label, os.path.join(a.out_dir, "http_breakdown.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
