#!/usr/bin/env python3
"""Tests scripts/bench-report's arithmetic and writers without running a
benchmark (scripts/test runs it; standard library only).

Builds a fake criterion directory holding every benchmark that
benches/report.toml's ratios name, in every group its suites list, plus the
pipe bench's CPU per MiB and the scale bench's runs, each with a distinct,
known cost. Every ratio the report prints is checked against the value this
test computes on its own from those costs, every verdict against the rule
(PASS or MISS only when the run's spread excludes the target), and a few rows
against figures worked out by hand, so a swapped ratio, an inverted CPU
ratio or a flipped comparison fails. Then the BMF: valid (numbers, lower ≤
value ≤ upper), in units a quick and a full run of the same code give the
same values in; and the record.
"""

import importlib.machinery
import importlib.util
import io
import json
import math
import re
import sys
import tempfile
import time
import tomllib
import unittest
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
loader = importlib.machinery.SourceFileLoader("bench_report", str(ROOT / "scripts" / "bench-report"))
spec = importlib.util.spec_from_loader("bench_report", loader)
report = importlib.util.module_from_spec(spec)
loader.exec_module(report)

SUITES = tomllib.loads((ROOT / "benches" / "report.toml").read_text())["suite"]
MIB = 1 << 20


def concrete(pattern):
    """The groups a pattern stands for here (`pipe/*/unpinned` → the five
    unpinned payload groups)."""
    if "*" not in pattern:
        return [pattern]
    groups = [f"pipe/{p}/{where}" for p in ("200B-text", "64KiB-tools-list", "64KiB-text", "1MiB-source", "1MiB-text")
              for where in ("same-cpu", "split-cpus", "unpinned")]
    regex = re.compile(report.glob_regex(pattern) + "$")
    return [g for g in groups if regex.match(g)]


def needed():
    """{(suite, group, id)} every ratio of report.toml names."""
    ids = set()
    for suite in SUITES:
        for ratio in suite.get("ratio", []):
            target = ratio.get("min")
            groups = [*(ratio.get("groups") or suite["groups"]), *(target if isinstance(target, dict) else [])]
            for group in (g for pattern in groups for g in concrete(pattern)):
                ids.update({(suite["bench"], group, ratio["of"]), (suite["bench"], group, ratio["vs"])})
    return ids


# Hand-worked rows: (group, id) -> median cost. Criterion: ns per iteration
# of 64 MiB (so ns per byte is cost / 2^26), ten samples within ± 1% (their
# spread ± 0.8%); CPU: ns per MiB, ten samples within ± 5% (their spread ±
# 4%); scale: KiB, three runs (their spread all three).
HAND_TIME = {
    # Targets are judged on split CPUs; the unpinned rows carry the same
    # costs (information, no verdict).
    **{(f"pipe/200B-text/{where}", "host-session"): 10e6 for where in ("split-cpus", "unpinned")},
    **{(f"pipe/200B-text/{where}", "rmcp"): 80e6 for where in ("split-cpus", "unpinned")},
    **{(f"pipe/200B-text/{where}", "hand-written"): 14e6 for where in ("split-cpus", "unpinned")},
    # host-session / rmcp = 8.0, target 4: PASS; host-session / hand-written
    # = 1.4 against 1.5: MISS.
    ("framing_200B", "read_into"): 1.0e6,
    ("framing_200B", "line_buffer"): 1.02e6,  # 1.02 against 1.0, both ± 30%: within noise
}
HAND_CPU = {
    **{(f"pipe/64KiB-tools-list/{where}", "host-session"): 500e3 for where in ("split-cpus", "unpinned")},
    # rmcp / host = 2.0 against 2.5: MISS
    **{(f"pipe/64KiB-tools-list/{where}", "rmcp"): 1000e3 for where in ("split-cpus", "unpinned")},
    # 3.0 against 1.3: PASS
    **{(f"pipe/64KiB-tools-list/{where}", "hand-written"): 1500e3 for where in ("split-cpus", "unpinned")},
}
HAND_IDLE = {"rmcp-adapter": [40.0, 42.0, 44.0], "rmcp": [30.0, 31.0, 32.0], "host": [25.0, 26.0, 27.0]}


