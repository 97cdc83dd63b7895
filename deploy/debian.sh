#!/usr/bin/env bash
# The two set-up commands of the README, for a fresh Debian 12 machine, as root:
#   deploy/debian.sh start   install what is needed, build, and start hdrpostd (lavapipe when no GPU)
#   deploy/debian.sh test    install what is needed, build, and run every test suite
#   deploy/debian.sh build   install what is needed and build, nothing else (deploy/Dockerfile)
#   deploy/debian.sh deps    install what is needed, nothing else (deploy/Dockerfile's cached layer)
# Any extra arguments after 'start' go to hdrpostd (e.g. --listen=0.0.0.0:8080).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  start|test|build|deps) shift ;;
  *) echo "usage: $0 start [hdrpostd flags...] | test | build | deps" >&2; exit 2 ;;
esac

# Build tools, the libraries hdrpostd and hdrpost (libcurl) link, lcms2 (the build makes the encoders' ICC
# profiles with it, tools/make_icc.c, and test_encode reads them back; the daemon does not link it), Mesa's
# lavapipe (a Vulkan device on the CPU, used when there is no GPU), the Khronos validation layer (on in every
# test), PyYAML (the deployment's test reads the Kubernetes manifest), OpenColorIO (a studio's config, ocio/) and
# glslang with SPIRV-Tools (the OCIO stage's shader is compiled at run time: pipeline/ocio_program.c), and curl,
# which the README's first request uses (a minimal Debian 12 has none).
packages=(
  gcc libc6-dev pkg-config meson ninja-build glslc python3 python3-yaml
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
  libmicrohttpd-dev libjansson-dev zlib1g-dev libopenexr-dev g++
  libwebp-dev libspng-dev libdeflate-dev openssl libcurl4-openssl-dev liblcms2-dev
  libopencolorio-dev glslang-dev spirv-tools curl
  # JPEG and AVIF output (api/codecs/encode_jpeg.c: libjpeg-turbo's libjpeg API; api/codecs/encode_avif.c: libavif, whose
  # Debian build brings libaom to encode and dav1d to decode). The image's runtime stage gets libjpeg62-turbo
  # and libavif15 from deploy/runtime-packages.sh (ldd), as every other library.
  libavif-dev libjpeg62-turbo-dev
)
# The tests also build the fuzz targets (tests/fuzz) with clang's libFuzzer, AddressSanitizer and UBSan.
# browser_http shows the daemon's images in headless Chromium and reads their colours off the screen.
# The console's and the OpenAPI document's tests run on Node (tests/node/package.json: playwright-core drives
# that Chromium; an OpenAPI validator): Debian's nodejs and npm where the machine has no node of its own.
# The image test builds deploy/Dockerfile with buildah and makes its Debian bases with mmdebstrap where no
# registry is reachable (deploy/image.sh). The systemd test runs systemd-analyze verify on deploy/systemd/.
# security_http gives an IPv6 /64 of addresses to a loopback of its own (unshare -n, then ip from iproute2).
# haproxy_http puts replicas behind Debian's HAProxy (deploy/replicas.py's configuration).
if [ "$mode" = test ]; then
  packages+=(clang libclang-rt-14-dev libfuzzer-14-dev chromium buildah mmdebstrap systemd iproute2 haproxy)
  command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deploy: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "$mode" = deps ]; then
  exit 0
fi

# CI builds with warnings as errors; so does everyone else.
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=debugoptimized -Dwerror=true
fi
ninja -C build

if [ "$mode" = start ]; then
  exec build/daemon/hdrpostd "$@"
fi
if [ "$mode" = build ]; then
  exit 0
fi

# The npm packages of the Node tests, exactly as tests/node/package-lock.json pins them (no browser download:
# playwright-core drives Debian's chromium).
npm ci --prefix tests/node --no-audit --no-fund --loglevel=error

