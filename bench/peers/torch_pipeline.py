#!/usr/bin/env python3
"""The PyTorch peer (issue 6): hdrpostd's default look written in PyTorch as a capable user would, to time
the same stages on the same GPU, eager and with torch.compile.

Stages, as DECISIONS.md 2-7 and pipeline/cpu_tone.c define them (the constants are read from
shaders/include/hp_shared.h, the one place they live):
  reduce   luminance (Rec.709 row, negatives clamped), finite mask, log-average exp(mean(ln(1e-5 + Y))),
           min, max, mean, the 256-bin log2 histogram over [-16, 16]
  tone     exposure (key 0.18 / log-average), Yxy in and out, reinhard_extended on Y (white = the exposed
           max), the gamut fold of tonemap.comp, dynamic local gamma per channel (Kwon et al.), 8-bit
           quantization (no dither)
  dof      a simple CoC-blended blur: thin-lens CoC from a depth ramp, one separable Gaussian of the
           largest radius, each pixel mixed by its CoC (the issue's "simple CoC-blended blur", not
           hdrpostd's gather with near and far fields)

  torch_pipeline.py --check FRAME.pfm CPU_RENDER   # correctness, any device: against tools/cpu_render
  torch_pipeline.py --bench [--runs N]             # GPU times per stage, eager and compiled, 1080p/4K/8K

--check decodes a PFM (a format simple enough to read here), runs the stages in float64 and compares the
statistics (log-average 1e-4, counts exact) and the 8-bit image (at most one level off, 99.9% equal) with
cpu_render's output for `output.dither=false`. --bench times with CUDA events, median of --runs, after a
warm-up, on random log-normal frames like bench_tone's. Needs PyTorch (Debian: python3-torch, CPU only,
1.13: eager only; torch.compile needs 2.x). The GPU host of docs/BENCHMARKS.md has no PyTorch and no
registry: this runs where PyTorch with CUDA is installed."""
import argparse
import json
import math
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def constants():
    """Every numeric #define of shaders/include/hp_shared.h."""
    out = {}
    with open(os.path.join(ROOT, "shaders", "include", "hp_shared.h")) as f:
        for m in re.finditer(r"#define\s+(HP_\w+)\s+\(?([-+0-9.eE]+)[fu]?\)?\s*$", f.read(), re.M):
            out[m.group(1)] = float(m.group(2))
    return out


K = constants()
LUMA = (K["HP_LUMA_R"], K["HP_LUMA_G"], K["HP_LUMA_B"])
LUMA32 = tuple(struct.unpack("f", struct.pack("f", v))[0] for v in LUMA)  # as the shader's float constants
RGB2XYZ = [[K[f"HP_RGB2XYZ_{r}{c}"] for c in range(3)] for r in range(3)]
XYZ2RGB = [[K[f"HP_XYZ2RGB_{r}{c}"] for c in range(3)] for r in range(3)]


def reduce_stats(rgb):
    """rgb: (H, W, 3). The statistics of DECISIONS.md 2-4. Luminance in float32 with the shader's three
    roundings in its order (pipeline/cpu_reduce.c), sums in float64; histogram edges as reduce.c makes
    them: bin k >= 1 when 2^(-16 + (k - 1) 32 / 254) <= Y, in float32."""
    c = rgb.float()
    finite = torch.isfinite(c).all(dim=-1)
    c = torch.where(c > 0, c, torch.zeros_like(c))
    y = (LUMA32[0] * c[..., 0] + LUMA32[1] * c[..., 1]) + LUMA32[2] * c[..., 2]
    finite = finite & torch.isfinite(y)
    y = torch.where(finite, y, torch.zeros_like(y))
    yd = y.double()
    n = finite.sum()
    logs = torch.where(finite, torch.log(1e-5 + yd), torch.zeros_like(yd))
    log_avg = torch.exp(logs.sum() / n.clamp(min=1))
    big = torch.tensor(float("inf"), dtype=torch.float64, device=y.device)
    ymin = torch.where(finite, yd, big).min()
    ymax = torch.where(finite, yd, -big).max()
    mean = yd.sum() / n.clamp(min=1)
    edges = torch.tensor([2.0 ** (-16 + (k - 1) * 32 / 254) for k in range(1, 256)], dtype=torch.float32,
                         device=y.device)
    hist = torch.bincount(torch.bucketize(y[finite], edges, right=True), minlength=256)
    return {"finite": n, "log_average": log_avg, "min": ymin, "max": ymax, "mean": mean, "histogram": hist}


