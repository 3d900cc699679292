"""The link seam (:mod:`nfacep.links`): the registry is the one list of links, a new link is
added without touching the others, and using one link imports nothing of another."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import pytest

from nfacep import links
from nfacep.boards.cli import Build, CheckBoards, Run
from nfacep.cli import main
from nfacep.errors import UsageError
from nfacep.reference.matcher import Reference

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARATHON = ROOT / "queries" / "marathon.sql"
MARATHON_CSV = ROOT / "queries" / "marathon.csv"


def _link_choices(command) -> list[str]:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    (action,) = [a for a in parser._actions if "--link" in a.option_strings]
    return list(action.choices)


def test_the_registry_lists_the_links():
    assert links.names() == ("harness", "uart", "udp")
    assert [link.name for link in links.runnable()] == ["uart", "udp"]
    assert links.get("udp").name == "udp"
    with pytest.raises(UsageError, match="unknown link 'usb': choose one of harness, uart, udp"):
        links.get("usb")


def test_the_commands_take_their_link_choices_from_the_registry():
    assert _link_choices(Build()) == list(links.names())
    assert _link_choices(CheckBoards()) == list(links.names())


class _Loopback(links.Link):
    """A third link, as a new folder of nfacep.links would add it: a host that is the
    reference matcher, a board top that is the harness's."""

    name = "loopback"
    help = "is the test's third link"
    run_flag = "--loopback"
    run_choice = "--loopback NAME (--link loopback)"

    def add_build_arguments(self, parser) -> None:
        parser.add_argument("--loopback-note", default="looped")

    def build_options(self, args) -> dict:
        return {"note": args.loopback_note}

    def top(self, engine, board_mhz, *, note="looped", **others):
        from nfacep.boards.top import BoardTop

        return {"kind": self.name, "note": note}, BoardTop(engine)

    def add_run_arguments(self, parser) -> None:
        parser.add_argument("--loopback", metavar="NAME")

    def selected(self, args) -> bool:
        return args.loopback is not None

    def backend(self, args, progress):
        reference = Reference()

        class Board:
            def run(self, nfa, tuples, params, values=None):
                return reference.run(nfa, tuples, params, values)

        return Board()


@pytest.fixture
def loopback():
    link = _Loopback()
    links.register(link)
    try:
        yield link
    finally:
        links.unregister(link.name)
    assert links.names() == ("harness", "uart", "udp")


def test_a_third_link_is_registered_without_touching_the_others(loopback, tmp_path, capsys):
    assert links.names() == ("harness", "uart", "udp", "loopback")
    assert _link_choices(Build()) == ["harness", "uart", "udp", "loopback"]
    with pytest.raises(ValueError, match="registered already"):
        links.register(_Loopback())

    # nfacep run over it: the matches are the reference matcher's, as with `nfacep match`
    ran, matched = tmp_path / "run.csv", tmp_path / "match.csv"
    common = [str(MARATHON), "--input", str(MARATHON_CSV)]
    assert main(["run", *common, "--output", str(ran), "--loopback", "x"]) == 0
    assert main(["match", *common, "--output", str(matched)]) == 0
    assert ran.read_text() == matched.read_text()
    capsys.readouterr()

    # nfacep check --board with it: its top, its option
    assert (
        main(
            [
                "check",
                str(MARATHON),
                "--board",
                "icestick",
                "--store",
                "pipeline",
                "--partitions",
                "4",
                "--link",
                "loopback",
                "--loopback-note",
                "n",
            ]
        )
        == 0
    )
    assert "--link loopback" in capsys.readouterr().out


def test_the_run_error_names_every_link(loopback, capsys):
    assert main(["run", str(MARATHON), "--input", str(MARATHON_CSV), "--output", "m.csv"]) == 2
    assert (
        "give exactly one of --port (a serial port, --link uart) and --udp HOST[:PORT] "
        "(--link udp) and --loopback NAME (--link loopback)"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("used", "absent"),
    [
        (
            "nfacep.links.uart.host",
            ("nfacep.links.udp.host", "nfacep.links.udp.model", "nfacep.hdl.eth.link"),
        ),
        (
            "nfacep.links.uart.top",
            ("nfacep.links.udp.top", "nfacep.links.udp.host", "nfacep.hdl.eth.link"),
        ),
        (
            "nfacep.links.udp.host",
            ("nfacep.links.uart.host", "nfacep.links.uart.model", "nfacep.hdl.uart.framer"),
        ),
        (
            "nfacep.links.udp.top",
            ("nfacep.links.uart.top", "nfacep.links.uart.host", "nfacep.hdl.uart.framer"),
        ),
    ],
)
def test_using_one_link_imports_nothing_of_another(used, absent):
    code = (
        "import importlib, sys\n"
        "from nfacep import links\n"
        "links.names()\n"
        f"importlib.import_module({used!r})\n"
        f"print([m for m in {list(absent)!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_each_link_names_its_parts():
    from nfacep.links.model import BoardModel

    for link in links.runnable():
        assert link.part("protocol").VERSION >= 1
        assert callable(link.part("host").run)
        assert issubclass(link.part("model"), BoardModel)
        assert callable(link.part("top").make_top)
    assert callable(links.get("harness").part("top").BoardTop)


def test_run_takes_its_options_from_the_links():
    parser = argparse.ArgumentParser()
    Run().add_arguments(parser)
    options = {o for a in parser._actions for o in a.option_strings}
    for link in links.runnable():
        assert link.run_flag in options
