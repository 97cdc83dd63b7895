#!/usr/bin/env bash
# The Debian packages a built binary needs at run time, one per line: those that own the shared libraries
# it links (ldd). The container's runtime stage (deploy/Dockerfile) installs exactly these, so no
# hand-kept list can drift from what the build linked. Vulkan drivers are not linked but loaded by the
# loader: the Dockerfile adds Mesa's (lavapipe) itself, and NVIDIA's come from the host through the NVIDIA
# container toolkit. Fails when a library belongs to no package (a local build would not be in the image).
set -euo pipefail
binary=${1:?usage: $0 BINARY}

owner() { # the package owning a library path, trying the names a merged /usr gives the same file
  local path=$1 real candidate
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path#/usr}" "/usr${path#/usr}" "${real#/usr}" "/usr${real#/usr}"; do
    if dpkg -S "$candidate" 2>/dev/null | awk -F': ' 'NR == 1 {print $1}' | grep .; then
      return 0
    fi
  done
  echo "runtime-packages: no package owns $path" >&2
  return 1
}

if ldd "$binary" | grep -q "not found"; then
  echo "runtime-packages: $binary links libraries this machine lacks:" >&2
  ldd "$binary" | grep "not found" >&2
  exit 1
fi
libs=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
[ -n "$libs" ] || { echo "runtime-packages: ldd found no shared library in $binary" >&2; exit 1; }
for lib in $libs; do
  owner "$lib"
done | cut -d: -f1 | sort -u
