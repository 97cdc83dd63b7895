"""The deployment files against the daemon they deploy: deploy/Dockerfile, deploy/runtime-packages.sh and
deploy/kubernetes/ (its nvidia overlay rendered as `kubectl apply -k` would, by tests/kustomize.mjs). No
container engine or cluster runs in CI, so what can drift is checked here: every setting the manifests and
the image give exists in hdrpostd's own table (--help), the probes name the daemon's health routes on the
port it listens on, the image runs the binary it copies with the packages its libraries come from, the
metric the autoscaler reads is one the daemon exports, and the daemon started with the manifest's settings
becomes ready, answers the probes and drains on SIGTERM within the pod's grace period.
(tests/test_kubernetes.mjs validates the manifests against the Kubernetes API's schemas.)

Usage: test_deploy.py HDRPOSTD SOURCE_ROOT NODE"""

import os
import re
import json
import shlex
import struct
import subprocess
import sys
import tempfile
import threading
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402
from harness import point  # noqa: E402


def dockerfile_stages(path):
    """[(stage name or None, [(instruction, argument)])], continuation lines joined, comments dropped."""
    stages, logical = [], ""
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        word, _, arg = logical.strip().partition(" ")
        logical = ""
        word = word.upper()
        if word == "FROM":
            m = re.search(r"\bAS\s+(\S+)", arg, re.I)
            stages.append((m.group(1) if m else None, []))
        stages[-1][1].append((word, arg.strip()))
    return stages


