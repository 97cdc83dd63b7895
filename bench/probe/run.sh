#!/usr/bin/env bash
# On the GPU host (it has the CUDA toolkit: /usr/local/cuda): builds inflate_probe.cu, runs it on each FRAME
# with one copy and 16 copies of its chunks (input in device memory, then in host memory), and profiles one
# copy and 16 with Nsight Compute: the warps' stall reasons, the scheduler's issue, and the stalls by SASS
# instruction. Frames: ZIP EXRs (tools/make_frame writes them). Results under OUTDIR.
#   bench/probe/run.sh OUTDIR FRAME.exr [FRAME.exr ...]
set -euo pipefail
out=$1
shift
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
"$cuda/bin/nvcc" -O3 -arch=native -lineinfo -o "$out/inflate_probe" "$(dirname "$0")/inflate_probe.cu" -lz
"$cuda/bin/cuobjdump" -sass "$out/inflate_probe" > "$out/sass.txt"
for f in "$@"; do
    for copies in 1 16; do
        "$out/inflate_probe" "$f" $copies
        "$out/inflate_probe" "$f" $copies host
    done
done | tee "$out/times.txt"
first=$1
for copies in 1 16; do
    "$cuda/bin/ncu" --set full --import-source yes -k inflate_chunks -s 1 -c 1 -f -o "$out/probe$copies" \
        "$out/inflate_probe" "$first" $copies > "$out/ncu$copies.log" 2>&1
    "$cuda/bin/ncu" -i "$out/probe$copies.ncu-rep" --page details --print-details all > "$out/details$copies.txt"
    "$cuda/bin/ncu" -i "$out/probe$copies.ncu-rep" --page source --csv --print-source sass > "$out/source$copies.csv"
done
