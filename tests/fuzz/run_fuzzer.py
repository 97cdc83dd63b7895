#!/usr/bin/env python3
"""Runs one libFuzzer target for a bounded time and says what it did as TAP.

Usage: run_fuzzer.py EXE SEEDS DICT REGRESSIONS [SECONDS] [--gpu]. HDRPOST_FUZZ_SECONDS, else SECONDS, else 45,
bounds the run. --gpu: the target makes a Vulkan device; HDRPOST_FUZZ_PRELOAD (deploy/debian.sh: lavapipe's
library) is preloaded, so that the driver stays mapped and its memory is not reported leaked when the loader
unloads it, as the daemon's children are under AddressSanitizer, and gpu.supp leaves the driver's own blocks
out of LeakSanitizer's reports. The seeds
are copied into a fresh working corpus (the run's own discoveries stay out of the source tree). A crash, a
leak, a sanitizer report or a failed check of the target's is one failed point; the input that did it is
copied into REGRESSIONS (named by its hash) for the developer to commit, and printed in hex, so that the
ordinary suite (replay_<target>) replays it from then on. Executions and coverage go in the point's name:
the numbers docs/RELIABILITY.md records for campaigns."""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    gpu = "--gpu" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--gpu"]
    exe, seeds, dictionary, regressions = args[0:4]
    seconds = int(os.environ.get("HDRPOST_FUZZ_SECONDS") or (args[4] if len(args) > 4 else "45"))
    name = os.path.basename(exe)
    with tempfile.TemporaryDirectory(prefix=f"hdrpostd-{name}-") as work:
        corpus = os.path.join(work, "corpus")
        shutil.copytree(seeds, corpus)
        artifacts = os.path.join(work, "artifacts") + os.sep
        os.makedirs(artifacts)
        cmd = [exe, corpus, f"-dict={dictionary}", f"-max_total_time={seconds}", "-print_final_stats=1",
               f"-artifact_prefix={artifacts}", "-max_len=65536", "-timeout=10", "-rss_limit_mb=4096"]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        if gpu:
            env["LSAN_OPTIONS"] = "suppressions=" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu.supp")
            if os.environ.get("HDRPOST_FUZZ_PRELOAD"):
                env["LD_PRELOAD"] = os.environ["HDRPOST_FUZZ_PRELOAD"]
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                             env=env, timeout=seconds + 240)
        log = run.stdout
        execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
        cov = re.findall(r"#\d+\s+\w+\s+cov: (\d+)", log)
        found = sorted(glob.glob(artifacts + "*"))
        ok = run.returncode == 0 and not found
        summary = (f"{name}: {execs[-1] if execs else '?'} executions in {seconds} s, {cov[-1] if cov else '?'} "
                   f"edges covered, {'no finding' if ok else 'a finding'}")
        print(f"{'ok' if ok else 'not ok'} 1 - {summary}")
        if not ok:
            for line in log.splitlines()[-60:]:
                print(f"# {line}")
            os.makedirs(regressions, exist_ok=True)
            for path in found:
                data = open(path, "rb").read()
                kept = os.path.join(regressions, hashlib.sha1(data).hexdigest()[:16])
                shutil.copyfile(path, kept)
                print(f"# the input, kept as {kept} (commit it): {data[:512].hex()}")
        print("1..1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
