"""Writing results: whole files or nothing (a temporary file renamed into place)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

from .errors import NfacepError

__all__ = ["atomic_write", "summary_path"]


@contextlib.contextmanager
def atomic_write(path: str, newline: str | None = None):
    """Open a temporary file beside ``path``; rename it over ``path`` only on success."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise NfacepError(f"{path}: the folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".nfacep-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it owner-only; follow the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def summary_path(output: str) -> str:
    """``matches.csv`` → ``matches.summary.json`` (the JSON summary beside a match file)."""
    root, _ = os.path.splitext(output)
    return root + ".summary.json"


def write_json(path: str, data) -> None:
    with atomic_write(path) as f:
        json.dump(data, f, indent=2)
        f.write("\n")
