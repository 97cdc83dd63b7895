#!/usr/bin/env bash
# deploy/Dockerfile built and run for real, with buildah, as root (CI, or any Debian 12 machine without Docker):
#   deploy/image.sh build                   the image localhost/hdrpostd:ci from deploy/Dockerfile, unchanged
#   deploy/image.sh smoke [HOST_HDRPOSTD]   run it as the nvidia overlay's pod would, on lavapipe and loopback
#   deploy/image.sh test  [HOST_HDRPOSTD]   both (tests/meson.build's container_image)
#   deploy/image.sh gpu-bundle [DIR]        the image's binary and libraries for a GPU host (DIR/run.sh)
# Each check prints a TAP line ('ok N - ...', then '1..N'); buildah's own output goes to stderr.
# HOST_HDRPOSTD (default build/daemon/hdrpostd): a build of the same sources on this machine, whose render
# the image's must equal. HDRPOST_IMAGE_OUT=DIR keeps the smoke's daemon log, renders and package list there.
#
# Where no registry is reachable (CI), the Dockerfile's bases (debian:12, debian:12-slim) are made from
# Debian's packages with mmdebstrap and stored under the names the FROM lines use, so the same Dockerfile
# builds here and from the real images elsewhere. The tarball is kept in $HDRPOST_IMAGE_CACHE
# (/var/cache/hdrpostd-image) for a week when that directory can be written; nothing requires it.
#
# Why the smoke runs the daemon with 'buildah run --isolation chroot' in the background: that isolation
# shares the host's PID and network namespaces, so the daemon is reachable on 127.0.0.1 and its PID is a
# plain descendant of buildah's. buildah does not pass SIGTERM on (it kills its child), so the drain is
# started by signalling the daemon's own PID, and buildah exits with the daemon's status.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=${1:-}
case "$mode" in
  build|smoke|test|gpu-bundle) shift ;;
  *) echo "usage: $0 build | smoke [HOST_HDRPOSTD] | test [HOST_HDRPOSTD] | gpu-bundle [DIR]" >&2; exit 2 ;;
esac

tag=${HDRPOST_IMAGE_TAG:-localhost/hdrpostd:ci}
cache_dir=${HDRPOST_IMAGE_CACHE:-/var/cache/hdrpostd-image}
suite=bookworm                       # Debian 12, what the Dockerfile's FROM lines name
mirrors=("deb http://deb.debian.org/debian $suite main"
         "deb http://deb.debian.org/debian $suite-updates main"
         "deb http://deb.debian.org/debian-security $suite-security main")
# Native overlay as root: layers cost no copy. vfs (a full copy per layer) where the kernel has no overlay.
if [ -z "${STORAGE_DRIVER:-}" ]; then
  if grep -qw overlay /proc/filesystems; then export STORAGE_DRIVER=overlay; else export STORAGE_DRIVER=vfs; fi
fi

# --- TAP and clean-up ------------------------------------------------------------------------------------
n=0
failed=0
point() { # point OK|FAIL DESCRIPTION [DETAIL...]: one TAP line; the detail as diagnostics when it failed
  local result=$1 name=$2
  shift 2
  n=$((n + 1))
  if [ "$result" = OK ]; then
    echo "ok $n - $name"
  else
    failed=$((failed + 1))
    echo "not ok $n - $name"
    local line
    for line in "$@"; do printf '%s\n' "$line" | tail -n 40 | sed 's/^/# /'; done
  fi
}
note() { echo "# $*"; }
log() { echo "image: $*" >&2; }
die() { echo "image: $*" >&2; exit 1; }
# A container's root, checked where the caller stands: do_build runs inside `if`, where bash ignores set -e
# for everything it calls, so an empty path from a failed `buildah mount` would otherwise send the writes
# below into the host's own /etc and /usr. Use as: mnt=$(buildah mount "$c") && root_ok "$mnt" || die ...
root_ok() { [ -n "$1" ] && [ "$1" != / ] && [ -d "$1" ]; }

