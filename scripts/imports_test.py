#!/usr/bin/env python3
"""Tests scripts/imports on small crates written to a temporary directory
(scripts/test runs it; standard library only): the graph it prints, what it
skips (test modules, comments, strings), re-exports followed, circles found.
"""

import importlib.machinery
import importlib.util
import io
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
loader = importlib.machinery.SourceFileLoader("imports", str(ROOT / "scripts" / "imports"))
spec = importlib.util.spec_from_loader("imports", loader)
imports = importlib.util.module_from_spec(spec)
loader.exec_module(imports)


def crate(files):
    """A crate directory holding `files` ({path under src/: text})."""
    directory = Path(tempfile.mkdtemp())
    (directory / "Cargo.toml").write_text('[package]\nname = "t"\n')
    for path, text in files.items():
        file = directory / "src" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    return directory


def run(directory):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = imports.main([str(directory)])
    return status, out.getvalue()


class Imports(unittest.TestCase):
    def test_the_graph_follows_re_exports_and_skips_tests_comments_and_strings(self):
        directory = crate({
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use b::Thing;\n",
            "a.rs": (
                "use crate::Thing; // c::X in a comment\n"
                "/// [`crate::c::Y`] in a doc comment\n"
                'fn f() { let _ = "crate::c::Z"; }\n'
                "#[cfg(test)]\nmod tests {\n    use crate::c::W;\n}\n"
            ),
            "b.rs": "pub struct Thing;\nfn g() { super::c::h(); }\n",
            "c.rs": "pub fn h() {}\n",
        })
        status, out = run(directory)
        self.assertEqual(status, 0, out)
        lines = set(out.splitlines())
        self.assertIn("crate::a -> crate::b", lines)  # through `pub use b::Thing`
        self.assertIn("crate::b -> crate::c", lines)
        self.assertIn("crate::c", lines)
        self.assertNotIn("crate::a::tests", out)
        self.assertFalse(any(line.startswith("circle:") for line in lines), out)

    def test_declaring_a_child_module_is_not_importing_it(self):
        directory = crate({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use super::b::B;\npub struct A;\n",
            "b/mod.rs": "mod inner;\npub struct B;\n",
            "b/inner.rs": "use crate::a::A;\n",
        })
        status, out = run(directory)
        self.assertEqual(status, 0, out)
        self.assertIn("crate::b", out.splitlines())

    def test_a_circle_is_named_and_fails(self):
        directory = crate({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use super::b::{self, B};\npub struct A;\n",
            "b/mod.rs": "mod inner;\nuse inner::helper;\npub struct B;\n",
            "b/inner.rs": "use crate::a::A;\npub fn helper() {}\n",
        })
        status, out = run(directory)
        self.assertEqual(status, 1, out)
        self.assertIn("crate::b -> crate::b::inner", out.splitlines())  # a private use of a child
        self.assertIn("crate::b::inner -> crate::a", out.splitlines())
        self.assertIn("circle: crate::a <-> crate::b <-> crate::b::inner", out.splitlines())

    def test_a_crate_without_circles_under_framer_passes(self):
        status, out = run(ROOT / "framer" / "core")
        self.assertEqual(status, 0, out)
        self.assertIn("# framer/core", out)


if __name__ == "__main__":
    unittest.main()
