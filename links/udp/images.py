"""The host's record of the query files it loaded (boards/UDP.md, "Loading a query"):
``nfacep load`` writes the text of the file whose image it put on a board into a folder, one
file per image named by the image's fingerprint (``<fingerprint>.sql``, written whole or not
at all); ``nfacep run --udp``, seeing another image take over while it streams, reads the file
back to name the matches from the switch on with that file's queries and measures.

The folder is ``--images DIR`` when given, else ``$XDG_STATE_HOME/nfacep/images`` (or
``~/.local/state/nfacep/images`` without ``XDG_STATE_HOME``): per user, on the host.
"""

from __future__ import annotations

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


def _path(where: str, fingerprint: str) -> str:
    return os.path.join(where, f"{fingerprint}.sql")


def record(where: str, fingerprint: str, text: str) -> str:
    """Keep ``text`` (a query file's) as the file of the image ``fingerprint`` (hex) in the
    folder ``where`` (made if missing); its path. A :class:`NfacepError` when it cannot be
    written (nothing is left half written)."""
    from nfacep.output import atomic_write

    try:
        os.makedirs(where, exist_ok=True)
    except OSError as err:
        raise NfacepError(f"--images {where}: cannot make the folder: {err.strerror}") from None
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


def look_up(where: str, fingerprint: str) -> Recorded:
    """The query file recorded for the image ``fingerprint`` in the folder ``where``, compiled,
    or why there is none usable."""
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
    return Recorded(nfa, path)