containers=()      # working containers to remove on exit (removing one unmounts it)
pids=()            # processes started here, killed on exit (the daemon first: buildah leaves it behind)
tmp=$(mktemp -d /tmp/hdrpostd-image.XXXXXX)
cleanup() {
  local rc=$? pid c
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for c in "${containers[@]}"; do
    [ -z "$c" ] || buildah rm "$c" >/dev/null 2>&1 || log "could not remove the working container $c"
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need_tools() {
  [ "$(id -u)" = 0 ] || die "run as root (buildah's chroot isolation and the mounts need it)"
  local t missing=()
  for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]} (deploy/debian.sh test installs them)"
}

# new_container IMAGE NAME: a working container, in $ctr, removed on exit. Not echoed: called in a command
# substitution, its subshell would add it to a list of containers that the exit never sees.
new_container() {
  ctr=$(buildah from --pull=never --name "$2-$$" "$1")
  containers+=("$ctr")
}

# --- The bases ---------------------------------------------------------------------------------------------
# On bases made here: a real pulled image is told apart, and a base made by an older recipe is made again.
made_label=org.hdrpostd.base-made-by
made_by="deploy/image.sh: mmdebstrap $suite minbase, official apt settings, recipe 2"

image_age_days() { # days since the image was created, or nothing when there is no such image
  local created
  created=$(buildah inspect --type image --format '{{.OCIv1.Created}}' "$1" 2>/dev/null) || return 0
  echo $(( ($(date +%s) - $(date -d "${created%% [A-Z]*}" +%s)) / 86400 ))
}

base_tarball() { # path of a minbase bookworm tarball: the cached one if under a week old, else a new one
  local tarball=$cache_dir/debian-$suite-minbase.tar
  if [ -f "$tarball" ] && [ -n "$(find "$tarball" -mtime -7)" ]; then
    log "using the cached base $tarball"
    echo "$tarball"
    return
  fi
  if ! mkdir -p "$cache_dir" 2>/dev/null || [ ! -w "$cache_dir" ]; then
    tarball=$tmp/debian-$suite-minbase.tar
  fi
  log "making a Debian $suite base with mmdebstrap (minbase, merged /usr, as the official image)"
  # merged-usr: usr-is-merged, as the official image has, not usrmerge (which would bring perl).
  mmdebstrap --quiet --format=tar --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    "$suite" "$tarball.part" "${mirrors[@]}" >"$tmp/mmdebstrap.log" 2>&1 \
    || { cat "$tmp/mmdebstrap.log" >&2; die "mmdebstrap could not make the base (is Debian's mirror reachable?)"; }
  mv "$tarball.part" "$tarball"
  echo "$tarball"
}

# What Debian's official images add to apt's configuration (debuerreotype): no package files or caches
# are left behind by an install, and no translations are fetched.
apt_clean='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";'

# The files Debian's official slim images leave out (debuerreotype's slimify list), kept out of later
# installs too by the same dpkg configuration.
slim_excludes='path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*'

