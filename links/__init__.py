"""The link seam: every way a board talks to the host is a :class:`Link`, as every engine is a
:class:`~nfacep.backend.Backend`.

A link is a folder of this package (a Glasgow applet's folder is one feature): its
pure-software ``protocol`` (formats and constants, imported by the gateware, the host and the
software board alike), its ``host`` (the back-end of ``nfacep run``), its software board
``model`` (for testing the host without hardware) and its ``top`` (the board top ``nfacep
build --link NAME`` makes, and the checks that a board can carry it). :class:`Link` is what
the commands see of it: the arguments it adds to ``nfacep build`` and ``nfacep run``, the board
top and the report's ``link`` fields, the back-end. :mod:`nfacep.links.uart` and
:mod:`nfacep.links.udp` are the links; :mod:`nfacep.links.harness` is ``--link harness``, the
synthesis harness with no link at all. What the links share is in leaf modules:
:mod:`~nfacep.links.protocol` (fields, switches, the engine's fingerprint),
:mod:`~nfacep.links.host` (errors, result, frame order, checks) and
:mod:`~nfacep.links.model` (the software board's engine).

The registry (:func:`get`, :func:`names`, :func:`register`) is the one place that lists the
links; ``nfacep build``, ``nfacep check --board`` and ``nfacep run`` take their choices from it.
A link's entry is light: its host, its model and its gateware are imported only when used, so
using one link never imports another's.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from nfacep.errors import UsageError

__all__ = [
    "DEFAULT",
    "Link",
    "folder_parts",
    "get",
    "names",
    "register",
    "runnable",
    "unregister",
]


class Link:
    """A link, as the commands see it. Subclasses set :attr:`name` and :attr:`help` and
    override what applies: a link with a host sets :attr:`run_flag` and implements
    :meth:`host_options` (or :meth:`backend`); every link implements :meth:`top`."""

    #: ``--link NAME``
    name: str = ""
    #: what ``--link``'s help says of it
    help: str = ""
    #: the ``nfacep run`` option that selects it (``--port``), with what it takes; None: a link
    #: ``nfacep run`` cannot talk over
    run_flag: str | None = None
    #: how the ``nfacep run`` error that asks for one link describes :attr:`run_flag`
    run_choice: str = ""
    #: where the link's software is, as ``module`` or ``module:attribute``, imported only when
    #: asked for (:meth:`part`): ``protocol`` (its format's module), ``host`` (its
    #: :class:`~nfacep.backend.Backend` class), ``model`` (its software board, a
    #: :class:`~nfacep.links.model.BoardModel`), ``top`` (its board top's module)
    parts: Mapping[str, str] = MappingProxyType({})
    #: whether the link carries configuration images (a programmable engine built for it
    #: boots with none and takes its queries over the link, as ``nfacep run`` and ``nfacep
    #: load`` send them); False: the image is built into the board (a boot ROM)
    loads_images: bool = False
    #: whether the link's board top drives the board's SDRAM (``--store sdram``: the engine's
    #: pins through :mod:`nfacep.boards.sdram`); False: ``build`` refuses ``--store sdram``
    drives_sdram: bool = False

    def part(self, name: str):
        """The link's part ``name`` (a key of :attr:`parts`), imported now."""
        module, _, attr = self.parts[name].partition(":")
        loaded = importlib.import_module(module)
        return getattr(loaded, attr) if attr else loaded

    def add_build_arguments(self, parser) -> None:
        """Add the options of ``nfacep build`` and ``nfacep check --board`` for this link."""

    def build_options(self, args) -> dict[str, Any]:
        """The keyword options of :meth:`check_board` and :meth:`top` from the command line
        (a UsageError for a bad one); only called when the link is chosen."""
        return {}

    def check_board(self, platform, board_mhz: float, target_mhz: float | None, **options):
        """A :class:`~nfacep.errors.UsageError` when the board (``platform``, its oscillator
        ``board_mhz``, the clock asked for ``target_mhz``) cannot carry the link."""

    def top(self, engine, board_mhz: float, **options) -> tuple[dict, Any]:
        """The board top around ``engine`` and the report's ``link`` fields: ``kind`` (the
        link's name), ``note`` (the report's ``harness`` line) and the link's own."""
        raise NotImplementedError

    def add_run_arguments(self, parser) -> None:
        """Add the options of ``nfacep run`` for this link."""

    def selected(self, args) -> bool:
        """Whether the command line of ``nfacep run`` chose this link."""
        return False

    def check_run_arguments(self, args) -> None:
        """A UsageError for an option of ``nfacep run`` that does not apply to this link or
        has a bad value, before anything is read."""

    def backend(self, args, progress):
        """The :class:`~nfacep.backend.Backend` that ``nfacep run`` runs over this link;
        ``progress`` is called with a line of text about once a second. By default its
        ``host`` part made with :meth:`host_options` (``--timeout`` and the engine options
        given are every link's)."""
        from nfacep.params import given

        engine_given = tuple(given(args).items())
        options = self.host_options(args, timeout=args.timeout, engine_given=engine_given)
        return self.part("host")(options, progress=progress)

    def host_options(self, args, **common):
        """The options of the ``host`` part from ``nfacep run``'s command line, with the
        ``common`` ones (``timeout``, ``engine_given``)."""
        raise NotImplementedError


def folder_parts(package: str, *, host: str, model: str) -> Mapping[str, str]:
    """The :attr:`Link.parts` of a link laid out as a folder ``package`` is: its modules
    ``protocol``, ``host`` (its back-end the class ``host``), ``model`` (its software board the
    class ``model``) and ``top``."""
    return MappingProxyType(
        {
            "protocol": f"{package}.protocol",
            "host": f"{package}.host:{host}",
            "model": f"{package}.model:{model}",
            "top": f"{package}.top",
        }
    )


#: The links of the package, in the order of ``--link``'s choices: ``module:attribute``.
_BUILTIN = (
    "nfacep.links.harness:HARNESS",
    "nfacep.links.uart:UART",
    "nfacep.links.udp:UDP",
)

#: The link ``nfacep build`` makes without ``--link``: none, the synthesis harness.
DEFAULT = "harness"

_registry: dict[str, Link] = {}


def _load() -> dict[str, Link]:
    if not _registry:
        for spec in _BUILTIN:
            module, _, attr = spec.partition(":")
            link = getattr(importlib.import_module(module), attr)
            _registry.setdefault(link.name, link)
    return _registry


def register(link: Link) -> None:
    """Add ``link`` to the registry (after the package's own); a ValueError if its name is
    taken."""
    links = _load()
    if link.name in links:
        raise ValueError(f"a link named {link.name!r} is registered already")
    links[link.name] = link


def unregister(name: str) -> None:
    """Remove the link named ``name`` from the registry (a KeyError if there is none)."""
    del _load()[name]


def names() -> tuple[str, ...]:
    """Every link's name, in order."""
    return tuple(_load())


def get(name: str) -> Link:
    """The link named ``name``; a UsageError naming the choices for an unknown one."""
    links = _load()
    if name not in links:
        raise UsageError(f"unknown link {name!r}: choose one of {', '.join(links)}")
    return links[name]


def runnable() -> tuple[Link, ...]:
    """The links ``nfacep run`` can talk over, in order."""
    return tuple(link for link in _load().values() if link.run_flag is not None)