# Blender's OpenColorIO config (Filmic's 3D and 1D LUTs), the OCIO tests' real-LUT case: 31 MB of package, so
# fetched here rather than committed (tools/fetch_blender_ocio.sh; nothing to do once it is there).
bash tools/fetch_blender_ocio.sh .cache/blender-ocio

# Every suite; the last line counts every check of every suite (tests speak TAP).
status=0
meson test -C build --print-errorlogs || status=$?

# Then each fuzz target for a bounded time (HDRPOST_FUZZ_SECONDS, default 20 s each: 30 took the whole command
# past 45 minutes on two cores; the campaigns of docs/RELIABILITY.md ran minutes to hours each), built with clang,
# libFuzzer, AddressSanitizer and UBSan in a build of its own: a crash, a leak or a sanitizer report fails.
# fuzz_png_gpu and fuzz_exr_zip_gpu make a Vulkan device: lavapipe is preloaded for them (run_fuzzer.py --gpu), as below.
fuzz_options=(--buildtype=debugoptimized -Dwerror=true -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false)
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz "${fuzz_options[@]}"
else
  meson configure build-fuzz "${fuzz_options[@]}"
fi
fuzz_targets=(tests/fuzz/fuzz_params tests/fuzz/fuzz_form tests/fuzz/fuzz_exr tests/fuzz/fuzz_rgbe tests/fuzz/fuzz_pfm
              tests/fuzz/fuzz_png tests/fuzz/fuzz_png_gpu tests/fuzz/fuzz_exr_zip_gpu tests/fuzz/fuzz_conns)
ninja -C build-fuzz "${fuzz_targets[@]}"
lvp=$(dpkg -L mesa-vulkan-drivers | grep -m1 '/libvulkan_lvp\.so$')
HDRPOST_FUZZ_PRELOAD=$lvp HDRPOST_FUZZ_SECONDS=${HDRPOST_FUZZ_SECONDS:-20} \
  meson test -C build-fuzz --no-rebuild --suite fuzz --print-errorlogs || status=$?
# Then the suites that parse untrusted input and serve HTTP once more, under AddressSanitizer and UBSan
# (docs/RELIABILITY.md says which and why): the daemon's children get the ASan runtime and lavapipe preloaded
# (HDRPOST_TEST_PRELOAD), so that the driver stays mapped and its memory is not reported leaked when the
# Vulkan loader unloads it. host_pool, pipeline_cache, fuzz_replay_png_gpu and fuzz_replay_exr_zip_gpu create Vulkan
# devices themselves:
# they get the same two libraries through meson's --wrapper. reduce, tone and dof (minutes each under ASan on lavapipe) and
# encode (its malloc interposer cannot run beside ASan's) run once, above.
asan_options=(--buildtype=debugoptimized -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false)
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan "${asan_options[@]}"
else
  meson configure build-asan "${asan_options[@]}"
fi
# The HTTP suites whose requests carry untrusted input into the daemon's parsers and paths: every attack
# (security_http), every route and parameter (render_http), the faults and the threads. daemon_http (start-up, configuration, the drain), client_http, live_http, png_gpu_http (its encoder
# is fuzzed under ASan above) and clock_hold_http ran here too until CI passed its 45 minutes (together 23
# minutes of the pass's 48 on two cores); they run once, in the plain pass. So, from 2026-11-29, do
# exr_zip_http (400 s here; the GPU's EXR decoders are fuzzed under ASan above and their replays run below)
# and haproxy_http (174 s; X-Forwarded-For's parser is trusted_proxies', here).
# Longest first: meson runs named suites in the order named (its test priorities order the plain pass only),
# and security_http (some 560 s here) begun last ran alone at the pass's end.
asan_suites=(security_http render_http faults_http threads_http image
             params deflate_runs crc32_threads bigbuf cpus budget rows_ready group_commit conn_table deferred
             trusted_proxies gpu_identity
             fuzz_replay_form fuzz_replay_params fuzz_replay_exr fuzz_replay_rgbe fuzz_replay_pfm fuzz_replay_png
             fuzz_replay_conns)
