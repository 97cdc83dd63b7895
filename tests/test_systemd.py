"""deploy/systemd/: the unit for bare GPU hosts and its settings file, against systemd and the daemon. No systemd
runs in CI, so:
- `systemd-analyze verify` checks the unit in a root that holds systemd's own units, the unit in
  /etc/systemd/system and the built binary where ExecStart names it; any line it prints fails the test (an
  unknown key is only a warning with exit 0);
- ExecStart is where `meson install` puts hdrpostd (the build's meson-info) and where docs/DEPLOY.md says;
- every HDRPOST_ variable of the settings file (set or commented out) and of the unit is a setting of hdrpostd
  (`hdrpostd --help`);
- the daemon is started as the unit starts it (ExecStart's arguments, the unit's Environment= and the
  settings file, on a loopback port, the cache in a temporary directory) with a NOTIFY_SOCKET of the test's:
  it must send READY=1 only once /readyz answers 200, within TimeoutStartSec, and STOPPING=1 then exit 0
  on SIGTERM within TimeoutStopSec; and the settings file as shipped (listening on every address, no token)
  must make it refuse to start.
The sandbox itself (DynamicUser, the system call filter, the device list) needs systemd running the unit;
docs/bench-raw/2026-11-26-h200-systemd-strace.txt has the calls and devices the daemon used on an H200.

Usage: test_systemd.py HDRPOSTD SOURCE_ROOT BUILD_ROOT"""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
import harness  # noqa: E402
from harness import point  # noqa: E402


def unit_entries(path):
    """[(section, key, value)] of a unit file, in order (keys may repeat), continuation lines joined."""
    entries, section, logical = [], None, ""
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if not logical and (not line.strip() or line.lstrip()[0] in "#;"):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        line, logical = (logical + line).strip(), ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        entries.append((section, key.strip(), value.strip()))
    return entries