def tone(rgb, stats, key=0.18):
    """Exposure, Yxy, reinhard_extended, the gamut fold, local gamma, 8-bit quantization."""
    finite = torch.isfinite(rgb).all(dim=-1, keepdim=True)
    scale = key / stats["log_average"]
    white = torch.clamp(scale * stats["max"], min=1e-6)
    x = torch.where(finite, rgb.clamp(min=0), torch.zeros_like(rgb)) * scale
    m = torch.tensor(RGB2XYZ, dtype=rgb.dtype, device=rgb.device)
    xyz = x @ m.T
    s = xyz.sum(-1, keepdim=True)
    Y = xyz[..., 1:2]
    cx = torch.where(s > 0, xyz[..., 0:1] / s, torch.full_like(s, K["HP_D65_X"]))
    cy = torch.where(s > 0, Y / s, torch.full_like(s, K["HP_D65_Y"]))
    L = (Y * (1 + Y / (white * white)) / (1 + Y)).clamp(0, 1)
    k = L / cy
    xyz2 = torch.cat([cx * k, L, (1 - cx - cy) * k], dim=-1)
    tm = (xyz2 @ torch.tensor(XYZ2RGB, dtype=rgb.dtype, device=rgb.device).T).clamp(min=0)
    tm = torch.where(L > 0, tm, torch.zeros_like(tm))
    luma = torch.tensor(LUMA, dtype=rgb.dtype, device=rgb.device)
    lum = (tm * luma).sum(-1, keepdim=True).clamp(max=1)
    peak = tm.max(-1, keepdim=True).values
    folded = lum + (tm - lum) * ((1 - lum) / (peak - lum))
    tm = torch.where(peak > 1, folded, tm)
    tm = torch.where(finite, tm, torch.zeros_like(tm))
    lum = torch.where(finite, lum, torch.zeros_like(lum))
    g = K["HP_KWON_A"] + K["HP_KWON_B"] * torch.log(lum + K["HP_KWON_C"])
    v = tm ** g
    return torch.floor(v * 255 + 0.5).clamp(0, 255).to(torch.uint8)


def coc_blur(rgb, depth, focus_m=3.0, focal_mm=50.0, f_stop=1.4, sensor_mm=36.0, max_coc=32):
    """The issue's simple CoC-blended blur: |thin-lens CoC| in pixels, one separable Gaussian of radius
    max_coc, each pixel mixed by CoC / max_coc."""
    w = rgb.shape[1]
    f = focal_mm / 1000.0
    coc_m = (f * f / (f_stop * (focus_m - f))) * (depth - focus_m).abs() / depth
    coc = (coc_m / 2 * w / (sensor_mm / 1000.0)).clamp(max=max_coc)
    taps = torch.arange(-max_coc, max_coc + 1, dtype=rgb.dtype, device=rgb.device)
    kern = torch.exp(-taps * taps * (2.0 / (max_coc * max_coc)))
    kern = (kern / kern.sum()).view(1, 1, 1, -1)
    x = rgb.permute(2, 0, 1).unsqueeze(1)  # (3, 1, H, W)
    x = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (max_coc, max_coc, 0, 0), mode="replicate"), kern)
    x = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (0, 0, max_coc, max_coc), mode="replicate"),
                                   kern.transpose(-1, -2))
    blurred = x.squeeze(1).permute(1, 2, 0)
    a = (coc / max_coc).unsqueeze(-1)
    return rgb + (blurred - rgb) * a


