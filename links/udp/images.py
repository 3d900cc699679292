"""The host's record of the query files it loaded (boards/UDP.md, "Loading a query"):
``nfacep load`` writes the text of the file whose image it put on a board into a folder, one
file per image named by the image's fingerprint (``<fingerprint>.sql``, written whole or not
at all), and beside it, when the file has runtime parameters, the ``--param`` values the image
holds (``<fingerprint>.param``, one ``name=value`` a line); ``nfacep run --udp``, seeing
another image take over while it streams, reads the file back, makes its image again for the
board's engine and, only when that gives the same fingerprint, names the matches from the
switch on with that file's queries and measures (a record edited after the load is not used).

The folder is ``--images DIR`` when given, else ``$XDG_STATE_HOME/nfacep/images`` (or
``~/.local/state/nfacep/images`` without ``XDG_STATE_HOME``): per user, on the host.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from nfacep.errors import NfacepError

__all__ = ["Recorded", "folder", "look_up", "record"]


def folder(given: str | None = None) -> str:
    """The record's folder: ``given`` (``--images``), else the user's state folder's."""
    if given:
        return given
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(state, "nfacep", "images")


def _path(where: str, fingerprint: str, suffix: str = ".sql") -> str:
    return os.path.join(where, f"{fingerprint}{suffix}")


def record(where: str, fingerprint: str, text: str, params: list[str] | None = None) -> str:
    """Keep ``text`` (a query file's) as the file of the image ``fingerprint`` (hex) in the
    folder ``where`` (made if missing), and the ``--param`` texts ``params`` the image was made
    with beside it (the values first, so a file is never found without its values); the
    file's path. A :class:`NfacepError` when it cannot be written (nothing is left half
    written)."""
    from nfacep.output import atomic_write

    try:
        os.makedirs(where, exist_ok=True)
    except OSError as err:
        raise NfacepError(f"--images {where}: cannot make the folder: {err.strerror}") from None
    values = _path(where, fingerprint, ".param")
    if params:
        with atomic_write(values, newline="", what="--images") as f:
            f.write("".join(f"{p}\n" for p in params))
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(values)
    path = _path(where, fingerprint)
    with atomic_write(path, newline="", what="--images") as f:
        f.write(text)
    return path


@dataclass
class Recorded:
    """What the record says of an image: the compiled file (None when it has none) and, when
    it has none, why."""

    nfa: object | None
    path: str
    reason: str = ""


def look_up(where: str, fingerprint: str, capacity=None) -> Recorded:
    """The query file recorded for the image ``fingerprint`` in the folder ``where``, compiled,
    or why there is none usable; with ``capacity`` (the board's engine's,
    :class:`~nfacep.image.Capacity`), only when the file and its recorded values make that
    image again for it."""
    from nfacep import compile_text
    from nfacep.errors import QueryError

    path = _path(where, fingerprint)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return Recorded(
            None,
            path,
            f"no record of image {fingerprint} in {where} (`nfacep load` keeps one there for "
            "each file it loads: the image was loaded from another host, or with another "
            "--images)",
        )
    except (OSError, UnicodeDecodeError) as err:
        return Recorded(None, path, f"its record {path} cannot be read: {err}")
    try:
        nfa = compile_text(text, path)
    except QueryError as err:
        first = str(err).splitlines()[0]
        return Recorded(None, path, f"its record {path} does not compile: {first}")
    if capacity is not None:
        made = _remade(nfa, capacity, _path(where, fingerprint, ".param"))
        if made != fingerprint:
            return Recorded(
                None,
                path,
                f"its record {path} does not make that image for the board's engine (it "
                f"gives {made}): the file or its values changed after `nfacep load`",
            )
    return Recorded(nfa, path)


def _remade(nfa, capacity, values_path: str) -> str:
    """The fingerprint of the image ``nfa`` makes for an engine of ``capacity`` with the
    values recorded at ``values_path`` (none when it is missing), or why it makes none."""
    from nfacep.errors import NfacepError
    from nfacep.image import EngineShape, image
    from nfacep.settings import ParamValues

    program = nfa.program
    try:
        with open(values_path, encoding="utf-8", newline="") as f:
            texts = f.read().splitlines()
    except FileNotFoundError:
        texts = []
    except (OSError, UnicodeDecodeError) as err:
        return f"its values {values_path} cannot be read: {err}"
    try:
        values = None
        if program.parameters:
            values = ParamValues.parse(program.parameters, texts, switches=False, command="load")
        shape = EngineShape(program.schema, program.partition_fields, capacity)
        return image(nfa, shape, values).fingerprint
    except NfacepError as err:
        return f"none: {str(err).splitlines()[0]}"