ninja -C build-asan
asan_rt=$(gcc -print-file-name=libasan.so)
# Twice each suite's timeout: every daemon of these suites starts (40 pipelines on lavapipe) and answers under
# ASan with another suite beside it on the two cores (daemon_http's many start-ups once passed 300 s).
# Time factor 2: with fewer suites here, two heavy ones (render_http beside security_http) share the cores, and
# a request timed against the GPU's test delay (render_http's hangers, SLOW_GPU_MS) took 626 ms of a 500 ms bound.
HDRPOST_TEST_PRELOAD="$asan_rt $lvp" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 HDRPOST_TEST_TIME_FACTOR=2 \
  meson test -C build-asan --no-rebuild --print-errorlogs --timeout-multiplier 2 "${asan_suites[@]}" || status=$?
# A second log for the wrapped ones: meson test writes testlog.json afresh on every run (with a wrapper, meson
# adds the wrapper's name to the log's: devices-env.json).
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 meson test -C build-asan --no-rebuild --print-errorlogs \
  --timeout-multiplier 2 --wrapper "env LD_PRELOAD=$asan_rt:$lvp" --logbase devices host_pool pipeline_cache fuzz_replay_png_gpu \
  fuzz_replay_exr_zip_gpu clock_hold || status=$?

# Then the suites that run the daemon's threads once more under ThreadSanitizer (gcc, build-tsan/; issue 38,
# docs/RELIABILITY.md "Threads"): the deferred replies' interleavings, the thread tests of common/, the daemon
# end to end with its threads stressed (threads_http, whole: renders, analyses, clients hanging up at random
# points, the guard and the watch closing connections, kept-alive GETs, SIGTERM during load), and the groups of
# the other HTTP suites that set the daemon's threads against each other (HDRPOST_TEST_QUICK: each suite names
# its own beside its list of groups; the plain and ASan passes above run every group): daemon_http the device
# lost after the drain, render_http the early decoders, 32 requests at once and a client gone mid-upload,
# security_http the flood of idle connections, client_http SIGINT while the client's frames are in flight,
# faults_http the device lost under load, live_http the probe listener. The soak ran clean under TSan once
# (RELIABILITY.md) and stays out of the pass for the test command's time. A daemon takes a minute to start under TSan on lavapipe (ten times the plain build),
# so a group costs about a start: the whole suites would add some 80 minutes (RELIABILITY.md has the times).
# HDRPOST_TEST_TIME_FACTOR stretches every wait of the HTTP suites for TSan's slowdown (tests/http/harness.py,
# scaled): a bound on how long to wait, never the thing a point checks.
# halt_on_error stops a daemon at its first report: the suites check every exit code, so a report fails them,
# and the report is in the log they show. tests/tsan.supp says why each suppression is there (uninstrumented
# libraries only).
tsan_options=(--buildtype=debugoptimized -Dwerror=true -Db_sanitize=thread)
if [ ! -f build-tsan/build.ninja ]; then
  meson setup build-tsan "${tsan_options[@]}"
else
  meson configure build-tsan "${tsan_options[@]}"
fi
tsan_suites=(threads_http client_http daemon_http render_http security_http faults_http live_http
             deferred rows_ready budget crc32_threads group_commit) # longest first, as the ASan pass's
# Only what those suites run: the whole tree under TSan would add minutes of compiling for nothing.
ninja -C build-tsan daemon/hdrpostd client/hdrpost tools/cpu_render tools/make_frame tests/libenospc_preload.so \
  tests/test_deferred tests/test_rows_ready tests/test_budget tests/test_crc32_threads tests/test_group_commit
HDRPOST_TEST_QUICK=1 HDRPOST_TEST_TIME_FACTOR=4 \
  TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
  meson test -C build-tsan --no-rebuild --print-errorlogs --timeout-multiplier 3 "${tsan_suites[@]}" || status=$?

python3 tests/summarize.py build/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json build-asan/meson-logs/devices*.json build-tsan/meson-logs/testlog.json || status=1
exit $status