class Fake:
    """A fake criterion directory with distinct, known costs; `spread` is
    each criterion bench's half-width, as a fraction of its median."""

    def __init__(self, root, now, iteration_bytes=64 * MIB, spread=0.01):
        self.root, self.time, self.cpu, self.bytes = root, {}, {}, iteration_bytes
        self.wide = {("framing_200B", "read_into"), ("framing_200B", "line_buffer")}
        cpu = {}
        for n, (suite, group, bench) in enumerate(sorted(needed())):
            if suite == "scale":
                continue
            # Distinct medians: 1.0, 1.37, 1.74, … ms per iteration.
            median = HAND_TIME.get((group, bench), (1 + 0.37 * n) * 1e6) * iteration_bytes / (64 * MIB)
            half = 0.3 if (group, bench) in self.wide else spread
            self.time[(group, bench)] = (median, median * (1 - 0.8 * half), median * (1 + 0.8 * half))
            d = root / f"b{n}" / "new"
            d.mkdir(parents=True)
            (d / "benchmark.json").write_text(json.dumps(
                {"full_id": f"{group}/{bench}", "throughput": {"Bytes": iteration_bytes}}))
            # Ten samples of two iterations each: median ± half/5, ± 2 half/5, …,
            # so their median is `median` and their spread median ± 4 half/5.
            per_iteration = [median * (1 + half * k * sign / 5) for k in range(1, 6) for sign in (1, -1)]
            (d / "sample.json").write_text(json.dumps(
                {"sampling_mode": "Flat", "iters": [2.0] * 10, "times": [2 * t for t in per_iteration]}))
            if suite == "pipe":
                mid = HAND_CPU.get((group, bench), 300e3 + 41e3 * n)
                # Ten iterations: mid ± 1%, mid ± 2%, …; their median is mid.
                samples = [mid * (1 + k * sign / 100) for k in range(1, 6) for sign in (1, -1)]
                self.cpu[(group, bench)] = samples
                cpu[f"{group}/{bench}"] = {"at": now, "cpu_ns_per_mib": samples}
        (root / "pipe_cpu.json").write_text(json.dumps({"about": "test", "benches": cpu}))
        (root / "slow_consumer").mkdir()
        rows = [{"consumer_us": 0, "reader": "coupled", "blocked_ms": 1.0}]
        (root / "slow_consumer" / "results.json").write_text(json.dumps({"at": now, "messages": 10, "rows": rows}))
        (root / "scale").mkdir()
        scale_rows = [{"n": 50, "client": client, "idle_kib": runs[1], "retained_kib": 100.0, "spawn_ping_ms": 2.0,
                       "shutdown_ms": 1.0, "runs": {"idle_kib": runs, "retained_kib": [90.0, 100.0, 110.0],
                                                    "spawn_ping_ms": [2.0] * 3, "shutdown_ms": [1.0] * 3}}
                      for client, runs in HAND_IDLE.items()]
        (root / "scale" / "results.json").write_text(json.dumps({"at": now, "runs": 3, "rows": scale_rows}))
        (root / "stdio_v2").mkdir()
        v2_rows = [{"measure": "results", "size": "200 B", "unit": "MiB/s", "transport": t, "value": v,
                    "runs": [v] * 3} for t, v in (("stdio", 40.0), ("stdio-v2", 30.0))]
        (root / "stdio_v2" / "results.json").write_text(json.dumps(
            {"at": now, "runs": 3, "quick": True, "rows": v2_rows, "h2load": {"requests_per_s": 9000.0}}))

    def expected(self, measure, group, of, vs):
        """cost(vs) / cost(of) and its spread, computed here from the fakes."""
        if measure == "idle-memory":
            a, b = sorted(HAND_IDLE[of]), sorted(HAND_IDLE[vs])
            return b[1] / a[1], b[0] / a[2], b[2] / a[0]
        if measure == "cpu":
            a, b = sorted(self.cpu[(group, of)]), sorted(self.cpu[(group, vs)])
            # Ten samples: the spread is the 2nd to the 9th.
            mid = lambda s: (s[4] + s[5]) / 2  # noqa: E731
            return mid(b) / mid(a), b[1] / a[8], b[8] / a[1]
        (ta, la, ha), (tb, lb, hb) = self.time[(group, of)], self.time[(group, vs)]
        return tb / ta, lb / ha, hb / la


def run_report(crit):
    """Every criterion suite's and the scale suite's rows, the estimates."""
    estimates = report.load_estimates(crit, None)
    rows = []
    with redirect_stdout(io.StringIO()):
        for suite in SUITES:
            if not suite.get("gate") and ("show" not in suite or suite.get("ratio")):
                rows += report.print_suite(suite, estimates, "test")
    return rows, estimates


def rule(low, high, target):
    if low >= target:
        return "PASS"
    return "MISS" if high < target else "within noise"


