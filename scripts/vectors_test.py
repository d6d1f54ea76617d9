#!/usr/bin/env python3
"""Tests scripts/vectors' judge, scaling and growth without running a reader
(scripts/test runs it; standard library only), then checks that the READMEs'
generated sections are the latest kept record's (`scripts/vectors --check`).

Each judge test feeds the judge a runner's output for a real vector from
corpus/vectors/, as a reader with that behaviour prints it, and checks the
verdict and the findings named.
"""

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
loader = importlib.machinery.SourceFileLoader("vectors", str(ROOT / "scripts" / "vectors"))
spec = importlib.util.spec_from_loader("vectors", loader)
vectors = importlib.util.module_from_spec(spec)
loader.exec_module(vectors)

FRAMING, IDS = vectors.load_vectors()
SDK = {"reader": "an SDK", "limit": {"default": 10 * 2**20, "configurable": True, "counts": "bytes"}}
NO_LIMIT = {"reader": "an SDK", "limit": {"default": None, "configurable": False, "counts": "nothing"}}


def vector(stem):
    return next(v for name, v in FRAMING.items() if name.startswith(stem))


def frame(data, **extra):
    return {"type": "frame", "hex": None if data is None else data.hex(), **extra}


def result(*events, state="eof", **end):
    return {"events": list(events), "end": {"type": "end", "state": state, **end}}


def judge(stem, res, hello=SDK):
    return vectors.judge(vector(stem), res, hello)


class Judge(unittest.TestCase):
    def test_the_vectors_own_frames_conform(self):
        v = vector("032")
        res = result(frame(b'{"id":1}'), {"type": "oversize"}, frame(b'{"id":3}'))
        self.assertEqual(judge("032", res)[0], "conforms", v["input_text"])

    def test_a_loss_without_a_report_is_silent(self):
        verdict, _how, keys = judge("032", result(frame(b'{"id":1}'), frame(b'{"id":3}')))
        self.assertEqual((verdict, keys), ("silent", ["silent-oversize"]))
        verdict, _how, keys = judge("039", result(frame(b'{"id":1}')))
        self.assertEqual((verdict, keys), ("silent", ["silent-tail"]))

    def test_cr_left_in(self):
        verdict, how, keys = judge("007", result(frame(b'{"id":1}\r')))
        self.assertEqual((verdict, keys), ("differs", ["crlf"]))
        self.assertIn("\\r", how)

    def test_a_lone_cr_taken_as_a_line_end(self):
        verdict, _how, keys = judge("010", result(frame(b"a"), frame(b"b"), frame(b""), frame(b"c")))
        self.assertEqual((verdict, keys), ("differs", ["lone-cr"]))
        # The \r at the end of the stream ended a line: not also a silent loss.
        self.assertEqual(judge("012", result(frame(b"ok"), frame(b"")))[2], ["lone-cr"])

    def test_a_bom_handed_to_the_parser(self):
        self.assertEqual(judge("018", result(frame(b"\xef\xbb\xbf{}")))[2], ["bom-in-json"])
        self.assertEqual(judge("023", result(frame(b"\xef\xbb\xbf"), frame(b"{}")))[2], ["bom-in-json"])
        self.assertEqual(judge("022", result(frame(b"{}"), frame(b"[]")))[2], ["bom-everywhere"])

    def test_empty_lines_and_crlf_empty_lines(self):
        self.assertEqual(judge("013", result(frame(b""), frame(b""), frame(b"{}"), frame(b"")))[2], ["empty-lines"])
        keys = judge("015", result(frame(b"\r"), frame(b"{}\r"), frame(b"\r")))[2]
        self.assertEqual(sorted(keys), ["crlf", "empty-lines"])

    def test_a_frame_at_the_limit_dropped_and_the_session_closed(self):
        res = result({"type": "oversize"}, {"type": "closed"}, state="closed")
        verdict, _how, keys = judge("024", res)
        self.assertEqual((verdict, sorted(keys)), ("differs", ["closes-on-oversize", "exact-limit"]))
        # A reader that keeps going loses only the frame at the limit.
        self.assertEqual(judge("024", result({"type": "oversize"}))[2], ["exact-limit"])

    def test_later_frames_lost_to_a_close_are_not_counted_twice(self):
        res = result(frame(b'{"id":1}'), {"type": "oversize"}, {"type": "closed"}, state="closed")
        self.assertEqual(judge("032", res)[2], ["closes-on-oversize"])

    def test_a_frame_lost_with_an_oversize_one_in_the_same_read(self):
        res = result({"type": "oversize"}, frame(b'{"id":3}'))
        self.assertEqual(judge("032", res)[2], ["lost-with-oversize"])
        # The frame before the oversize line is lost to the read, not to the close.
        res = result({"type": "oversize"}, {"type": "closed"}, state="closed")
        self.assertEqual(sorted(judge("032", res)[2]), ["closes-on-oversize", "lost-with-oversize"])

    def test_the_unterminated_last_line_handed_on(self):
        res = result(frame(b'{"id":1}'), frame(b'{"id":', terminated=False))
        self.assertEqual(judge("039", res)[2], ["tail-delivered"])

    def test_invalid_utf8_replaced_or_fatal(self):
        replaced = [frame(b"\xff\xfe".decode("utf-8", "replace").encode()), frame(b"\xc3(".decode("utf-8", "replace").encode()),
                    frame(b"\xed\xa0\x80".decode("utf-8", "replace").encode())]
        self.assertEqual(judge("047", result(*replaced))[2], ["utf8-replaced"])
        crash = result(state="crashed", crash="UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff")
        self.assertEqual(judge("047", crash)[2], ["utf8-crash"])

    def test_unexposed_frames_match_their_place(self):
        self.assertEqual(judge("047", result(frame(None), frame(None), frame(None)))[0], "conforms")
        self.assertEqual(judge("047", result(frame(None), frame(None)))[0], "differs")

    def test_options_not_offered_and_no_limit(self):
        self.assertEqual(judge("008", result(frame(b'{"id":1}')))[0], "n/a")
        verdict, how, _ = judge("025", result(frame(b"123456789"), frame(b"ok")), NO_LIMIT)
        self.assertEqual(verdict, "no limit")
        self.assertIn("123456789", how)
        # A vector that does not exercise the limit is judged as any other.
        self.assertEqual(judge("001", result(frame(b'{"id":1}')), NO_LIMIT)[0], "conforms")

    def test_no_result(self):
        self.assertEqual(judge("001", result(state="no result", why="died"))[0], "differs")


