#!/usr/bin/env python3
"""The exposure of a shot frame by frame, as hdrpost locks it (docs/CLIENT.md): an SVG line chart of the
adaptation luminance each frame is exposed by, from the DIR/exposure.json files of renders of one shot.

  plot_exposure.py OUT.svg LABEL=DIR/exposure.json [LABEL=DIR/exposure.json ...]

Each file adds its locked adaptation; the first also adds each frame's own log-average, the adaptation of
--exposure frame (the daemon's auto exposure). Standard library only: no plotting package is needed."""
import json
import math
import sys

COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    series = []
    for k, spec in enumerate(specs):
        label, _, path = spec.partition("=")
        with open(path) as f:
            frames = json.load(f)["frames"]
        if k == 0:
            series.append(("frame (each its own log-average)", [fr["log_average"] for fr in frames]))
        series.append((label, [fr["adaptation"] for fr in frames]))
    n = len(series[0][1])
    values = [v for _, s in series for v in s if v > 0]
    lo, hi = math.log2(min(values)), math.log2(max(values))
    lo, hi = math.floor(lo), math.ceil(hi) if hi > lo else lo + 1
    w, h, left, right, top, bottom = 720, 360, 70, 20, 40, 50

    def x(i):
        return left + (w - left - right) * i / max(n - 1, 1)

    def y(v):
        return top + (h - top - bottom) * (hi - math.log2(v)) / (hi - lo)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">Adaptation luminance per frame '
             f'(log scale): a light enters the shot from frame 8</text>']
    for e in range(int(lo), int(hi) + 1):
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(2 ** e):.1f}" y2="{y(2 ** e):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(2 ** e) + 4:.1f}" text-anchor="end">2^{e}</text>')
    for i in range(0, n, max(n // 12, 1)):
        parts.append(f'<text x="{x(i):.1f}" y="{h - bottom + 18}" text-anchor="middle">{i}</text>')
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 10}" text-anchor="middle">frame</text>')
    for k, (label, vals) in enumerate(series):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals) if v > 0)
        c = COLOURS[k % len(COLOURS)]
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>')
        parts.append(f'<rect x="{left + 10}" y="{top + 8 + 16 * k}" width="14" height="3" fill="{c}"/>'
                     f'<text x="{left + 30}" y="{top + 13 + 16 * k}">{label}</text>')
    parts.append("</svg>\n")
    with open(out, "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
