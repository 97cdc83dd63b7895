#!/usr/bin/env python3
"""A soak run of hdrpostd (tests/soak.py --out DIR) as an SVG: the daemon's resident memory (MiB) over time
above, the requests the clients completed over time below, the end of the warm-up marked on both.

  plot_soak.py DIR/soak.json OUT.svg

The title says the device, the clients and the duration, from the JSON. Standard library only: no plotting
package is needed (as tools/plot_exposure.py)."""
import json
import math
import sys

RSS_COLOUR, REQ_COLOUR, WARM_COLOUR = "#d62728", "#1f77b4", "#888"


def nice_step(span, ticks=6):
    """A step of 1, 2 or 5 times a power of ten giving about `ticks` grid lines over span."""
    raw = span / ticks if span > 0 else 1
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def panel(parts, ts, vs, colour, label, unit, top, height, w, left, right, t_max, warm_t, v_min0=False):
    """One line chart of vs over ts in the band [top, top + height]: grid, axis labels, the line."""
    lo, hi = (0 if v_min0 else min(vs)), max(vs)
    if hi <= lo:
        hi = lo + 1
    step = nice_step(hi - lo)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step

    def x(t):
        return left + (w - left - right) * t / t_max

    def y(v):
        return top + height * (hi - v) / (hi - lo)

    v = lo
    while v <= hi + step / 2:
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    parts.append(f'<text x="16" y="{top + height / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {top + height / 2:.1f})">{label} ({unit})</text>')
    if warm_t is not None:
        parts.append(f'<line x1="{x(warm_t):.1f}" x2="{x(warm_t):.1f}" y1="{top}" y2="{top + height}" '
                     f'stroke="{WARM_COLOUR}" stroke-dasharray="4,3"/>')
    pts = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(ts, vs))
    parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>')
    return x


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_soak.py DIR/soak.json OUT.svg")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    samples = [s for s in doc["samples"] if s.get("rss_kib") is not None]
    if not samples:
        sys.exit("plot_soak.py: no samples with a resident memory in " + sys.argv[1])
    ts = [s["t"] for s in samples]
    rss = [s["rss_kib"] / 1024 for s in samples]
    reqs = [s["requests"] for s in samples]
    t_max = max(ts) if max(ts) > 0 else 1
    seconds = doc.get("seconds", t_max)
    warm_t = doc.get("warmup_fraction", 0.2) * seconds
    duration = f"{seconds / 60:g} min" if seconds >= 120 else f"{seconds:g} s"
    totals = doc.get("totals", {})

    w, left, right, top = 760, 70, 20, 50
    band, gap, bottom = 200, 50, 50
    h = top + band + gap + band + bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">hdrpostd soak: {doc.get("device", "?")}, '
             f'{doc.get("clients", "?")} clients, {duration}</text>']
    rss_note = totals.get("rss_kib", {})
    sub = [f"{totals.get('requests', reqs[-1])} requests ({totals.get('per_second', 0):g}/s)"]
    if rss_note.get("growth") is not None:
        sub.append(f"RSS growth after warm-up {rss_note['growth'] / 1024:+.1f} MiB "
                   f"(bound {doc.get('rss_growth_bound_mib', '?')} MiB)")
    sub.append(f"seed {doc.get('seed', '?')}")
    parts.append(f'<text x="{w / 2}" y="38" text-anchor="middle" fill="#555">{"; ".join(sub)}</text>')

    x = panel(parts, ts, rss, RSS_COLOUR, "resident memory", "MiB", top, band, w, left, right, t_max, warm_t)
    panel(parts, ts, reqs, REQ_COLOUR, "requests completed", "count", top + band + gap, band, w, left, right, t_max,
          warm_t, v_min0=True)
    step = nice_step(t_max, 10)
    t = 0.0
    while t <= t_max + 1e-9:
        parts.append(f'<text x="{x(t):.1f}" y="{top + 2 * band + gap + 18}" text-anchor="middle">{t:g}</text>')
        t += step
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 10}" text-anchor="middle">seconds since the load '
                 f'began (dashed: end of the warm-up)</text>')
    parts.append("</svg>\n")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
