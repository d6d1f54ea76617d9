#!/usr/bin/env python3
"""The instruction-count regression gate (called by scripts/bench-check and
scripts/bench-baseline; see benches/GATE.md).

Runs the gungraun benches of benches/benches/instructions.rs under callgrind,
reads each bench's instruction count (Ir) from gungraun's JSON output, and
either compares the counts with the committed baseline (`check`) or rewrites
that baseline (`baseline`).

Exit status: 0 pass; 1 gate failure (a count rose by more than the
threshold, a baseline entry did not run, or a bench has no baseline);
2 the benches did not build or run (a failed assertion in a bench lands
here), or a usage error.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "benches" / "baseline" / "instructions.json"
# Allocation counts of the host's reader (benches/benches/allocations.rs):
# calls into the allocator, deterministic, gated beside the instructions.
ALLOC_BASELINE = ROOT / "benches" / "baseline" / "allocations.json"
ALLOC_CMD = [
    "cargo", "bench", "--quiet", "-p", "mcp-framer-benches", "--bench", "allocations", "--", "--json",
]
# The counts each allocation case is gated on.
ALLOC_KEYS = ["allocations", "reallocations"]
BENCH_CMD = [
    "cargo", "bench", "--quiet", "-p", "mcp-framer-benches", "--bench", "instructions",
    "--", "--output-format=json",
]
# gungraun's JSON summary schema these scripts read (`version` in each object).
SUMMARY_VERSION = "7"
# What the counts depend on besides our code: recorded in the baseline and
# compared on every check.
# The CPU matters too: glibc (memcpy, memset), memchr and simd-json pick their
# code paths from the CPU's features, as valgrind reports them.
TOOL_KEYS = ["rustc", "valgrind", "gungraun-runner", "glibc", "arch", "cpu", "cpu-features"]
# The features those dispatchers look at.
CPU_FEATURES = ["sse4_2", "avx", "avx2", "bmi2", "erms", "fsrm", "avx512f", "avx512bw"]


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def cpu():
    """The CPU model and which of CPU_FEATURES it has (Linux /proc/cpuinfo)."""
    model, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return model, " ".join(f for f in CPU_FEATURES if f in flags) or "unknown"


def tool_versions():
    libc = platform.libc_ver()
    model, features = cpu()
    return {
        "rustc": first_line(["rustc", "--version"]),
        "valgrind": first_line(["valgrind", "--version"]),
        "gungraun-runner": first_line(["gungraun-runner", "--version"]),
        "glibc": f"{libc[0]} {libc[1]}".strip() or "unknown",
        "arch": platform.machine(),
        "cpu": model,
        "cpu-features": features,
    }


def fail_run(message, stdout_lines):
    print(f"bench-gate: {message}", file=sys.stderr)
    for line in stdout_lines:
        print(f"  | {line}", file=sys.stderr)
    sys.exit(2)


def run_benches():
    """Runs the benches; returns {bench id: Ir}. Bench id: `group/function.id`."""
    print(f"bench-gate: running {' '.join(BENCH_CMD)}", file=sys.stderr, flush=True)
    proc = subprocess.run(BENCH_CMD, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        fail_run(
            f"the benches failed (exit {proc.returncode}): a bench panicked (a wrong frame count or "
            "parse result fails its assertion) or did not build; see the output above",
            [line for line in lines if not line.startswith("{")],
        )
    counts = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        summary = json.loads(line)
        if summary.get("version") != SUMMARY_VERSION:
            fail_run(f"gungraun summary version {summary.get('version')!r}, expected {SUMMARY_VERSION!r}", [])
        bench = f"{summary['group']}/{summary['function_name']}.{summary['id']}"
        callgrind = [p for p in summary["profiles"] if p["tool"] == "Callgrind"]
        if len(callgrind) != 1:
            fail_run(f"{bench}: expected one Callgrind profile, found {len(callgrind)}", [])
        ir = callgrind[0]["data"]["total"]["metrics"]["Ir"]["values"]["new"]
        if bench in counts:
            fail_run(f"bench id {bench} appears twice", [])
        counts[bench] = int(ir)
    if not counts:
        fail_run("the benches printed no results", lines)
    return counts


def run_allocations():
    """Runs the allocation benches; returns {case id/key: count} for ALLOC_KEYS
    and the full rows by case id."""
    print(f"bench-gate: running {' '.join(ALLOC_CMD)}", file=sys.stderr, flush=True)
    proc = subprocess.run(ALLOC_CMD, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        fail_run(f"the allocation benches failed (exit {proc.returncode}); see the output above", lines)
    counts, rows = {}, {}
    for line in lines:
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        rows[row["id"]] = row
        for key in ALLOC_KEYS:
            counts[f"{row['id']}.{key}"] = int(row[key])
    if not counts:
        fail_run("the allocation benches printed no results", lines)
    return counts, rows


def load_baseline():
    if not BASELINE.exists():
        return None
    return json.loads(BASELINE.read_text())


def delta_pct(old, new):
    return (new - old) * 100.0 / old if old else float("inf")


def print_table(old, new, threshold, unit="Ir"):
    """Prints bench, baseline Ir, new Ir, delta and a verdict against
    `threshold` (no verdict for changes when it is None); returns the
    (regressed, missing, unbaselined, improved) bench ids."""
    regressed, missing, unbaselined, improved = [], [], [], []
    rows = []
    for bench in sorted(set(old) | set(new)):
        if bench not in new:
            missing.append(bench)
            rows.append((bench, f"{old[bench]:,}", "-", "-", "MISSING: in the baseline, did not run"))
            continue
        if bench not in old:
            unbaselined.append(bench)
            rows.append((bench, "-", f"{new[bench]:,}", "-", "NEW: no baseline"))
            continue
        d = delta_pct(old[bench], new[bench])
        if threshold is None:
            verdict = "same" if d == 0 else "changed"
        elif d > threshold:
            regressed.append(bench)
            verdict = f"REGRESSED (> +{threshold:g}%)"
        elif d < -threshold:
            improved.append(bench)
            verdict = "improved"
        else:
            verdict = "ok"
        rows.append((bench, f"{old[bench]:,}", f"{new[bench]:,}", f"{d:+.2f}%", verdict))
    head = ("bench", f"baseline {unit}", f"new {unit}", "delta", "verdict")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    fmt = f"{{:<{widths[0]}}}  {{:>{widths[1]}}}  {{:>{widths[2]}}}  {{:>{widths[3]}}}  {{}}"
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths[:4]), "-" * 7))
    for row in rows:
        print(fmt.format(*row))
    return regressed, missing, unbaselined, improved


def compare_tools(recorded, current):
    """Warns loudly for every tool whose version differs from the baseline's."""
    differ = [k for k in TOOL_KEYS if recorded.get(k) != current.get(k)]
    for key in differ:
        print(f"WARNING: {key} differs from the baseline's: baseline {recorded.get(key)!r}, now {current.get(key)!r}")
    if differ:
        print(
            "WARNING: instruction counts depend on the compiler, valgrind, libc and the CPU's features; the comparison below may "
            "show changes that are not in our code. If they are explained by the tool change, run "
            "scripts/bench-baseline and commit the new baseline (say why in the commit message)."
        )
        print()