def env_file(path):
    """The NAME=value lines of an EnvironmentFile, as systemd reads them (comments and blank lines skipped)."""
    values = {}
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def seconds(value):
    """A systemd time span such as 45, 45s, 3min, 1min 30s, in seconds."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)\s*([a-z]*)", value))


def main():
    hdrpostd, root, build = sys.argv[1], sys.argv[2], sys.argv[3]
    unit_path = os.path.join(root, "deploy", "systemd", "hdrpostd.service")
    example_path = os.path.join(root, "deploy", "systemd", "hdrpostd.env")
    help_text = subprocess.run([hdrpostd, "--help"], capture_output=True, text=True).stdout
    known_env = set(re.findall(r"env (HDRPOST_[A-Z0-9_]+)", help_text))
    point("hdrpostd --help lists the environment variables of its settings", len(known_env) >= 20, help_text[-2000:])

    entries = unit_entries(unit_path)
    service = [(k, v) for s, k, v in entries if s == "Service"]
    first = {k: v for k, v in reversed(service)}
    exec_start = shlex.split(first.get("ExecStart", ""))
    exec_path = exec_start[0] if exec_start else ""

    # --- systemd-analyze verify ------------------------------------------------------------------------------
    analyze = shutil.which("systemd-analyze")
    point("systemd-analyze is installed (Debian's systemd; deploy/debian.sh test installs it)", analyze,
          os.environ.get("PATH"))
    units_dir = next((d for d in ("/usr/lib/systemd/system", "/lib/systemd/system") if os.path.isdir(d)), None)
    with tempfile.TemporaryDirectory() as fake_root:
        if analyze and units_dir and exec_path.startswith("/"):
            shutil.copytree(units_dir, os.path.join(fake_root, "usr/lib/systemd/system"), symlinks=True)
            os.makedirs(os.path.join(fake_root, "etc/systemd/system"))
            shutil.copy(unit_path, os.path.join(fake_root, "etc/systemd/system"))
            os.makedirs(os.path.join(fake_root, os.path.dirname(exec_path.lstrip("/"))), exist_ok=True)
            shutil.copy(hdrpostd, os.path.join(fake_root, exec_path.lstrip("/")))
            # The same file as the template of a replica per GPU (docs/DEPLOY.md, "Several GPUs")
            shutil.copy(unit_path, os.path.join(fake_root, "etc/systemd/system", "hdrpostd@.service"))
            runs = [subprocess.run([analyze, "verify", f"--root={fake_root}", name], capture_output=True, text=True,
                                   timeout=120)
                    for name in ("hdrpostd.service", "hdrpostd@0.service",
                                 "hdrpostd@GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809.service")]
            done = runs[0] if all(r.returncode == 0 for r in runs) else next(r for r in runs if r.returncode != 0)
            said = "".join(r.stdout + r.stderr for r in runs).strip()
        else:
            done, said = None, f"not run: systemd-analyze {analyze}, units {units_dir}, ExecStart {exec_path!r}"
        point("systemd-analyze verify passes the unit (ExecStart's binary in place), and the same file as the template "
              "hdrpostd@.service for an instance by index and one by GPU UUID, and prints nothing: no unknown key, no "
              "bad value, no missing unit", done is not None and done.returncode == 0 and not said,
              f"exit {done.returncode if done else None}\n{said}")

    # --- Where the unit looks ---------------------------------------------------------------------------------
    try:
        installed = json.load(open(os.path.join(build, "meson-info", "intro-installed.json"), encoding="utf-8"))
    except OSError as e:
        installed = {}
        print(f"# {e}")
    install_path = next((dst for src, dst in installed.items() if os.path.basename(src) == "hdrpostd"
                         and os.path.basename(dst) == "hdrpostd"), None)
    deploy_doc = open(os.path.join(root, "docs", "DEPLOY.md"), encoding="utf-8").read()
    point("ExecStart runs hdrpostd where `meson install` puts it, the path docs/DEPLOY.md gives",
          exec_path and exec_path == install_path and exec_path in deploy_doc,
          f"ExecStart {exec_path!r}, meson installs to {install_path!r}")
    env_files = [v.lstrip("-") for k, v in service if k == "EnvironmentFile"]
    point("the unit is Type=notify and reads /etc/hdrpostd/hdrpostd.env, the file deploy/systemd/hdrpostd.env is "
          "installed as (docs/DEPLOY.md), then its own /etc/hdrpostd/%N.env (%N: hdrpostd, or hdrpostd@0 for a "
          "replica), a later file winning", first.get("Type") == "notify"
          and env_files == ["/etc/hdrpostd/hdrpostd.env", "/etc/hdrpostd/%N.env"]
          and "/etc/hdrpostd/hdrpostd.env" in deploy_doc and "hdrpostd@" in deploy_doc,
          f"Type {first.get('Type')}, EnvironmentFile {env_files}")

    # --- The settings ----------------------------------------------------------------------------------------
    unit_env = {}
    for k, v in service:
        if k == "Environment":
            for item in shlex.split(v):
                name, _, value = item.partition("=")
                unit_env[name] = value
    example = env_file(example_path)
    mentioned = set(re.findall(r"\b(HDRPOST_[A-Z0-9_]+)\s*=", open(example_path, encoding="utf-8").read()))
    unknown = sorted(n for n in mentioned | set(unit_env) | set(example)
                     if n.startswith("HDRPOST_") and n not in known_env)
    point("every HDRPOST_ variable of the settings file (set or commented out) and of the unit is a setting of "
          "hdrpostd", mentioned and not unknown, f"unknown: {unknown}")
    cache_dirs = [v for k, v in service if k == "CacheDirectory"]
    cache = unit_env.get("HDRPOST_PIPELINE_CACHE", "")
    point("the pipeline cache, HOME and XDG_CACHE_HOME are in the unit's CacheDirectory, the one place it may write "
          "(ProtectSystem=strict), named by the unit (%N): /var/cache/hdrpostd as before, /var/cache/hdrpostd@0 for "
          "a replica, so that replicas share no cache file",
          first.get("ProtectSystem") == "strict" and cache_dirs == ["%N"]
          and os.path.dirname(cache) == f"/var/cache/{cache_dirs[0]}" and unit_env.get("HOME") == os.path.dirname(cache)
          and unit_env.get("XDG_CACHE_HOME") == os.path.dirname(cache), f"{cache_dirs} {unit_env}")

    # --- The daemon as the unit starts it --------------------------------------------------------------------
    start_budget = seconds(first.get("TimeoutStartSec", "90"))
    stop_budget = seconds(first.get("TimeoutStopSec", "90"))
    argv = [hdrpostd] + exec_start[1:]

    def unit_like_env(tmp, port):
        env = {**unit_env, **example}  # systemd: EnvironmentFile= wins over Environment=
        env["HDRPOST_LISTEN"] = f"{harness.HOST}:{port}"
        env["HDRPOST_PIPELINE_CACHE"] = os.path.join(tmp, "pipeline.cache")
        env["HOME"] = env["XDG_CACHE_HOME"] = tmp
        # The test's device: the file names the host's GPU.
        env["HDRPOST_DEVICE"] = os.environ.get("HDRPOST_TEST_DEVICE", "")
        return env

    # As shipped, the file listens on every address with an empty token: the daemon must refuse to start.
    with tempfile.TemporaryDirectory() as tmp:
        shipped = unit_like_env(tmp, 0)
        shipped["HDRPOST_LISTEN"] = example.get("HDRPOST_LISTEN", "").rpartition(":")[0] + ":0"
        refused = harness.Child("shipped settings", argv, env=shipped)
        rc = refused.wait_exit(30)
        refused.kill()
        point("with the settings file as shipped (every address, the token not yet set) the daemon refuses to start "
              "and names HDRPOST_AUTH_TOKEN", not shipped["HDRPOST_LISTEN"].startswith("127.") and rc == 2
              and "HDRPOST_AUTH_TOKEN" in refused.log(), f"listen {shipped['HDRPOST_LISTEN']}, exit {rc}\n"
              f"{refused.log()}")

    with tempfile.TemporaryDirectory() as tmp:
        port = harness.free_port()
        env = unit_like_env(tmp, port)
        if "HDRPOST_AUTH_TOKEN" in example:
            env["HDRPOST_AUTH_TOKEN"] = "systemd-test-token"
        notify_path = os.path.join(tmp, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(notify_path)
        env["NOTIFY_SOCKET"] = notify_path
        t0 = time.monotonic()
        d = harness.Child("as the unit starts it", argv, env=env)
        try:
            notices, ready_status, ready_at = [], None, None
            deadline = t0 + start_budget
            while ready_at is None and time.monotonic() < deadline and d.proc.poll() is None:
                sock.settimeout(0.5)
                try:
                    message = sock.recv(4096).decode(errors="replace")
                except socket.timeout:
                    continue
                notices.append(message)
                if "READY=1" in message.split("\n"):
                    ready_at = time.monotonic() - t0
                    try:
                        ready_status = harness.request(port, "GET", "/readyz")[0]
                    except OSError as e:
                        ready_status = str(e)
            point(f"started as the unit starts it, the daemon sends READY=1 over NOTIFY_SOCKET within TimeoutStartSec "
                  f"({start_budget:.0f} s), and /readyz already answers 200 then",
                  ready_at is not None and ready_status == 200,
                  f"notices {notices}, after {ready_at} s, /readyz {ready_status}\n{d.log()}")
            code, _, body = harness.request(port, "GET", "/v1/gpu", headers={"Authorization":
                                                                             "Bearer systemd-test-token"})
            point("and serves with the file's token", code == 200, f"{code} {body[:200]!r}")
            t1 = time.monotonic()
            d.proc.send_signal(15)
            stopping = False
            while not stopping and time.monotonic() - t1 < stop_budget:
                sock.settimeout(0.5)
                try:
                    stopping = "STOPPING=1" in sock.recv(4096).decode(errors="replace").split("\n")
                except socket.timeout:
                    if d.proc.poll() is not None:
                        break
            rc = d.wait_exit(max(1.0, stop_budget - (time.monotonic() - t1)))
            point(f"on SIGTERM it sends STOPPING=1 and exits 0 within TimeoutStopSec ({stop_budget:.0f} s)",
                  stopping and rc == 0, f"STOPPING=1 {stopping}, exit {rc}\n{d.log()}")
        finally:
            d.kill()
            sock.close()

    print(f"1..{harness.count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
