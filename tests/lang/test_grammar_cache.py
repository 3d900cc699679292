"""The parser's tables are built once and kept (``nfacep.lang.syntax.open_grammar``); a cache
that is missing, stale, damaged or cannot be written never changes a parse or fails one."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

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


def test_check_with_an_unwritable_cache_folder(tmp_path):
    """``nfacep check`` with the bytecode folder (where the tables are kept) unusable: the
    same output, no error, nothing on stderr."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    query = str(ROOT / "queries" / "marathon.sql")
    runs = [
        subprocess.run(
            [sys.executable, "-W", "error", "-m", "nfacep.cli", "check", query],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
        )
        for env in ({"PYTHONPYCACHEPREFIX": str(blocker)}, {})
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert runs[0].stderr == runs[1].stderr == ""
    assert runs[0].stdout == runs[1].stdout
    assert "query cheat" in runs[0].stdout