import_base() { # import_base TARBALL NAME full|slim: one layer from the tarball, committed as NAME
  local tarball=$1 name=$2 kind=$3 c mnt
  c=$(buildah from --name "base-$kind-$$" scratch)
  containers+=("$c")
  mnt=$(buildah mount "$c") && root_ok "$mnt" || die "buildah could not mount the new base's container ('$mnt')"
  tar -xf "$tarball" -C "$mnt" --numeric-owner || die "could not unpack $tarball into the base"
  printf '%s\n' "$apt_clean" > "$mnt/etc/apt/apt.conf.d/docker-clean"
  echo 'Acquire::Languages "none";' > "$mnt/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' > "$mnt/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' > "$mnt/etc/apt/apt.conf.d/docker-autoremove-suggests"
  if [ "$kind" = slim ]; then
    rm -rf "$mnt"/usr/share/{groff,info,linda,locale,man}/* "$mnt"/usr/share/lintian/overrides/*
    find "$mnt/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$mnt/usr/share/doc" -mindepth 1 -type d -empty -delete
    printf '%s\n' "$slim_excludes" > "$mnt/etc/dpkg/dpkg.cfg.d/docker"
  fi
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash \
    --label "$made_label=$made_by" "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
  containers=("${containers[@]/$c}")
}

bases=() # the images the Dockerfile's FROM lines name (not its own stages), fully qualified: read_bases
read_bases() { # in the main shell, so that die stops the script (not a pipeline's subshell)
  local from froms
  mapfile -t froms < <(awk 'toupper($1) == "FROM" {print $2}' deploy/Dockerfile | sort -u)
  bases=()
  for from in "${froms[@]}"; do
    case "$from" in
      debian:12|debian:12-slim) bases+=("docker.io/library/$from") ;;
      *) die "deploy/Dockerfile uses $from: image.sh can make only debian:12 and debian:12-slim" ;;
    esac
  done
}

ensure_bases() { # each base pulled from its registry, or else kept from before, or else made here
  local name age made tarball="" to_make=()
  read_bases
  for name in "${bases[@]}"; do
    if timeout 30 buildah pull --policy always --retry 0 --quiet "$name" >/dev/null 2>"$tmp/pull.log"; then
      note "base $name: pulled from its registry"
      continue
    fi
    age=$(image_age_days "$name")
    made=$(buildah inspect --type image --format "{{index .OCIv1.Config.Labels \"$made_label\"}}" "$name" \
           2>/dev/null || true)
    # Kept: an image pulled earlier, or one made here by this recipe within the week.
    if [ -n "$age" ] && { [ -z "$made" ] || { [ "$made" = "$made_by" ] && [ "$age" -lt 7 ]; }; }; then
      note "base $name: no registry ($(tail -n 1 "$tmp/pull.log" | cut -c1-90)...); the local one, $age days old"
      continue
    fi
    to_make+=("$name")
  done
  for name in "${to_make[@]}"; do
    [ -n "$tarball" ] || tarball=$(base_tarball)
    case "$name" in
      *:12) import_base "$tarball" "$name" full ;;
      *:12-slim) import_base "$tarball" "$name" slim ;;
    esac
    note "base $name: no registry; made from Debian's packages with mmdebstrap"
  done
}

# --- build ---------------------------------------------------------------------------------------------------
do_build() {
  local t0 t1 t2 old new
  t0=$(date +%s)
  ensure_bases
  t1=$(date +%s)
  note "bases ready in $((t1 - t0)) s"
  old=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag" 2>/dev/null || true)
  # From the bases up every time, as an operator's first build is (no --layers: nothing from an earlier run
  # is reused, and no intermediate images pile up on the machine).
  if buildah bud --isolation chroot --pull=never --no-cache --force-rm -f deploy/Dockerfile -t "$tag" . \
      >&2 2>"$tmp/bud.log" || { cat "$tmp/bud.log" >&2; false; }; then
    t2=$(date +%s)
    point OK "deploy/Dockerfile builds unchanged with buildah (bases $((t1 - t0)) s, build $((t2 - t1)) s)"
  else
    t2=$(date +%s)
    point FAIL "deploy/Dockerfile builds unchanged with buildah (failed after $((t2 - t1)) s)" \
      "$(tail -n 30 "$tmp/bud.log")"
    return 1
  fi
  new=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag")
  # The image this tag named before is not kept: the machine holds the bases and the newest image.
  if [ -n "$old" ] && [ "$old" != "$new" ]; then buildah rmi "$old" >/dev/null 2>&1 || true; fi
}


# --- smoke -----------------------------------------------------------------------------------------------------
# hp PYTHON ARGS...: a snippet with the HTTP tests' helpers (tests/http/harness.py: exchanges, PNG and WebP
# readers) at hand. Loopback only.
hp() {
  local code=$1
  shift
  PYTHONPATH=$root/tests/http python3 -c "import sys, os, json, harness
$code" "$@"
}

# http PORT METHOD PATH [BODY_FILE] [OUT_FILE]: prints the status (000 when nothing answered); with $token
# set, sends it as the bearer token.
http() {
  hp '
port, method, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = open(sys.argv[4], "rb").read() if len(sys.argv) > 4 and sys.argv[4] else None
headers = {"Authorization": "Bearer " + os.environ["token"]} if os.environ.get("token") else {}
try:
    status, _, data = harness.request(port, method, path, body, headers, timeout=120)
except OSError as e:
    print("000")
    sys.exit(0)
if len(sys.argv) > 5:
    open(sys.argv[5], "wb").write(data)
print(status)' "$@"
}

free_port() { hp 'print(harness.free_port())'; }

# The pod as it runs on GPU nodes: the nvidia overlay rendered as `kubectl apply -k` renders it
# (tests/kustomize.mjs, on Node, with tests/node's packages: deploy/debian.sh test installs both).
render_pod() {
  node tests/kustomize.mjs deploy/kubernetes/overlays/nvidia > "$tmp/rendered.json" 2>"$tmp/kustomize.err" \
    && python3 -c '
import json, sys
pods = [o["spec"]["template"]["spec"] for o in json.load(open(sys.argv[1])) if o.get("kind") == "Deployment"]
json.dump(pods[0], open(sys.argv[2], "w"))' "$tmp/rendered.json" "$tmp/pod.json"
}
pod_env() { # the container's env values, KEY=VALUE a line; secrets (valueFrom) left out
  python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["containers"][0].get("env", []):
    if "value" in e:
        print(e["name"] + "=" + str(e["value"]))' "$tmp/pod.json"
}
pod_value() { # a value from the pod spec by a path of keys (numbers index lists)
  python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v if not isinstance(v, list) else "\n".join(map(str, v)))' "$tmp/pod.json" "$@"
}
pod_mounts() { # the container's volume mount paths, one a line
  python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["containers"][0].get("volumeMounts", []):
    print(m["mountPath"])' "$tmp/pod.json"
}

descendant_named() { # descendant_named PID NAME: the first process under PID whose command name is NAME
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    if [ "$(cat "/proc/$child/comm" 2>/dev/null)" = "$2" ]; then echo "$child"; return 0; fi
    descendant_named "$child" "$2" && return 0
  done
  return 1
}

wait_ready() { # wait_ready PORT SECONDS PID: /readyz answers 200 within SECONDS while PID lives; prints the time
  local port=$1 budget=$2 pid=$3 t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$budget" ] && kill -0 "$pid" 2>/dev/null; do
    if [ "$(http "$port" GET /readyz)" = 200 ]; then echo $((SECONDS - t0)); return 0; fi
    sleep 0.5
  done
  return 1
}

frame=tests/data/blender_street_960x540_singlelayer.exr   # ZIP, half RGBA and a float depth: libdeflate's path
frame2=tests/data/psychtoolbox_Desk.exr                   # PIZ: OpenEXR's own decoder
render_query='/v1/render?output.format=png'

# host_render HDRPOSTD ENV_FILE OUT: the same frame through a build on this machine, with the same settings.
host_render() {
  local exe=$1 envfile=$2 out=$3 port probe pid status=1 hostenv=()
  port=$(free_port)
  probe=$(free_port)
  mkdir -p "$tmp/host-cache"
  mapfile -t hostenv < "$envfile"
  env -i PATH="$PATH" "${hostenv[@]}" HDRPOST_LISTEN="127.0.0.1:$port" HDRPOST_PROBE_LISTEN="127.0.0.1:$probe" \
    HDRPOST_PIPELINE_CACHE="$tmp/host-cache/pipeline.cache" "$exe" > "$tmp/host.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if wait_ready "$probe" 120 "$pid" >/dev/null \
      && [ "$(http "$port" POST "$render_query" "$frame" "$out")" = 200 ]; then
    status=0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return $status
}

do_smoke() {
  local host_exe=${1:-} size user entry mnt port probe envs=() vols=() line t0 pid bpid took rc
  if ! buildah inspect --type image "$tag" >/dev/null 2>&1; then
    point FAIL "the image $tag exists" "deploy/image.sh build makes it"
    return 1
  fi
  size=$(buildah images --json "$tag" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["size"])')
  note "image $tag: $size uncompressed (buildah's count, as docker images shows it)"
  user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$tag")
  entry=$(buildah inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{.}} {{end}}' "$tag")
  entry=${entry% }
  if [ "$user" = 10001:10001 ] && [ "$entry" = /usr/local/bin/hdrpostd ]; then
    point OK "the image runs /usr/local/bin/hdrpostd as 10001:10001"
  else
    point FAIL "the image runs /usr/local/bin/hdrpostd as 10001:10001" "user '$user', entrypoint '$entry'"
  fi

  new_container "$tag" hdrpostd-smoke
  buildah run --isolation chroot --user 0:0 "$ctr" -- \
    dpkg-query -W -f '${Package} ${Version} ${Installed-Size}\n' > "$tmp/packages.txt"
  note "$(wc -l < "$tmp/packages.txt") Debian packages in the image"
  buildah run --isolation chroot "$ctr" -- ldd "$entry" > "$tmp/ldd.txt" 2>&1 || true
  if grep -q '=> /' "$tmp/ldd.txt" && ! grep -q 'not found' "$tmp/ldd.txt"; then
    point OK "every library hdrpostd links is in the image ($(grep -c '=> /' "$tmp/ldd.txt") of them)"
  else
    point FAIL "every library hdrpostd links is in the image" "$(cat "$tmp/ldd.txt")"
  fi

  # The pod's settings, but on loopback ports, on lavapipe (the pod names its GPU) and with the Secret's token
  # made up here; each frame held 1.5 s on the GPU thread (the test-only setting test_deploy.py uses too), so
  # that one is still in flight when SIGTERM comes.
  if ! render_pod; then
    point FAIL "the pod of deploy/kubernetes/overlays/nvidia renders (tests/kustomize.mjs)" \
      "$(cat "$tmp/kustomize.err")"
    return 1
  fi
  port=$(free_port)
  probe=$(free_port)
  export token
  token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  pod_env | grep -v -e '^HDRPOST_LISTEN=' -e '^HDRPOST_PROBE_LISTEN=' -e '^HDRPOST_DEVICE=' > "$tmp/pod.env"
  printf '%s\n' HDRPOST_DEVICE=llvmpipe HDRPOST_AUTH_TOKEN="$token" HDRPOST_TEST_GPU_DELAY_MS=1500 >> "$tmp/pod.env"
  while read -r line; do envs+=(--env "$line"); done < "$tmp/pod.env"
  local startup grace pre_stop cache_path cache_volume="" mount_path i=0
  startup=$(( $(pod_value containers 0 startupProbe periodSeconds) \
              * $(pod_value containers 0 startupProbe failureThreshold) ))
  grace=$(pod_value terminationGracePeriodSeconds)
  pre_stop=$(pod_value containers 0 lifecycle preStop exec command 1)
  # The pod's volumes (emptyDir: empty, mode 0777), each mounted where the manifest mounts it.
  cache_path=$(grep '^HDRPOST_PIPELINE_CACHE=' "$tmp/pod.env" | cut -d= -f2-)
  while read -r mount_path; do
    i=$((i + 1))
    install -d -m 0777 "$tmp/volume-$i"
    vols+=(--volume "$tmp/volume-$i:$mount_path")
    note "volume $mount_path"
    if [ "$mount_path" = "$(dirname "$cache_path")" ]; then cache_volume=$tmp/volume-$i; fi
  done < <(pod_mounts)
  # A studio's OCIO config, read-only as a ConfigMap would mount it (issue 34): the image must carry the OCIO
  # runtime that reads it (docs/COLOR.md).
  vols+=(--volume "$root/tests/data/ocio/aces_builtin:/etc/hdrpostd/ocio:ro")
  envs+=(--env HDRPOST_OCIO_CONFIG=/etc/hdrpostd/ocio/config.ocio)

  mnt=$(buildah mount "$ctr") && root_ok "$mnt" || die "buildah could not mount the image's container ('$mnt')"
  touch "$tmp/started"
  sleep 1   # the marker's time stamp strictly before anything the daemon writes
  buildah run --isolation chroot "${envs[@]}" --env HDRPOST_LISTEN="127.0.0.1:$port" \
    --env HDRPOST_PROBE_LISTEN="127.0.0.1:$probe" \
    "${vols[@]}" "$ctr" -- "$entry" > "$tmp/daemon.log" 2>&1 &
  bpid=$!
  pids+=("$bpid")
  pid=""
  for _ in $(seq 50); do pid=$(descendant_named "$bpid" hdrpostd) && break; sleep 0.2; done
  if [ -n "$pid" ]; then pids=("$pid" "${pids[@]}"); fi
  if [ -n "$pid" ] && grep -q '^Uid:\s*10001\s' "/proc/$pid/status" \
      && grep -q '^Gid:\s*10001\s' "/proc/$pid/status" && [ "$(readlink "/proc/$pid/root")" != / ]; then
    point OK "the daemon runs in the image's root as uid and gid 10001 (pid $pid)"
  else
    point FAIL "the daemon runs in the image's root as uid and gid 10001" "pid '$pid'" \
      "$(grep -E '^(Uid|Gid)' "/proc/${pid:-0}/status" 2>&1)" "$(cat "$tmp/daemon.log")"
  fi

  if took=$(wait_ready "$probe" "$startup" "$bpid"); then
    point OK "/readyz turns 200 on the probe port within the startup probe's ${startup} s (${took} s, lavapipe)"
  else
    point FAIL "/readyz turns 200 on the probe port within the startup probe's ${startup} s" \
      "$(cat "$tmp/daemon.log")"
  fi
  local livez gpu_status
  livez=$(http "$probe" GET /livez)
  gpu_status=$(http "$port" GET /v1/gpu "" "$tmp/gpu.json")
  if [ "$livez" = 200 ] && [ "$gpu_status" = 200 ] && grep -q '"device": *"llvmpipe' "$tmp/gpu.json"; then
    point OK "/livez answers 200 and /v1/gpu names lavapipe's device: $(hp \
      'print(json.load(open(sys.argv[1]))["device"])' "$tmp/gpu.json")"
  else
    point FAIL "/livez answers 200 and /v1/gpu names lavapipe's device" "livez $livez, gpu $gpu_status" \
      "$(cat "$tmp/gpu.json" 2>/dev/null)"
  fi
  local metrics_status
  metrics_status=$(token="" http "$port" GET /metrics "" "$tmp/metrics.txt")
  if [ "$metrics_status" = 200 ] && grep -q '^hdrpost_' "$tmp/metrics.txt"; then
    point OK "/metrics answers Prometheus text without the token (HDRPOST_METRICS_OPEN, as the pod sets)"
  else
    point FAIL "/metrics answers Prometheus text without the token" "status $metrics_status" \
      "$(head -c 500 "$tmp/metrics.txt" 2>/dev/null)"
  fi

  local render_status render2_status
  render_status=$(http "$port" POST "$render_query" "$frame" "$tmp/image.png")
  if [ "$render_status" = 200 ] && hp '
w, h, c, d, _ = harness.png_decode(open(sys.argv[1], "rb").read())
sys.exit(0 if (w, h) == (960, 540) else 1)' "$tmp/image.png" 2>"$tmp/png.err"; then
    point OK "$(basename "$frame") renders to a 960x540 PNG that decodes ($(stat -c %s "$tmp/image.png") bytes)"
  else
    point FAIL "$(basename "$frame") renders to a 960x540 PNG that decodes" "status $render_status" \
      "$(cat "$tmp/png.err")" "$(head -c 300 "$tmp/image.png" 2>/dev/null)"
  fi
  local ocio_status
  ocio_status=$(http "$port" POST \
    '/v1/render?output.format=png&output.bit_depth=16&ocio.display=Rec.2100-PQ%20-%20Display' "$frame" "$tmp/pq.png")
  if [ "$ocio_status" = 200 ] && hp '
d = open(sys.argv[1], "rb").read()
w, h, c, depth, _ = harness.png_decode(d)
sys.exit(0 if (w, h, depth) == (960, 540, 16) and b"cICP\x09\x10\x00\x01" in d else 1)' "$tmp/pq.png" 2>"$tmp/pq.err"; then
    point OK "through the mounted OCIO config's PQ display: a 16-bit PNG tagged cICP 9/16/0/1 (the image carries OCIO)"
  else
    point FAIL "through the mounted OCIO config's PQ display: a 16-bit PNG tagged cICP 9/16/0/1" \
      "status $ocio_status" "$(cat "$tmp/pq.err")" "$(head -c 300 "$tmp/pq.png" 2>/dev/null)" \
      "$(grep -i ocio "$tmp/daemon.log" | tail -n 5)"
  fi
  render2_status=$(http "$port" POST '/v1/render?output.format=webp' "$frame2" "$tmp/image2.webp")
  if [ "$render2_status" = 200 ] && [ "$(hp 'print(harness.webp_size(open(sys.argv[1], "rb").read()))' \
      "$tmp/image2.webp")" = "(644, 874)" ]; then
    point OK "$(basename "$frame2") (PIZ) renders to a 644x874 WebP ($(stat -c %s "$tmp/image2.webp") bytes)"
  else
    point FAIL "$(basename "$frame2") (PIZ) renders to a 644x874 WebP" "status $render2_status"
  fi

  # SIGTERM to the daemon itself (buildah kills its child rather than pass a signal on), a frame in flight.
  http "$port" POST "$render_query" "$frame" "$tmp/inflight.png" > "$tmp/inflight.status" &
  local poster=$!
  sleep 0.7
  t0=$(date +%s%N)
  kill -TERM "$pid" 2>/dev/null || true
  rc=0
  wait "$bpid" || rc=$?
  took=$(( ($(date +%s%N) - t0) / 1000000 ))   # ms
  wait "$poster" || true
  local drain="SIGTERM with a frame in flight: the frame is answered 200 and the daemon exits 0"
  if [ "$rc" = 0 ] && [ "$(cat "$tmp/inflight.status")" = 200 ] \
      && [ "$took" -lt $(( (grace - pre_stop) * 1000 )) ]; then
    point OK "$drain in $took ms (grace $grace s less the ${pre_stop} s preStop)"
  else
    point FAIL "$drain within the grace period less the preStop pause" \
      "exit $rc after $took ms, frame $(cat "$tmp/inflight.status")" "$(tail -n 20 "$tmp/daemon.log")"
  fi
  local cache_file=$cache_volume/$(basename "$cache_path")
  if [ -n "$cache_volume" ] && [ -s "$cache_file" ] && [ "$(stat -c %u "$cache_file")" = 10001 ]; then
    point OK "the pipeline cache is written into the pod's cache volume, $cache_path ($(stat -c %s "$cache_file") bytes)"
  else
    point FAIL "the pipeline cache is written into the pod's cache volume, $cache_path" \
      "volume '$cache_volume': $(ls -la "${cache_volume:-/nonexistent}" 2>&1)" "$(tail -n 20 "$tmp/daemon.log")"
  fi
  # The pod's root file system is read-only: the daemon may write only into its two volumes. buildah's
  # chroot isolation cannot mount the root read-only, so what changed in the container's root is listed.
  local written
  written=$(cd "$mnt" && find . -xdev -newer "$tmp/started" ! -type d ! -path ./etc/hosts \
            ! -path ./etc/resolv.conf ! -path ./etc/hostname ! -path ./run/.containerenv 2>/dev/null | head -n 20)
  if [ -z "$written" ]; then
    point OK "nothing was written outside the two volumes (the pod's root file system is read-only)"
  else
    point FAIL "nothing was written outside the two volumes (the pod's root file system is read-only)" "$written"
  fi

  # The same frame through a build of the same sources on this machine: the same pixels.
  if [ -z "$host_exe" ] && [ -x build/daemon/hdrpostd ]; then host_exe=build/daemon/hdrpostd; fi
  if [ -n "$host_exe" ]; then
    sed -e 's/^HDRPOST_TEST_GPU_DELAY_MS=.*/HDRPOST_TEST_GPU_DELAY_MS=0/' "$tmp/pod.env" > "$tmp/host.env"
    if host_render "$host_exe" "$tmp/host.env" "$tmp/host.png"; then
      local verdict
      verdict=$(hp '
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if a == b:
    print("identical bytes")
    sys.exit(0)
wa, ha, ca, da, sa = harness.png_decode(a)
wb, hb, cb, db, sb = harness.png_decode(b)
if (wa, ha, ca, da) != (wb, hb, cb, db):
    print(f"different shapes {(wa, ha, ca, da)} {(wb, hb, cb, db)}")
    sys.exit(1)
worst = max(abs(x - y) for x, y in zip(sa, sb))
print(f"different bytes, pixels at most {worst} levels apart")
sys.exit(0 if worst <= 1 else 1)' "$tmp/image.png" "$tmp/host.png" 2>&1) && rc=0 || rc=$?
      if [ "$rc" = 0 ]; then
        point OK "the image's PNG equals the host build's render of the same frame ($verdict)"
      else
        point FAIL "the image's PNG equals the host build's render of the same frame" "$verdict"
      fi
    else
      point FAIL "the host build $host_exe renders the same frame" "$(tail -n 20 "$tmp/host.log")"
    fi
  fi
  note "mesa-vulkan-drivers in the image $(awk '$1 == "mesa-vulkan-drivers" {print $2}' "$tmp/packages.txt")," \
    "on this machine $(dpkg-query -W -f '${Version}' mesa-vulkan-drivers 2>/dev/null || echo none)"
  if [ -n "${HDRPOST_IMAGE_OUT:-}" ]; then
    mkdir -p "$HDRPOST_IMAGE_OUT"
    cp "$tmp"/{packages.txt,daemon.log,gpu.json,metrics.txt,image.png,image2.webp} "$HDRPOST_IMAGE_OUT"/ \
      2>/dev/null || true
  fi
}

# --- gpu-bundle ----------------------------------------------------------------------------------------------
# The image's hdrpostd and the image's own libraries it needs on a GPU host, where the toolkit adds the driver:
# what ldd lists for the binary (the Vulkan loader among them), all of glibc (the driver's libraries link
# libdl, libpthread and librt, which must not come from the host's newer glibc), and GLVND's dispatch and
# Xlib with their dependencies (what NVIDIA's Vulkan ICD, libGLX_nvidia, links). Not lavapipe (LLVM alone is
# 115 MB). deploy/image-gpu-run.sh becomes DIR/run.sh.
do_gpu_bundle() {
  local dir=$1 mnt path real size
  buildah inspect --type image "$tag" >/dev/null 2>&1 || die "no image $tag: deploy/image.sh build first"
  new_container "$tag" hdrpostd-bundle
  mnt=$(buildah mount "$ctr") && root_ok "$mnt" || die "buildah could not mount the image's container ('$mnt')"
  rm -rf "$dir"
  mkdir -p "$dir/lib"
  # Resolved inside the image (its symbolic links are absolute paths of the image).
  buildah run --isolation chroot --user 0:0 "$ctr" -- sh -c '
    multiarch=/usr/lib/x86_64-linux-gnu
    { ldd /usr/local/bin/hdrpostd
      for lib in libGLdispatch.so.0 libX11.so.6 libXext.so.6 libEGL.so.1; do ldd "$multiarch/$lib"; done
    } | awk "\$2 == \"=>\" && \$3 ~ /^\\// {print \$3}"
    for lib in libGLdispatch.so.0 libX11.so.6 libXext.so.6 libEGL.so.1; do echo "$multiarch/$lib"; done
    dpkg -L libc6 | grep -E "/(ld-linux-x86-64|lib[^/]*)\.so(\.[0-9]+)*$" | grep -v /gconv/
  ' | awk -F/ '!seen[$NF]++' > "$tmp/bundle.list"   # one path for each name (merged /usr gives two)
  buildah run --isolation chroot --user 0:0 "$ctr" -- \
    sh -c 'for p; do echo "$p $(readlink -f "$p")"; done' sh $(cat "$tmp/bundle.list") > "$tmp/bundle.real"
  while read -r path real; do
    cp "$mnt$real" "$dir/lib/$(basename "$path")"
  done < "$tmp/bundle.real"
  cp "$mnt/usr/local/bin/hdrpostd" "$dir/hdrpostd"
  cp "$frame" "$dir/frame.exr"
  install -m 0755 deploy/image-gpu-run.sh "$dir/run.sh"
  { echo "image $tag $(buildah inspect --type image --format '{{.FromImageID}}' "$tag")"
    echo "made $(date -u +%FT%TZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "libraries:"; sed 's/^/  /' "$tmp/bundle.list"
    echo "packages of the image:"
    buildah run --isolation chroot --user 0:0 "$ctr" -- dpkg-query -W -f '  ${Package} ${Version}\n'
  } > "$dir/IMAGE.txt"
  size=$(du -sm "$dir" | cut -f1)
  note "$dir: $(wc -l < "$tmp/bundle.list") libraries, the binary, a frame and run.sh, $size MiB"
  [ "$size" -le 50 ] || die "$dir is $size MiB, over the 50 MiB meant for it"
}

case "$mode" in
  build) need_tools buildah mmdebstrap; do_build ;;
  smoke) need_tools buildah python3 node; do_smoke "${1:-}" ;;
  test)
    need_tools buildah mmdebstrap python3 node
    t_start=$(date +%s)
    if do_build; then do_smoke "${1:-}"; fi
    note "image step: $(( $(date +%s) - t_start )) s in all"
    ;;
  gpu-bundle) need_tools buildah; do_gpu_bundle "${1:-build-image-gpu}" ;;
esac
echo "1..$n"
[ "$failed" -eq 0 ]
