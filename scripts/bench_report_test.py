#!/usr/bin/env python3
"""Tests scripts/bench-report's writers without running a benchmark
(scripts/test runs it; standard library only).

Builds a fake criterion directory holding every benchmark that
benches/report.toml's ratios name, in every group its suites list, plus the
pipe bench's CPU per MiB and the slow consumer's rows; runs the report's
collection and writers on it; checks that the BMF file and the record parse
back as JSON and carry every suite's benches, that every target has a verdict
and a reason, and that floors never get a verdict.
"""

import importlib.machinery
import importlib.util
import io
import json
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


def concrete(pattern):
    """A group name a pattern stands for (`pipe/*` → `pipe/200B/unpinned`)."""
    parts = pattern.split("/")
    fill = ["pipe", "200B", "unpinned"]
    return "/".join(fill[i] if p == "*" else p for i, p in enumerate(parts)) if "*" in pattern else pattern


def fake_criterion(root, now):
    """Every (group, id) the ratios name, as criterion writes them; returns the ids."""
    ids = set()
    for suite in SUITES:
        for ratio in suite.get("ratio", []):
            target = ratio.get("min")
            groups = ratio.get("groups") or suite["groups"]
            groups = [*groups, *(target if isinstance(target, dict) else [])]
            for group in map(concrete, groups):
                ids.update({f"{group}/{ratio['of']}", f"{group}/{ratio['vs']}"})
    cpu = {}
    for n, full_id in enumerate(sorted(ids)):
        d = root / f"b{n}" / "new"
        d.mkdir(parents=True)
        (d / "benchmark.json").write_text(json.dumps({"full_id": full_id, "throughput": {"Bytes": 1 << 20}}))
        median = {"point_estimate": 1e6 + n, "confidence_interval": {"lower_bound": 0.9e6, "upper_bound": 1.1e6 + n}}
        (d / "estimates.json").write_text(json.dumps({"median": median}))
        if full_id.startswith("pipe/"):
            cpu[full_id] = {"at": now, "cpu_ns_per_mib": [100.0 + n, 90.0, 120.0 + n]}
    (root / "pipe_cpu.json").write_text(json.dumps({"about": "test", "benches": cpu}))
    (root / "slow_consumer").mkdir()
    rows = [{"consumer_us": 0, "reader": "coupled", "blocked_ms": 1.0}]
    (root / "slow_consumer" / "results.json").write_text(json.dumps({"at": now, "messages": 10, "rows": rows}))
    return ids


class Writers(unittest.TestCase):
    def test_bmf_and_record_carry_every_suite(self):
        with tempfile.TemporaryDirectory() as tmp:
            crit = Path(tmp)
            ids = fake_criterion(crit, time.time())
            results = report.load_results(crit, None)
            cpu = report.load_cpu(crit, None)
            rows = []
            with redirect_stdout(io.StringIO()):
                for suite in SUITES:
                    if "show" not in suite and not suite.get("gate"):
                        rows += report.print_suite(suite, results, cpu, "test")
            gate = {"framer/push.call_200b": 1594021}
            bmf = report.build_bmf(results, cpu, gate)
            record = report.build_record(
                mode="quick", clock="wall-clock", load_before=[1.0, 1.0, 1.0], load_after=[2.0, 2.0, 2.0],
                seconds=1, suites={s["bench"]: None for s in SUITES}, rows=rows,
                slow_consumer=report.load_slow_consumer(crit, None), bmf=bmf, command="scripts/bench-report --quick")
            bmf = json.loads(json.dumps(bmf))
            record = json.loads(json.dumps(record))

        self.assertEqual(ids, {k for k in bmf if not k.startswith("gate/")})
        for bench_id, measures in bmf.items():
            for name, m in measures.items():
                self.assertIsInstance(m["value"], (int, float), f"{bench_id}.{name}")
        for suite in SUITES:
            if suite.get("gate"):
                self.assertIn("gate/framer/push.call_200b", bmf)
                self.assertEqual(bmf["gate/framer/push.call_200b"]["instructions"]["value"], 1594021)
            elif "show" in suite:
                self.assertTrue(record["slow_consumer"]["rows"])
            else:
                prefixes = [concrete(g).split("*")[0] for g in suite["groups"]]
                self.assertTrue(any(k.startswith(tuple(prefixes)) for k in bmf), suite["bench"])
                self.assertTrue(any(r["suite"] == suite["bench"] for r in rows), suite["bench"])
        self.assertTrue(any("cpu-per-mib" in m for m in bmf.values()))
        self.assertTrue(all("throughput" in m and "latency" in m for k, m in bmf.items() if not k.startswith("gate/")))
        for field in ("commit", "date", "machine", "load", "mode", "clock", "command"):
            self.assertIn(field, record)
        self.assertEqual(record["load"], {"before": [1.0, 1.0, 1.0], "after": [2.0, 2.0, 2.0]})
        for row in record["ratios"]:
            if row["floor"]:
                self.assertIsNone(row["target"], row)
                self.assertEqual(row["verdict"], "floor", row)
            elif row["target"] is not None:
                self.assertIn(row["verdict"], ("PASS", "MISS"), row)
                self.assertTrue(row["why"], row)
            else:
                self.assertEqual(row["verdict"], "info", row)

    def test_every_target_says_why_and_floors_have_none(self):
        for suite in SUITES:
            for ratio in suite.get("ratio", []):
                name = f"{suite['bench']}: {ratio['of']} / {ratio['vs']}"
                if "min" in ratio:
                    self.assertTrue(ratio.get("why", "").strip(), f"{name}: a target without `why`")
                    self.assertFalse(ratio.get("floor"), f"{name}: a floor with a target")
                self.assertIn(ratio.get("measure", "throughput"), ("throughput", "cpu"), name)


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=1).result.wasSuccessful() is False)