def cmd_check(threshold):
    baseline = load_baseline()
    if baseline is None:
        print(f"bench-check: no baseline at {BASELINE.relative_to(ROOT)}: run scripts/bench-baseline and commit it")
        sys.exit(1)
    current_tools = tool_versions()
    new = run_benches()
    print()
    print(f"Instruction counts (callgrind Ir) against {BASELINE.relative_to(ROOT)}; gate: +{threshold:g}%")
    compare_tools(baseline.get("taken_with", {}), current_tools)
    regressed, missing, unbaselined, improved = print_table(baseline["instructions"], new, threshold)
    print()
    failed = False
    if regressed:
        failed = True
        print(f"FAIL: {len(regressed)} bench(es) execute more than {threshold:g}% more instructions than the "
              f"baseline: {', '.join(regressed)}")
    if missing:
        failed = True
        print(f"FAIL: baseline entries that did not run (bench removed or renamed?): {', '.join(missing)}; "
              "if that is intended, run scripts/bench-baseline and commit the baseline")
    if unbaselined:
        failed = True
        print(f"FAIL: benches without a baseline: {', '.join(unbaselined)}; "
              "run scripts/bench-baseline and commit benches/baseline/instructions.json")
    if improved:
        print(f"note: {', '.join(improved)} improved by more than {threshold:g}%; run scripts/bench-baseline "
              "to lock the gain in (otherwise a later regression can hide behind it)")
    alloc_new, rows = run_allocations()
    print()
    print(f"Allocation counts of the host's reader against {ALLOC_BASELINE.relative_to(ROOT)}; gate: +{threshold:g}%")
    alloc_old = json.loads(ALLOC_BASELINE.read_text())["counts"] if ALLOC_BASELINE.exists() else {}
    a_regressed, a_missing, a_unbaselined, a_improved = print_table(alloc_old, alloc_new, threshold, "count")
    for case, row in sorted(rows.items()):
        print(f"  {case}: {row['allocations_per_message']:.3f} allocations per message, "
              f"{row['allocations_per_mib']:.2f} per MiB, {row['minflt_per_mib']:.1f} minor faults per MiB (information)")
    print()
    if a_regressed:
        failed = True
        print(f"FAIL: allocation counts rose by more than {threshold:g}%: {', '.join(a_regressed)}")
    if a_missing or a_unbaselined:
        failed = True
        print(f"FAIL: allocation cases missing or without a baseline: {', '.join(a_missing + a_unbaselined)}; "
              "run scripts/bench-baseline and commit benches/baseline/allocations.json")
    if a_improved:
        print(f"note: {', '.join(a_improved)} fell by more than {threshold:g}%; run scripts/bench-baseline to lock it in")
    if failed:
        sys.exit(1)
    print(f"PASS: {len(new)} benches and {len(alloc_new)} allocation counts within +{threshold:g}% of the baseline")


