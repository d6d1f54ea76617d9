#!/usr/bin/env python3
"""Runs the workspace's test executables several at a time (scripts/test).

`cargo test` runs one test executable after another. Most of this project's
test time is spent in `framer/e2e`'s process tests waiting on the processes
they spawn (deadlines, watchdogs, lingering servers), so on a 2-core machine
the CPU idles while the executables queue. This runner builds once with
`cargo test --no-run` (the cargo arguments given), then runs every test
executable cargo reports, `--jobs` at a time, each as cargo would: from its
package's directory, with `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set. Each
keeps its own test threads (`RUST_TEST_THREADS` passes through). Doc tests are
not executables: scripts/test runs them with `cargo test --doc`.

Contract:
- Every executable runs, whatever the others do; the exit status is 0 only
  when every one exits 0 (101, as cargo, otherwise).
- Each executable's output is printed whole when it ends, under cargo's
  `Running` header, so blocks never interleave; the end prints each
  executable's time, the slowest first, and the failed ones by name.
- Deadline: an executable still running after `--timeout` seconds is killed
  with its process group and counts as failed ("timed out"). The tests hold
  watchdogs of their own; this one bounds the run when one of those fails.

Usage: scripts/test_binaries.py [--jobs N] [--timeout S] CARGO_ARGS... [-- TEST_ARGS...]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Started first, so that the longest ones do not start last and run alone
# (their times in a clean CI run: 140, 80 and 50 s at two test threads).
LONGEST = ["probe", "rmcp_client", "rmcp_server", "probe_soak", "soak", "stdio_v2", "server_admission"]


def executables(cargo_args):
    """Builds the tests and returns (name, source, executable, package dir), longest known first."""
    command = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    build = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if build.returncode != 0:
        sys.exit(build.returncode)
    found = []
    for line in build.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        package_dir = Path(message["manifest_path"]).parent
        source = os.path.relpath(target["src_path"], package_dir)
        found.append((target["name"], source, message["executable"], package_dir))
    rank = {name: i for i, name in enumerate(LONGEST)}
    found.sort(key=lambda e: (rank.get(e[0] if e[1].startswith("tests/") else "", len(LONGEST)), str(e[3]), e[1]))
    return found


def run_one(entry, test_args, timeout, lock, results):
    name, source, exe, package_dir = entry
    env = dict(os.environ, CARGO_MANIFEST_DIR=str(package_dir), CARGO_PKG_NAME=package_dir.name)
    begun = time.monotonic()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(
            [exe, *test_args], cwd=package_dir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            status = child.wait(timeout=timeout)
            verdict = "ok" if status == 0 else f"exit status {status}"
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            status, verdict = -1, f"timed out after {timeout} s"
        took = time.monotonic() - begun
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    label = f"{os.path.relpath(package_dir, ROOT)}/{source}"
    with lock:
        print(f"     Running {label} ({os.path.relpath(exe, ROOT)}) [{took:.1f} s, {verdict}]", flush=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        results.append((label, took, status, verdict))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4, help="test executables at once (default 4)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one executable may run (default 900)")
    # Everything after the runner's own options is cargo's, then `--` and the tests'.
    options, args = parser.parse_known_args()
    cargo_args, test_args = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
    if options.jobs < 1:
        parser.error("--jobs must be at least 1")

    found = executables(cargo_args)
    begun = time.monotonic()
    lock, results = threading.Lock(), []
    with ThreadPoolExecutor(max_workers=options.jobs) as pool:
        for entry in found:
            pool.submit(run_one, entry, test_args, options.timeout, lock, results)
    wall = time.monotonic() - begun

    failed = [r for r in results if r[2] != 0]
    print(f"\n::: {len(results)} test executables, {options.jobs} at a time: {wall:.0f} s; the slowest:")
    for label, took, _, verdict in sorted(results, key=lambda r: -r[1])[:8]:
        print(f"{took:8.1f} s  {label} ({verdict})")
    if failed or len(results) != len(found):
        for label, _, _, verdict in failed:
            print(f"FAILED: {label} ({verdict})")
        if len(results) != len(found):
            print(f"FAILED: {len(found) - len(results)} executables did not report")
        return 101
    return 0


if __name__ == "__main__":
    sys.exit(main())