class Ratios(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.crit = Path(cls.tmp.name)
        cls.fake = Fake(cls.crit, time.time())
        cls.rows, cls.estimates = run_report(cls.crit)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def row(self, group, of, vs, measure):
        found = [r for r in self.rows if (r["group"], r["of"], r["vs"], r["measure"]) == (group, of, vs, measure)]
        self.assertEqual(len(found), 1, (group, of, vs, measure))
        return found[0]

    def test_every_ratio_is_cost_vs_over_cost_of(self):
        self.assertGreater(len(self.rows), 60)
        for r in self.rows:
            want, low, high = self.fake.expected(r["measure"], r["group"], r["of"], r["vs"])
            self.assertAlmostEqual(r["value"], round(want, 4), places=4, msg=r)
            self.assertAlmostEqual(r["low"], round(low, 4), places=4, msg=r)
            self.assertAlmostEqual(r["high"], round(high, 4), places=4, msg=r)
            self.assertLessEqual(r["low"], r["value"], r)
            self.assertLessEqual(r["value"], r["high"], r)

    def test_every_verdict_follows_the_spread(self):
        seen = set()
        for r in self.rows:
            if r["floor"]:
                self.assertEqual((r["target"], r["verdict"]), (None, "floor"), r)
            elif r["target"] is None:
                self.assertEqual(r["verdict"], "info", r)
            else:
                self.assertEqual(r["verdict"], rule(r["low"], r["high"], r["target"]), r)
                self.assertTrue(r["why"], r)
                seen.add(r["verdict"])
        self.assertEqual(seen, {"PASS", "MISS", "within noise"}, "the fakes exercise every verdict")

    def test_rows_worked_out_by_hand(self):
        # Throughput: host-session reads 64 MiB in 10 ms, rmcp in 80 ms.
        r = self.row("pipe/200B-text/split-cpus", "host-session", "rmcp", "throughput")
        self.assertEqual((r["value"], r["target"], r["verdict"]), (8.0, 4.0, "PASS"))
        self.assertEqual((r["low"], r["high"]), (round(80 * 0.992 / (10 * 1.008), 4), round(80 * 1.008 / (10 * 0.992), 4)))
        r = self.row("pipe/200B-text/split-cpus", "host-session", "hand-written", "throughput")
        self.assertEqual((r["value"], r["verdict"]), (1.4, "MISS"))
        # CPU per MiB: host 500 µs, rmcp 1000, hand-written 1500.
        r = self.row("pipe/64KiB-tools-list/split-cpus", "host-session", "rmcp", "cpu")
        self.assertEqual((r["value"], r["target"], r["verdict"]), (2.0, 2.5, "MISS"))
        self.assertEqual((r["low"], r["high"]), (round(960 / 520, 4), round(1040 / 480, 4)))
        r = self.row("pipe/64KiB-tools-list/split-cpus", "host-session", "hand-written", "cpu")
        self.assertEqual((r["value"], r["verdict"]), (3.0, "PASS"))
        # Idle memory at 50 sessions: adapter 42 KiB (40-44), rmcp 31 (30-32).
        r = self.row("scale/50", "rmcp-adapter", "rmcp", "idle-memory")
        self.assertEqual((r["value"], r["low"], r["high"]), (round(31 / 42, 4), round(30 / 44, 4), round(32 / 40, 4)))
        self.assertEqual(r["verdict"], "MISS")
        # A ratio near its target with wide bounds is no verdict.
        r = self.row("framing_200B", "read_into", "line_buffer", "throughput")
        self.assertEqual(r["verdict"], "within noise")

    def test_a_memory_cost_below_the_page_resolution_counts_as_the_resolution(self):
        E = report.Estimate
        # 50 sessions: RssAnon moves by 4 KiB pages, so 0 reads "under 0.08 KiB".
        estimates = {"idle-memory": {"scale/50/adapter": E(0.48, 0.0, 0.48), "scale/50/rmcp": E(11.44, 11.44, 11.44)}}
        r = report.ratio_estimate(estimates, "idle-memory", "scale/50", "adapter", "rmcp")
        self.assertEqual((round(r.value, 4), round(r.low, 4), round(r.high, 4)),
                         (round(11.44 / 0.48, 4), round(11.44 / 0.48, 4), round(11.44 / 0.08, 4)))
        self.assertEqual(report.verdict_of(r, 1.0), "PASS")
        # Both sides at 0: equal costs at the resolution, a ratio of 1, not "not measured".
        zero = {"idle-memory": {"scale/50/a": E(0.0, 0.0, 0.0), "scale/50/b": E(0.0, 0.0, 0.0)}}
        self.assertEqual(report.ratio_estimate(zero, "idle-memory", "scale/50", "a", "b").value, 1.0)
        # Time and CPU have no resolution floor: a zero cost is still not measured.
        cpu = {"cpu": {"g/a": E(0.0, 0.0, 0.0), "g/b": E(1.0, 1.0, 1.0)}}
        self.assertIsNone(report.ratio_estimate(cpu, "cpu", "g", "a", "b"))

    def test_verdicts_at_the_edges(self):
        E = report.Estimate
        self.assertEqual(report.verdict_of(E(1.2, 1.0, 1.4), 1.0), "PASS")  # the low end on the target
        self.assertEqual(report.verdict_of(E(1.0, 0.9, 1.1), 1.0), "within noise")
        self.assertEqual(report.verdict_of(E(0.9, 0.8, 0.99), 1.0), "MISS")
        self.assertEqual(report.verdict_of(E(0.9, 0.8, 1.0), 1.0), "within noise")  # the high end on it
        self.assertEqual(report.verdict_of(None, 1.0), "n/a")

    def test_spread_is_the_middle_eighty_percent(self):
        e = report.spread([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])  # ten samples: the 2nd to the 9th
        self.assertEqual((e.value, e.low, e.high), (5.5, 2, 9))
        e = report.spread([3.0, 1.0, 2.0])  # below ten: all of them
        self.assertEqual((e.value, e.low, e.high), (2.0, 1.0, 3.0))
        e = report.spread(list(range(100, 0, -1)))  # 100 samples: the 11th to the 90th
        self.assertEqual((e.value, e.low, e.high), (50.5, 11, 90))

    def test_quick_runs_every_target_and_leaves_the_rest(self):
        for suite in SUITES:
            regex = report.quick_filter(suite)
            if regex is None:
                continue
            matches = re.compile(regex).match
            for ratio in suite.get("ratio", []):
                target = ratio.get("min")
                if target is None:
                    continue
                groups = list(target) if isinstance(target, dict) else ratio.get("groups") or suite["groups"]
                for group in (g for pattern in groups for g in concrete(pattern)):
                    for side in (ratio["of"], ratio["vs"]):
                        self.assertTrue(matches(f"{group}/{side}"), f"--quick leaves out {group}/{side}")
        pipe = re.compile(report.quick_filter(next(s for s in SUITES if s["bench"] == "pipe"))).match
        self.assertTrue(pipe("pipe/200B-text/same-cpu/host-session"), "targets are judged in the pinned rows")
        self.assertTrue(pipe("pipe/200B-text/split-cpus/host-session"))
        self.assertTrue(pipe("pipe/200B-text/unpinned/host-session"), "unpinned: information, still shown")
        self.assertFalse(pipe("pipe/200B-text/split-cpus/host-reader"))
        self.assertFalse(pipe("pipe/200B-text/unpinned/raw-drain+pipe1MiB"))
        self.assertFalse(pipe("pipe/200B-text/unpinned/host-reader"))
        framing = re.compile(report.quick_filter(next(s for s in SUITES if s["bench"] == "framing"))).match
        self.assertFalse(framing("framing_200B/memchr_count"), "a floor without a target is full-mode only")

    def test_every_target_says_why_and_floors_have_none(self):
        for suite in SUITES:
            for ratio in suite.get("ratio", []):
                name = f"{suite['bench']}: {ratio['of']} / {ratio['vs']}"
                if "min" in ratio:
                    self.assertTrue(ratio.get("why", "").strip(), f"{name}: a target without `why`")
                    self.assertFalse(ratio.get("floor"), f"{name}: a floor with a target")
                self.assertIn(ratio.get("measure", "throughput"), ("throughput", "cpu", "idle-memory"), name)


class Bmf(unittest.TestCase):
    def bmf(self, iteration_bytes, mode):
        with tempfile.TemporaryDirectory() as tmp:
            crit = Path(tmp)
            Fake(crit, time.time(), iteration_bytes)
            estimates = report.load_estimates(crit, None)
        clocks = report.clocks(SUITES)
        return report.build_bmf(estimates, {"framer/push.call_200b": 1594021}, clocks, mode, 300)

    def test_valid_and_in_units_that_do_not_depend_on_the_mode(self):
        quick = self.bmf(64 * MIB, "quick")
        full = self.bmf(1 << 30, "full")  # 16 times the bytes per iteration, the same cost per byte
        for bmf in (quick, full):
            self.assertEqual(report.check_bmf(bmf), [])
            json.loads(json.dumps(bmf, allow_nan=False))
        self.assertEqual(set(quick) - {"bench-report"}, set(full) - {"bench-report"})
        compared = 0
        for bench, measures in quick.items():
            if bench == "bench-report":
                continue
            self.assertEqual(set(measures), set(full[bench]), bench)
            for name, m in measures.items():
                ratio = full[bench][name]["value"] / m["value"]
                self.assertTrue(0.5 <= ratio <= 2, f"{bench}.{name}: quick {m['value']}, full {full[bench][name]}")
                compared += 1
        self.assertGreater(compared, 100)
        self.assertEqual(quick["bench-report"]["quick-mode"]["value"], 1)
        self.assertEqual(full["bench-report"]["quick-mode"]["value"], 0)

    def test_measures_are_named_by_unit_and_clock(self):
        bmf = self.bmf(64 * MIB, "quick")
        host = bmf["pipe/200B-text/unpinned/host-session"]
        # 10 ms for 64 MiB: 156,250 ns per MiB, 6,400 MiB/s; wall clock.
        self.assertAlmostEqual(host["ns-per-mib"]["value"], 10e6 / 64)
        self.assertAlmostEqual(host["mib-per-s"]["value"], 6400)
        self.assertAlmostEqual(host["mib-per-s"]["lower_value"], 64 / (10e-3 * 1.008))
        self.assertEqual(host.keys() & {"latency", "throughput"}, set())
        tools = bmf["pipe/64KiB-tools-list/unpinned/host-session"]
        self.assertAlmostEqual(tools["cpu-us-per-mib"]["value"], 500)
        # framing and parse run on the thread's CPU time: their unit says so.
        framing = bmf["framing_200B/read_into"]
        self.assertEqual(set(framing), {"thread-cpu-ns-per-mib"})
        self.assertEqual(bmf["scale/50/rmcp-adapter"]["idle-kib-per-session"],
                         {"value": 42.0, "lower_value": 40.0, "upper_value": 44.0})
        self.assertEqual(bmf["gate/framer/push.call_200b"], {"instructions": {"value": 1594021}})

    def test_check_bmf_finds_what_is_invalid(self):
        self.assertTrue(report.check_bmf({"a": {"x": {"value": float("nan")}}}))
        self.assertTrue(report.check_bmf({"a": {"x": {"value": "1"}}}))
        self.assertTrue(report.check_bmf({"a": {"x": {"value": 2.0, "lower_value": 3.0, "upper_value": 4.0}}}))
        self.assertTrue(report.check_bmf({"a": {"x": {"value": 5.0, "lower_value": 3.0, "upper_value": 4.0}}}))
        self.assertEqual(report.check_bmf({"a": {"x": {"value": 3, "lower_value": 3.0, "upper_value": 4.0}}}), [])


class Record(unittest.TestCase):
    def test_record_carries_the_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            crit = Path(tmp)
            Fake(crit, time.time())
            rows, estimates = run_report(crit)
            bmf = report.build_bmf(estimates, None, report.clocks(SUITES), "quick", 1)
            results = {s["bench"]: report.load_json(crit / s["results"], None) for s in SUITES if "results" in s}
            record = report.build_record(
                mode="quick", clock=report.clock_summary(SUITES, {s["bench"]: {} for s in SUITES}),
                load_before=[1.0, 1.0, 1.0], load_after=[2.0, 2.0, 2.0], seconds=1,
                suites={s["bench"]: None for s in SUITES}, rows=rows, results=results, bmf=bmf,
                command="scripts/bench-report --quick")
        record = json.loads(json.dumps(record, allow_nan=False))
        self.assertEqual((record["format"], record["version"]), ("mcp-framer bench record", 2))
        self.assertTrue(record["commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", record["commit"]), record)
        self.assertEqual(record["load"], {"before": [1.0, 1.0, 1.0], "after": [2.0, 2.0, 2.0]})
        self.assertTrue(record["slow_consumer"]["rows"])
        self.assertEqual(len(record["scale"]["rows"]), 3)
        self.assertEqual([r["transport"] for r in record["stdio_v2"]["rows"]], ["stdio", "stdio-v2"])
        self.assertIn("thread CPU time: framing, parse", record["clock"])
        for suite in SUITES:
            if not suite.get("gate") and "show" not in suite:
                self.assertTrue(any(k.startswith(suite["bench"]) for k in record["bmf"]), suite["bench"])
                self.assertTrue(any(r["suite"] == suite["bench"] for r in record["ratios"]), suite["bench"])


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=1).result.wasSuccessful() is False)
