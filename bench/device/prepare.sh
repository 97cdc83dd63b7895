#!/usr/bin/env bash
# Gathers, on this (Debian 12) build machine, the shared libraries that hdrpostd's binaries load at run
# time, so that a build can run on a bare GPU host: one with the NVIDIA driver but no Vulkan loader, none
# of our libraries and no package mirror. The GPU host runs Ubuntu 24.04 (glibc 2.39), which is newer than
# Debian 12's, so Debian's packages of the same libraries work there once they travel with the build.
#
# docs/BENCHMARKS.md runs it once, from the project's root, before any benchmark on the GPU host:
#
#     bench/device/prepare.sh             # writes .devdeps/ (git ignores it; about 20 MB)
#
# and then begins every command on the GPU host, in a copy of the root holding .devdeps/ and the build
# folder, with
#
#     source .devdeps/enter.sh && ./build/bench/bench_reduce --runs 100
#
# What it writes (DIR is .devdeps unless given as the only argument):
#   DIR/loader/*.deb  the Vulkan and GL loaders; enter.sh unpacks them into / (the GPU host is a throw-away
#                     machine, and the loader must sit where the NVIDIA driver's manifest expects it);
#   DIR/libs/*.deb    the daemon's, the benchmarks' and the peers' runtime libraries (libmicrohttpd, jansson,
#                     libwebp, OpenEXR/Imath, libspng, libdeflate, turbojpeg, OpenColorIO 2.1 and what it
#                     loads, libavif with its AV1 codecs, lcms2), vulkan-tools (vulkaninfo), the validation
#                     layers and HAProxy for the load-balancer runs; enter.sh unpacks these into a private
#                     prefix, /tmp/devdeps, never into / (bench/peers/prepare_peers.sh's enter.sh looks
#                     for that prefix);
#   DIR/enter.sh      sourced on the GPU host: unpacks both, points LD_LIBRARY_PATH, PATH and the validation
#                     layer's path at the prefix, and names the NVIDIA driver's Vulkan manifest.
# A package that this Debian release does not have is reported and skipped, not fatal. What goes to the
# GPU host is 64 MiB at most: carry .devdeps, the binaries and the data a run reads, not a whole build tree.
set -euo pipefail

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
dir=${1:-.devdeps}
mkdir -p "$dir/loader" "$dir/libs"

loader_packages=(libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libgles2 libopengl0)
runtime_packages=(
    # the daemon: HTTP, JSON, decoders and encoders
    libmicrohttpd12 libjansson4 libwebp7 libwebpmux3 libwebpdemux2 libopenexr-3-1-30 libimath-3-1-29
    libspng0 libdeflate0 libturbojpeg0 libjpeg62-turbo
    # studio colour: OpenColorIO and what it loads
    libopencolorio2.1 libyaml-cpp0.7 libpystring0 libexpat1 liblcms2-2
    # AVIF and its AV1 codecs
    libavif15 libaom3 libdav1d6 libgav1-1 librav1e0 libsvtav1enc1 libyuv0 libabsl20220623
    # vulkaninfo and the validation layers, with what vulkaninfo loads
    vulkan-tools vulkan-validationlayers libwayland-client0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
    # HAProxy for the load-balancer benchmarks
    haproxy liblua5.3-0 libpcre2-8-0 libopentracing-c-wrapper0 libopentracing1
)

# apt-get download needs package lists; fetch them only where there are none yet.
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
    apt-get update -q
fi

fetch() {  # fetch DEST PACKAGE...: each package on its own, so one missing name skips only itself
    local dest=$1; shift
    local p
    for p in "$@"; do
        if ! (cd "$dest" && apt-get download -q "$p" >/dev/null 2>&1); then
            echo "prepare: skipped $p (not in this release)" >&2
        fi
    done
}
fetch "$dir/loader" "${loader_packages[@]}"
fetch "$dir/libs" "${runtime_packages[@]}"

cat > "$dir/enter.sh" <<'ENTER'
# Sourced at the start of each command on the GPU host (written by bench/device/prepare.sh).
devdeps=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for deb in "$devdeps"/loader/*.deb; do dpkg -x "$deb" /; done
ldconfig
mkdir -p /tmp/devdeps
for deb in "$devdeps"/libs/*.deb; do dpkg -x "$deb" /tmp/devdeps; done
export LD_LIBRARY_PATH=/tmp/devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/tmp/devdeps/usr/bin:/tmp/devdeps/usr/sbin:$PATH
export VK_ADD_LAYER_PATH=/tmp/devdeps/usr/share/vulkan/explicit_layer.d
# Where the NVIDIA driver's manifest is not in the loader's search path, name it.
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES=$nvidia_icd; fi
true
ENTER

echo "prepare: $dir holds $(du -sh "$dir" | cut -f1) ($(ls "$dir"/loader | wc -l) loader and $(ls "$dir"/libs | wc -l) library packages)"
