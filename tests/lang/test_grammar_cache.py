"""The parser's tables are built once and kept (``nfacep.lang.syntax.open_grammar``); a cache
that is missing, stale, damaged or cannot be written never changes a parse or fails one."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from nfacep.lang import syntax

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRAMMAR = pathlib.Path(syntax.__file__).with_name("grammar.lark")
OPTIONS = {"propagate_positions": True, "maybe_placeholders": True}
QUERY = (ROOT / "queries" / "marathon.sql").read_text(encoding="utf-8")


def _tree(parser) -> str:
    return parser.parse(QUERY).pretty()


def _cache_files(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(folder.glob("grammar.lalr.*")) if folder.is_dir() else []


def test_built_once_then_loaded(tmp_path):
    cache = tmp_path / "pycache" / "grammar.lalr"
    built = syntax.open_grammar(GRAMMAR, cache, **OPTIONS)
    (saved,) = _cache_files(cache.parent)
    stamp = saved.stat().st_mtime_ns
    loaded = syntax.open_grammar(GRAMMAR, cache, **OPTIONS)
    assert loaded.source_path == "<deserialized>"  # from the cache, not built again
    assert saved.stat().st_mtime_ns == stamp
    assert _tree(loaded) == _tree(built) == _tree(syntax.open_grammar(GRAMMAR, None, **OPTIONS))
    assert loaded.options.propagate_positions and loaded.options.maybe_placeholders


def test_damaged_cache_is_rebuilt(tmp_path):
    cache = tmp_path / "grammar.lalr"
    syntax.open_grammar(GRAMMAR, cache, **OPTIONS)
    (saved,) = _cache_files(tmp_path)
    key = saved.read_bytes().split(b"\n", 1)[0]
    expected = _tree(syntax.open_grammar(GRAMMAR, None, **OPTIONS))
    for damage in (b"", b"not a cache\n", key + b"\n" + b"\x80\x05garbage", key + b"\n"):
        saved.write_bytes(damage)
        parser = syntax.open_grammar(GRAMMAR, cache, **OPTIONS)
        assert parser.source_path != "<deserialized>"
        assert _tree(parser) == expected
        assert saved.read_bytes().startswith(key + b"\n")  # replaced whole
        assert len(saved.read_bytes()) > 1000


def test_another_grammar_or_options_never_reads_this_cache(tmp_path):
    cache = tmp_path / "grammar.lalr"
    syntax.open_grammar(GRAMMAR, cache, **OPTIONS)
    changed = tmp_path / "grammar.lark"
    changed.write_text(GRAMMAR.read_text(encoding="utf-8") + "\n// changed\n", encoding="utf-8")
    syntax.open_grammar(changed, cache, **OPTIONS)
    syntax.open_grammar(GRAMMAR, cache, propagate_positions=False, maybe_placeholders=True)
    assert len(_cache_files(tmp_path)) == 3  # one per grammar text and options


def test_unwritable_cache_builds_in_memory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    parser = syntax.open_grammar(GRAMMAR, blocker / "grammar.lalr", **OPTIONS)
    assert _tree(parser) == _tree(syntax.open_grammar(GRAMMAR, None, **OPTIONS))
    assert list(tmp_path.iterdir()) == [blocker]


@pytest.mark.parametrize("command", ["check", "explain"])
def test_commands_with_a_clean_or_an_unwritable_cache_folder(tmp_path, command):
    """``nfacep check`` and ``nfacep explain`` with the bytecode folder (where the tables are
    kept) new and empty (the tables built and kept there, then loaded from it) and unusable (a
    file where it would be; a read-only folder is no test when the tests run as root, whom
    permissions do not stop): the same output as with the usual cache, no error, nothing on
    stderr."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    clean = tmp_path / "clean"
    query = str(ROOT / "queries" / "marathon.sql")

    def run(folder: pathlib.Path | None) -> str:
        done = subprocess.run(
            [sys.executable, "-W", "error", "-m", "nfacep.cli", command, query],
            env={**os.environ, **({} if folder is None else {"PYTHONPYCACHEPREFIX": str(folder)})},
            capture_output=True,
            text=True,
        )
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        return done.stdout

    first = run(clean)
    (tables,) = clean.rglob("grammar.lalr.*")  # built and kept in the new folder
    stamp = tables.stat().st_mtime_ns
    assert run(clean) == first
    assert tables.stat().st_mtime_ns == stamp  # loaded, not built again
    assert run(blocker) == run(None) == first
    assert sorted(tmp_path.iterdir()) == [clean, blocker]  # nothing written beside the file
    assert "query cheat" in first