class Exact(unittest.TestCase):
    def test_the_reference_is_compared_exactly(self):
        v = vector("034")
        end = {"error": v["error"], "stats": v["stats"]}
        self.assertEqual(vectors.judge_exact(v, result(*v["events"], **end))[0], "conforms")
        moved = [dict(e, seen=e["seen"] + 1) if "seen" in e else e for e in v["events"]]
        self.assertEqual(vectors.judge_exact(v, result(*moved, **end))[0], "differs")
        counted = dict(v["stats"], discarded_bytes=v["stats"]["discarded_bytes"] + 1)
        self.assertEqual(vectors.judge_exact(v, result(*v["events"], error=None, stats=counted))[0], "differs")

    def test_id_recovery(self):
        name, v = next(iter(IDS.items()))
        self.assertEqual(vectors.judge_id(v, result(id=v["id"]))[0], "conforms", name)
        self.assertEqual(vectors.judge_id(v, result(id="other"))[0], "differs", name)


class Scale(unittest.TestCase):
    def test_scaled_vectors_keep_their_point(self):
        limit = 1000
        at = vectors.scale(vector("024"), limit)
        (only,) = at["events"]
        self.assertEqual(len(bytes.fromhex(only["hex"])), limit)
        over = vectors.scale(vector("025"), limit)
        self.assertEqual([e["type"] for e in over["events"]], ["oversize_started", "oversize_skipped", "frame"])
        self.assertEqual(over["events"][1]["len"], limit + 1)
        self.assertEqual(bytes.fromhex(over["events"][2]["hex"]), b"ok")
        cr = vectors.scale(vector("027"), limit)
        self.assertTrue(bytes.fromhex(cr["input_hex"]).endswith(b"\r\n"))
        self.assertEqual(len(bytes.fromhex(cr["events"][0]["hex"])), limit)
        between = vectors.scale(vector("032"), limit)
        self.assertEqual(bytes.fromhex(between["events"][0]["hex"]), b'{"id":1}')
        for v in (at, over, cr, between):
            self.assertEqual(sum(v["chunks"]), len(bytes.fromhex(v["input_hex"])))
            self.assertTrue(vectors.exercises_limit(v))

    def test_cost_vector_is_one_message_of_the_size(self):
        v = vectors.cost_vector(2**20)
        (only,) = v["events"]
        message = bytes.fromhex(only["hex"])
        self.assertEqual(len(message), 2**20)
        self.assertEqual(json.loads(message)["method"], "notifications/message")
        self.assertEqual(set(v["chunks"][:-1]), {vectors.COST_READ})


class Growth(unittest.TestCase):
    def test_labels(self):
        self.assertEqual(vectors.growth({1: 1.0, 4: 4.2, 16: 16.0})[2], "linear")
        self.assertEqual(vectors.growth({1: 1.0, 4: 15.0, 16: 250.0})[2], "quadratic")
        ratios, exponent, _ = vectors.growth({1: 1.0, 4: 8.0, 16: 64.0})
        self.assertEqual(ratios, [8.0, 8.0])
        self.assertAlmostEqual(exponent, 1.5)


class Readme(unittest.TestCase):
    def test_the_generated_sections_are_the_latest_records(self):
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "vectors"), "--check"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr + proc.stdout)


if __name__ == "__main__":
    unittest.main()