def read_pfm(path):
    with open(path, "rb") as f:
        kind = f.readline().strip()
        w, h = (int(v) for v in f.readline().split())
        scale = float(f.readline())
        data = f.read()
    ch = 3 if kind == b"PF" else 1
    fmt = ("<" if scale < 0 else ">") + "f" * (w * h * ch)
    t = torch.tensor(struct.unpack(fmt, data[:4 * w * h * ch]), dtype=torch.float64).view(h, w, ch)
    t = t.flip(0)  # PFM rows go bottom to top
    return t.expand(h, w, 3).clone() if ch == 1 else t


def check(frame, cpu_render):
    rgb = read_pfm(frame)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ref.rgba")
        proc = subprocess.run([cpu_render, frame, json.dumps({"output": {"dither": False}}), out],
                              capture_output=True, check=True, text=True)
        ref = json.loads(proc.stdout)
        with open(out, "rb") as f:
            ref_img = torch.tensor(list(f.read()), dtype=torch.uint8).view(rgb.shape[0], rgb.shape[1], 4)
    st = reduce_stats(rgb)
    img = tone(rgb, st)
    ok_stats = (int(st["finite"]) == ref["finite_pixels"]
                and all(abs(float(st[k]) - ref[k]) <= 1e-4 * max(abs(ref[k]), 1e-30)
                        for k in ("log_average", "mean", "min", "max")))
    hist_diff = int((st["histogram"] - torch.tensor(ref["histogram"])).abs().sum())
    diff = (img.int() - ref_img[..., :3].int()).abs()
    same = float((diff == 0).float().mean())
    worst = int(diff.max())
    print(f"statistics against cpu_render: {'ok' if ok_stats else 'DIFFER'} (log_average {float(st['log_average']):.9g} "
          f"vs {ref['log_average']:.9g}); histogram counts off by {hist_diff} in all")
    print(f"8-bit image: {same * 100:.3f}% identical, worst {worst} level(s)")
    good = ok_stats and hist_diff == 0 and same >= 0.999 and worst <= 1
    print("check:", "ok" if good else "FAILED")
    return 0 if good else 1


def bench(runs):
    if not torch.cuda.is_available():
        print("no CUDA device: --bench times GPU stages only", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}, {runs} runs, median ms (CUDA events)\n")
    print("| size | input | mode | reduce | tone | tone + CoC blur |\n|---|---|---|---|---|---|")
    modes = [("eager", lambda f: f)]
    if hasattr(torch, "compile"):
        modes.append(("compiled", torch.compile))
    for name, (w, h) in (("1080p", (1920, 1080)), ("4K", (3840, 2160)), ("8K", (7680, 4320))):
        for dtype in (torch.float16, torch.float32):
            g = torch.Generator(device=dev).manual_seed(1)
            rgb = torch.exp(torch.randn(h, w, 3, device=dev, generator=g) * 2.0 - 1.4).to(dtype)
            depth = torch.linspace(0.7, 50.0, w, device=dev, dtype=torch.float32).expand(h, w)
            for mode, wrap in modes:
                f_reduce = wrap(lambda x: reduce_stats(x.float()))
                f_tone = wrap(lambda x, s: tone(x.float(), s))
                f_dof = wrap(lambda x, d, s: tone(coc_blur(x.float() * (0.18 / s["log_average"]), d), s))
                times = {"reduce": [], "tone": [], "dof": []}
                for r in range(runs + 3):
                    for stage in times:
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record()
                        if stage == "reduce":
                            st = f_reduce(rgb)
                        elif stage == "tone":
                            f_tone(rgb, st)
                        else:
                            f_dof(rgb, depth, st)
                        b.record()
                        torch.cuda.synchronize()
                        if r >= 3:
                            times[stage].append(a.elapsed_time(b))
                med = {k: statistics.median(v) for k, v in times.items()}
                print(f"| {name} | {'fp16' if dtype == torch.float16 else 'fp32'} | {mode} | {med['reduce']:.3f} | "
                      f"{med['tone']:.3f} | {med['dof']:.3f} |", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", nargs=2, metavar=("FRAME_PFM", "CPU_RENDER"))
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--runs", type=int, default=100)
    a = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    if a.check:
        return check(*a.check)
    if a.bench:
        return bench(a.runs)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