def cmd_baseline():
    baseline = load_baseline() or {"taken_with": {}, "instructions": {}}
    current_tools = tool_versions()
    new = run_benches()
    print()
    print(f"Rewriting {BASELINE.relative_to(ROOT)}: old baseline against this run")
    for key in TOOL_KEYS:
        if baseline["taken_with"].get(key) != current_tools[key]:
            print(f"  {key}: {baseline['taken_with'].get(key)!r} -> {current_tools[key]!r}")
    print_table(baseline["instructions"], new, None)
    document = {
        "about": "Instruction counts (callgrind Ir) of the gungraun benches in benches/benches/instructions.rs, "
        "keyed by group/function.id. Checked by scripts/bench-check, rewritten on purpose by "
        "scripts/bench-baseline; see benches/GATE.md.",
        "taken_with": current_tools,
        "instructions": dict(sorted(new.items())),
    }
    BASELINE.parent.mkdir(parents=True, exist_ok=True)
    BASELINE.write_text(json.dumps(document, indent=2) + "\n")
    alloc_new, rows = run_allocations()
    alloc_old = json.loads(ALLOC_BASELINE.read_text())["counts"] if ALLOC_BASELINE.exists() else {}
    print()
    print(f"Rewriting {ALLOC_BASELINE.relative_to(ROOT)}: old baseline against this run")
    print_table(alloc_old, alloc_new, None, "count")
    ALLOC_BASELINE.write_text(json.dumps({
        "about": "Allocator calls of the host's reader per case (benches/benches/allocations.rs), keyed by "
        "case.count; deterministic. Checked by scripts/bench-check, rewritten by scripts/bench-baseline; "
        "see benches/GATE.md.",
        "counts": dict(sorted(alloc_new.items())),
        "per_message": {case: row["allocations_per_message"] for case, row in sorted(rows.items())},
        "per_mib": {case: row["allocations_per_mib"] for case, row in sorted(rows.items())},
    }, indent=2) + "\n")
    print()
    print(f"wrote {len(new)} entries to {BASELINE.relative_to(ROOT)} and {len(alloc_new)} to "
          f"{ALLOC_BASELINE.relative_to(ROOT)}; review with git diff and commit them")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="compare with the committed baseline")
    check.add_argument("--threshold", type=float, default=2.0, metavar="PCT",
                       help="fail when a count rises by more than PCT percent (default 2)")
    sub.add_parser("baseline", help="rewrite the committed baseline")
    args = parser.parse_args()
    if args.command == "check":
        if args.threshold < 0:
            parser.error("--threshold must be >= 0")
        cmd_check(args.threshold)
    else:
        cmd_baseline()


if __name__ == "__main__":
    os.environ.setdefault("CARGO_TERM_COLOR", "never")
    main()
