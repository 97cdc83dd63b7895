#!/usr/bin/env bash
# The container image's hdrpostd on a host with NVIDIA's driver, as the NVIDIA container toolkit would run it,
# without a container engine: `deploy/image.sh gpu-bundle DIR` copies the image's binary and the image's own
# libraries (glibc and its loader, the Vulkan loader, GLVND and Xlib) into DIR, with this script as DIR/run.sh.
#
#   bash DIR/run.sh            (writes what it saw into $OUT, or DIR/out)
#
# The image's libraries run on the image's glibc (its ld.so runs the binary), the host contributes only what
# the toolkit mounts for NVIDIA_DRIVER_CAPABILITIES=compute,graphics,utility: the driver's libraries
# (libnvidia-*, libGLX_nvidia, libEGL_nvidia, libcuda, NVML) and its Vulkan ICD JSON. The daemon starts on
# loopback with HDRPOST_DEVICE=NVIDIA (as the Kubernetes overlay sets it), and the script prints the device it
# chose (GET /v1/gpu), renders a frame, reads /metrics, and stops it with SIGTERM. Needs python3 (no curl).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
work=$(mktemp -d /tmp/hdrpostd-gpu.XXXXXX)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -KILL "$daemon" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
exec > >(tee "$out/run.txt") 2>&1

echo "== host"
uname -srm
grep PRETTY_NAME /etc/os-release || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "(no nvidia-smi)"

# --- What the toolkit mounts -------------------------------------------------------------------------------
echo "== the host driver's files, as the toolkit mounts them for compute,graphics,utility"
mkdir -p "$work/driver" "$work/icd.d" "$work/cache" "$work/home"
ldconfig -p | awk '/x86-64/ && $1 ~ /^(libnvidia-|libGLX_nvidia\.|libEGL_nvidia\.|libGLESv[12].*_nvidia\.|libcuda\.|libcudadebugger\.|libnvoptix\.|libnvcuvid\.|libnvidia-encode)/ {print $NF}' \
  | sort -u > "$work/driver.list"
while read -r lib; do ln -sf "$lib" "$work/driver/$(basename "$lib")"; done < "$work/driver.list"
wc -l < "$work/driver.list" | sed 's/$/ libraries/'
cp "$work/driver.list" "$out/driver-libraries.txt"
icd=""
for candidate in /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
                 /etc/vulkan/icd.d/nvidia_icd.x86_64.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json; do
  if [ -f "$candidate" ]; then icd=$candidate; break; fi
done
if [ -z "$icd" ]; then
  echo "no NVIDIA Vulkan ICD JSON under /etc/vulkan/icd.d or /usr/share/vulkan/icd.d: the toolkit would mount none"
  echo "(a compute-only driver package has no Vulkan; the daemon would fail with HDRPOST_DEVICE=NVIDIA)"
  exit 1
fi
echo "ICD: $icd"
cat "$icd"
cp "$icd" "$work/icd.d/nvidia_icd.json"   # the toolkit mounts it at /etc/vulkan/icd.d/nvidia_icd.json

loader=$here/lib/ld-linux-x86-64.so.2
libpath=$here/lib:$work/driver
# What each library the driver's Vulkan ICD needs resolves to: the image's (lib/), the driver's, or the host's
# (which the container would not have: the toolkit mounts only NVIDIA's files).
icd_lib=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ICD"]["library_path"])' "$icd")
echo "== what the ICD library ($icd_lib) resolves to, on the image's libraries"
case "$icd_lib" in /*) icd_path=$icd_lib ;; *) icd_path=$work/driver/$icd_lib ;; esac
"$loader" --library-path "$libpath" --list "$icd_path" > "$out/icd-ldd.txt" 2>&1 || true
cat "$out/icd-ldd.txt"
if grep -v -e "$here/lib" -e "$work/driver" -e 'linux-vdso' -e "^$icd_path" "$out/icd-ldd.txt" | grep -q '=>'; then
  echo "NOTE: the lines above that point outside lib/ and the driver's files are libraries the image lacks"
fi

# --- The daemon ----------------------------------------------------------------------------------------------
read -r port probe < <(python3 -c '
import socket
ports = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); s.close()
print(*ports)')
echo "== hdrpostd from the image on 127.0.0.1:$port (probes on $probe), HDRPOST_DEVICE=NVIDIA"
env -i PATH=/usr/bin:/bin HOME="$work/home" \
  VK_ICD_FILENAMES="$work/icd.d/nvidia_icd.json" VK_LOADER_DEBUG=error,warn \
  HDRPOST_LISTEN="127.0.0.1:$port" HDRPOST_PROBE_LISTEN="127.0.0.1:$probe" HDRPOST_DEVICE=NVIDIA \
  HDRPOST_PIPELINE_CACHE="$work/cache/pipeline.cache" HDRPOST_LOG_LEVEL=info \
  "$loader" --library-path "$libpath" "$here/hdrpostd" > "$out/daemon.log" 2>&1 &
daemon=$!

python3 - "$port" "$probe" "$here/frame.exr" "$out" <<'PY'
import json, sys, time, urllib.request, urllib.error
port, probe, frame, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
http = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def call(p, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{p}{path}", data=body, method="POST" if body else "GET")
    try:
        with http.open(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return 0, str(e).encode()

t0 = time.monotonic()
status = 0
while time.monotonic() - t0 < 180:
    status, _ = call(probe, "/readyz")
    if status == 200:
        break
    time.sleep(0.5)
print(f"/readyz: {status} after {time.monotonic() - t0:.1f} s")
status, body = call(port, "/v1/gpu")
open(f"{out}/gpu.json", "wb").write(body)
try:
    gpu = json.loads(body)
    print(f"device chosen: {gpu.get('device')} (vendor {gpu.get('vendor')}, driver {gpu.get('driver')} "
          f"{gpu.get('driver_info')}, Vulkan {gpu.get('vulkan')})")
    print(json.dumps(gpu, indent=1))
except ValueError:
    print(f"/v1/gpu: {status} {body[:300]!r}")
t1 = time.monotonic()
status, body = call(port, "/v1/render?output.format=png", open(frame, "rb").read())
open(f"{out}/frame.png", "wb").write(body)
print(f"render (frame.exr -> PNG): {status}, {len(body)} bytes, {1000 * (time.monotonic() - t1):.0f} ms over HTTP")
status, body = call(port, "/metrics")
open(f"{out}/metrics.txt", "wb").write(body)
print(f"/metrics: {status}, {len(body.splitlines())} lines")
PY

kill -TERM "$daemon" 2>/dev/null || true
rc=0
wait "$daemon" || rc=$?
daemon=""
echo "exit after SIGTERM: $rc"
ls -la "$work/cache" | sed 's/^/pipeline cache: /'
echo "== daemon log"
cat "$out/daemon.log"