def env_of(instructions):
    """ENV KEY=VALUE ... (the form the Dockerfile uses) as a dict."""
    env = {}
    for word, arg in instructions:
        if word == "ENV":
            for item in shlex.split(arg):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def poll_ready(daemon, port, path, budget):
    """As the startup probe does: GET path until it answers 200, within budget seconds. True if it did."""
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline and daemon.proc.poll() is None:
        try:
            if harness.request(port, "GET", path, timeout=2)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def main():
    hdrpostd, root, node = sys.argv[1], sys.argv[2], sys.argv[3]
    deploy = os.path.join(root, "deploy")
    help_text = subprocess.run([hdrpostd, "--help"], capture_output=True, text=True).stdout
    known_env = set(re.findall(r"env (HDRPOST_[A-Z0-9_]+)", help_text))
    point("hdrpostd --help lists the environment variables of its settings", len(known_env) >= 20,
          help_text[-2000:])

    # --- The runtime packages --------------------------------------------------------------------------
    done = subprocess.run([os.path.join(deploy, "runtime-packages.sh"), hdrpostd], capture_output=True,
                          text=True)
    packages = done.stdout.split()
    point("runtime-packages.sh names a package for every library hdrpostd links", done.returncode == 0,
          done.stderr)
    needed = {"libvulkan1", "libmicrohttpd12", "libjansson4", "libwebp7", "libspng0", "libdeflate0",
              "libc6", "libavif15", "libjpeg62-turbo"}
    point("among them the Vulkan loader and the libraries of the HTTP, JSON, EXR and image codecs",
          needed <= set(packages) and any(p.startswith("libopenexr") for p in packages)
          and any(p.startswith("libopencolorio") for p in packages),
          f"missing {sorted(needed - set(packages))} in {packages}")
    status = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Status}\n", *packages],
                            capture_output=True, text=True).stdout
    installed = {l.split()[0] for l in status.splitlines() if l.endswith("install ok installed")}
    point("each of them is an installed Debian package (what the image's apt-get installs by name)",
          packages and installed == set(packages), f"not installed: {sorted(set(packages) - installed)}")

    # --- The Dockerfile -----------------------------------------------------------------------------------
    stages = dockerfile_stages(os.path.join(deploy, "Dockerfile"))
    build = next((ins for name, ins in stages if name == "build"), [])
    runtime = stages[-1][1] if stages else []
    build_runs = " ".join(arg for word, arg in build if word == "RUN")
    point("the build stage builds with deploy/debian.sh (the README's packages) and lists the runtime "
          "packages of the binary it built",
          "deploy/debian.sh build" in build_runs
          and "deploy/runtime-packages.sh build/daemon/hdrpostd" in build_runs, build_runs)
    copies = [arg.split() for word, arg in runtime if word == "COPY"]
    entry = [arg for word, arg in runtime if word == "ENTRYPOINT"]
    binary_copied = any(c[0] == "--from=build" and c[1] == "/src/build/daemon/hdrpostd" for c in copies)
    entry_path = re.findall(r'"([^"]+)"', entry[0])[0] if entry else None
    point("the runtime stage's entry point is the binary it copies from the build",
          binary_copied and entry_path and any(c[-1] == entry_path for c in copies), f"{copies} {entry}")
    runtime_runs = " ".join(arg for word, arg in runtime if word == "RUN")
    list_copied = any(c[0] == "--from=build" and c[1] == "/runtime-packages" and c[2] == "/tmp/runtime-packages"
                      for c in copies)
    point("the runtime stage copies the package list, refuses an empty one, and installs it with Mesa's Vulkan "
          "drivers (lavapipe, no GPU) and what NVIDIA's mounted driver loads (GLVND, Xext)",
          list_copied and "test -s /tmp/runtime-packages" in runtime_runs
          and "$(cat /tmp/runtime-packages)" in runtime_runs
          and all(p in runtime_runs.split() for p in ("mesa-vulkan-drivers", "libglvnd0", "libegl1", "libxext6")),
          f"{copies}\n{runtime_runs}")
    image_env = env_of(runtime)
    caps = image_env.get("NVIDIA_DRIVER_CAPABILITIES", "").split(",")
    point("the image asks the NVIDIA container toolkit for the Vulkan ICD (graphics) and NVML (utility)",
          "graphics" in caps and "utility" in caps, str(image_env))
    unknown = sorted(k for k in image_env if k.startswith("HDRPOST_") and k not in known_env)
    point("every HDRPOST_ variable the image sets is a setting of hdrpostd", not unknown, str(unknown))
    user = [arg for word, arg in runtime if word == "USER"]
    point("the image runs as a numeric user that is not root",
          len(user) == 1 and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", user[0]) is not None, str(user))
    made_uid = re.findall(r"useradd [^&]*--uid (\d+)", runtime_runs)
    made_gid = re.findall(r"groupadd [^&]*--gid (\d+)", runtime_runs)
    home = re.findall(r"install -d -o (\d+) -g (\d+) [^&]*?(/\S+)", runtime_runs)
    uid, _, gid = user[0].partition(":") if user else ("", "", "")
    point("USER is the user and group the image makes, who own its home (the pipeline cache's directory)",
          made_uid == [uid] and made_gid == [gid] and home and home[0][:2] == (uid, gid)
          and os.path.dirname(image_env.get("HDRPOST_PIPELINE_CACHE", "")) == home[0][2],
          f"USER {user}, useradd {made_uid}, groupadd {made_gid}, home {home}, env {image_env}")
    exposed = " ".join(arg for word, arg in runtime if word == "EXPOSE").split()
    listen_port = image_env.get("HDRPOST_LISTEN", "").rpartition(":")[2]
    probe_port = image_env.get("HDRPOST_PROBE_LISTEN", "").rpartition(":")[2]
    point("the image exposes the ports its HDRPOST_LISTEN and HDRPOST_PROBE_LISTEN bind on every address",
          sorted(exposed) == sorted([listen_port, probe_port])
          and image_env.get("HDRPOST_LISTEN", "").startswith("0.0.0.0:")
          and image_env.get("HDRPOST_PROBE_LISTEN", "").startswith("0.0.0.0:"),
          f"EXPOSE {exposed}, env {image_env}")
    # The image's own settings alone (no token): listening on every address, the daemon must refuse to start
    # and say what to set (docs/SECURITY.md).
    alone = {k: v for k, v in image_env.items() if k.startswith("HDRPOST_")}
    alone["HDRPOST_LISTEN"] = "0.0.0.0:0"
    alone["HDRPOST_PROBE_LISTEN"] = ""
    alone["HDRPOST_PIPELINE_CACHE"] = ""
    refused = harness.Child("image settings alone", [hdrpostd], env=alone)
    rc = refused.wait_exit(30)
    refused.kill()
    point("run with the image's settings and no token, the daemon refuses to start (exit 2) and names "
          "HDRPOST_AUTH_TOKEN and HDRPOST_ALLOW_NO_AUTH", rc == 2 and "HDRPOST_AUTH_TOKEN" in refused.log()
          and "HDRPOST_ALLOW_NO_AUTH" in refused.log(), f"exit {rc}\n{refused.log()}")

    # --- The Kubernetes manifests -------------------------------------------------------------------------
    # Rendered as `kubectl apply -k` renders them (tests/kustomize.mjs, on Node; a missing node fails here).
    # The nvidia overlay is what runs on GPU nodes: the pod's checks below are its.
    def render(name):
        where = os.path.join(deploy, "kubernetes", *name.split("/"))
        try:
            done = subprocess.run([node, os.path.join(root, "tests", "kustomize.mjs"), where], capture_output=True,
                                  text=True, timeout=60)
        except OSError as e:
            return None, f"cannot run node ({node!r}): {e}"
        return (json.loads(done.stdout), "") if done.returncode == 0 else (None, done.stderr)

    rendered = {name: render(name) for name in ("base", "overlays/nvidia", "overlays/lavapipe", "prometheus-adapter")}
    point("the base, both overlays and the Prometheus adapter's rule render (tests/kustomize.mjs)",
          all(objects for objects, _ in rendered.values()),
          "\n".join(f"{name}: {why}" for name, (objects, why) in rendered.items() if not objects))
    for name in ("base", "overlays/nvidia", "overlays/lavapipe"):
        pods = [o["spec"]["template"]["spec"] for o in rendered[name][0] or [] if o.get("kind") == "Deployment"]
        names = {e["name"] for p in pods for c in p.get("containers", []) for e in c.get("env", [])}
        unknown = sorted(n for n in names if n.startswith("HDRPOST_") and n not in known_env)
        point(f"every HDRPOST_ variable {name}'s pods set is a setting of hdrpostd", pods and not unknown,
              str(unknown))
    docs = rendered["overlays/nvidia"][0] or []
    kinds = {d["kind"]: d for d in docs if d}
    point("the manifest has a Deployment, a Service and a PodDisruptionBudget",
          {"Deployment", "Service", "PodDisruptionBudget"} <= set(kinds), str(list(kinds)))
    dep = kinds.get("Deployment", {})
    spec = dep.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    containers = pod.get("containers", [{}])
    c = containers[0]
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    selectors = [spec.get("selector", {}).get("matchLabels", {}),
                 kinds.get("Service", {}).get("spec", {}).get("selector", {}),
                 kinds.get("PodDisruptionBudget", {}).get("spec", {}).get("selector", {}).get("matchLabels", {})]
    point("the Deployment's, the Service's and the budget's selectors all match the pods' labels",
          labels and all(s and all(labels.get(k) == v for k, v in s.items()) for s in selectors),
          f"labels {labels}, selectors {selectors}")
    env = {e["name"]: e for e in c.get("env", [])}
    unknown = sorted(k for k in env if k.startswith("HDRPOST_") and k not in known_env)
    point("every HDRPOST_ variable the pod sets is a setting of hdrpostd", not unknown, str(unknown))
    values = {k: str(e["value"]) for k, e in env.items() if "value" in e}
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    listen = values.get("HDRPOST_LISTEN", "")
    point("the container port is the one HDRPOST_LISTEN binds, on every address",
          listen.startswith("0.0.0.0:") and ports.get("http") == int(listen.rpartition(":")[2] or 0),
          f"ports {ports}, HDRPOST_LISTEN {listen}")
    probes = {name: c.get(name, {}).get("httpGet", {}) for name in ("startupProbe", "readinessProbe",
                                                                    "livenessProbe")}
    probe_listen = values.get("HDRPOST_PROBE_LISTEN", "")
    point("the probes port is the one HDRPOST_PROBE_LISTEN binds, on every address",
          probe_listen.startswith("0.0.0.0:") and ports.get("probes") == int(probe_listen.rpartition(":")[2] or 0),
          f"ports {ports}, HDRPOST_PROBE_LISTEN {probe_listen}")
    point("startup and readiness probes ask /readyz, liveness /livez, on the probe listener (they answer while "
          "the API's connections are all taken)",
          probes["startupProbe"].get("path") == "/readyz" and probes["readinessProbe"].get("path") == "/readyz"
          and probes["livenessProbe"].get("path") == "/livez"
          and all(p.get("port") in ("probes", ports.get("probes")) for p in probes.values()), str(probes))
    token_env = env.get("HDRPOST_AUTH_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    point("the pods listen on every address with a token from a required Secret (or say allow_no_auth plainly)",
          (token_env.get("name") and not token_env.get("optional", False))
          or values.get("HDRPOST_ALLOW_NO_AUTH") == "true", str(env.get("HDRPOST_AUTH_TOKEN")))
    svc_ports = kinds.get("Service", {}).get("spec", {}).get("ports", [])
    point("the Service sends to the container's port",
          svc_ports and all(p.get("targetPort") in ("http", ports.get("http")) for p in svc_ports), str(svc_ports))
    annotations = spec.get("template", {}).get("metadata", {}).get("annotations", {})
    point("Prometheus is pointed at /metrics on the container's port",
          annotations.get("prometheus.io/path") == "/metrics"
          and annotations.get("prometheus.io/port") == str(ports.get("http")), str(annotations))
    gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    point("each replica asks for one GPU (the daemon drives one device)", gpus == 1, str(c.get("resources")))
    caps = values.get("NVIDIA_DRIVER_CAPABILITIES", "").split(",")
    point("the pod asks for the Vulkan ICD and NVML too (an env in the pod spec replaces the image's)",
          "graphics" in caps and "utility" in caps, str(caps))
    security = pod.get("securityContext", {})
    image_uid = int(user[0].split(":")[0]) if user else None
    point("the pod runs as the image's user, not root",
          security.get("runAsNonRoot") is True and security.get("runAsUser") == image_uid, str(security))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    # Only a pause this test can read: anything else in preStop fails the point rather than count as 0 s.
    pause = (float(command[1]) if set(pre_stop) == {"exec"} and len(command) == 2 and command[0] == "sleep"
             and re.fullmatch(r"[0-9.]+", command[1]) else None if pre_stop else 0.0)
    drain = float(values.get("HDRPOST_SHUTDOWN_TIMEOUT_S", "30"))
    point("the grace period covers the preStop pause and the drain's timeout",
          pause is not None and grace > pause + drain, f"grace {grace}, preStop {pre_stop}, drain {drain}")
    device = values.get("HDRPOST_DEVICE", "")
    point("the pod names its GPU (HDRPOST_DEVICE), so that a driver that did not load fails the start-up instead "
          "of leaving the daemon on the image's CPU device", device != "" and not device.isdigit()
          and device.lower() not in ("llvmpipe", "lavapipe", "cpu"), repr(device))
    sc = c.get("securityContext", {})
    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
    point("the container cannot gain privileges, has no capabilities and a read-only root file system, with "
          "/tmp on a volume", sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"] and sc.get("readOnlyRootFilesystem") is True
          and "/tmp" in mounts, f"{sc} {mounts}")
    cache = values.get("HDRPOST_PIPELINE_CACHE", "")
    point("the pipeline cache is written into a mounted volume",
          cache and os.path.dirname(cache) in mounts, f"cache {cache}, mounts {mounts}")

    # --- The daemon with the pod's settings ------------------------------------------------------------------
    # The values as the pod gives them, but on a free loopback port, with the cache in a temporary directory
    # (the test does not own port 8080 or /var/cache), on the test's device (HDRPOST_DEVICE names the pod's
    # GPU), and with every frame held 2 s on the GPU thread (the test-only HDRPOST_TEST_GPU_DELAY_MS), so
    # that a frame is still in flight when SIGTERM comes. The probes' budgets come from the manifest.
    port = harness.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        run_env = {k: v for k, v in values.items() if k.startswith("HDRPOST_")}
        run_env["HDRPOST_LISTEN"] = f"{harness.HOST}:{port}"
        probe_port = harness.free_port()
        run_env["HDRPOST_PROBE_LISTEN"] = f"{harness.HOST}:{probe_port}"
        run_env["HDRPOST_PIPELINE_CACHE"] = os.path.join(tmp, os.path.basename(cache))
        run_env["HDRPOST_DEVICE"] = os.environ.get("HDRPOST_TEST_DEVICE", "")
        run_env["HDRPOST_TEST_GPU_DELAY_MS"] = "2000"
        # The Secret's token: the probes and the scrape must still answer without it.
        token = "deploy-test-token"
        if "HDRPOST_AUTH_TOKEN" in env:
            run_env["HDRPOST_AUTH_TOKEN"] = token
        auth = {"Authorization": f"Bearer {token}"}
        startup = c.get("startupProbe", {})
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
        d = harness.Child("pod settings", [hdrpostd], env=run_env)
        try:
            ready = poll_ready(d, probe_port, startup.get("httpGet", {}).get("path", "/readyz"), budget)
            status = {}
            for name, probe in probes.items():
                try:
                    status[name] = harness.request(probe_port, "GET", probe.get("path", "/"))[0]
                except OSError as e:
                    status[name] = str(e)
            point("with the pod's settings the daemon is ready within the startup probe's budget and every "
                  "probe answers 200", ready and all(s == 200 for s in status.values()),
                  f"{status}\n{d.log()}")
            path = annotations.get("prometheus.io/path", "/metrics")
            code, _, body = harness.request(port, "GET", path)
            gpu = harness.request(port, "GET", "/v1/gpu")[0]
            point("with the pod's token set, the annotated path still answers Prometheus text without it (what "
                  "annotation scraping needs), and /v1/gpu does not",
                  code == 200 and b"hdrpost_" in body and gpu == (401 if "HDRPOST_AUTH_TOKEN" in run_env else 200),
                  f"{path}: {code} {body[:300]!r}; /v1/gpu {gpu}")
            # The autoscaler's per-pod metrics come from the Prometheus adapter's rules, whose series the
            # ServiceMonitor scrapes: each must be a gauge this daemon exports, on the path it scrapes.
            monitor = kinds.get("ServiceMonitor", {}).get("spec", {}).get("endpoints", [{}])
            sm_path = monitor[0].get("path", "/metrics") if monitor else "/metrics"
            sm_code, _, sm_body = harness.request(port, "GET", sm_path)
            adapter = next((o for o in rendered["prometheus-adapter"][0] or [] if o.get("kind") == "ConfigMap"), {})
            rules = (yaml.safe_load(adapter.get("data", {}).get("config.yaml", "")) or {}).get("rules", [])
            series = {re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", r.get("seriesQuery", "")).group(1): r["name"]["as"]
                      for r in rules if re.match(r"\s*[a-zA-Z_:]", r.get("seriesQuery", ""))}
            hpa_metrics = [m["pods"]["metric"]["name"] for m in kinds.get("HorizontalPodAutoscaler", {})
                           .get("spec", {}).get("metrics", []) if m.get("type") == "Pods"]
            exported = re.findall(rb"^# TYPE (\S+) gauge$", sm_body, re.M)
            point("the ServiceMonitor's path answers without the token, and every per-pod metric the autoscaler "
                  "reads comes, through the Prometheus adapter's rule, from a gauge the daemon exports there",
                  sm_code == 200 and hpa_metrics and all(
                      any(exposed == m and s.encode() in exported for s, exposed in series.items())
                      for m in hpa_metrics),
                  f"{sm_path}: {sm_code}; autoscaler {hpa_metrics}; adapter {series}; gauges {exported}")
            # A 2 x 2 grey PFM posted as the raw body, in flight (held on the GPU thread) when SIGTERM comes.
            pfm = b"PF\n2 2\n-1.0\n" + struct.pack("<12f", *([0.18] * 12))
            answer = {}

            def post():
                try:
                    answer["status"] = harness.request(port, "POST", "/v1/render?output.format=png", pfm,
                                                       auth, timeout=grace)[0]
                except OSError as e:
                    answer["status"] = str(e)

            poster = threading.Thread(target=post)
            poster.start()
            in_flight = d.wait_line(r"POST /v1/render|test_gpu_delay", 5) is not None
            time.sleep(0.5)
            t0 = time.monotonic()
            rc = d.stop(timeout=grace)
            took = time.monotonic() - t0
            poster.join(timeout=grace)
            point("SIGTERM with a frame in flight: the frame is answered 200 and the daemon exits 0 within the "
                  "grace period less the preStop pause",
                  answer.get("status") == 200 and rc == 0 and took < grace - (pause or 0.0),
                  f"answer {answer}, in flight {in_flight}, exit {rc} after {took:.1f} s\n{d.log()}")
            point("and saves the pipeline cache into the volume's path",
                  os.path.exists(run_env["HDRPOST_PIPELINE_CACHE"]), d.log())
        finally:
            d.kill()

    print(f"1..{harness.count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
