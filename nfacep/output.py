"""Writing results: whole files or nothing.

Every output is first written to a temporary file beside its destination (same folder, so
the rename cannot cross file systems) and renamed over it only when everything a command
writes is complete: :func:`atomic_files` for several outputs (a match file and its summary),
:func:`atomic_write` for one. On any error, and on Ctrl-C or SIGTERM (:mod:`nfacep.cli` turns
both into exceptions), the temporary files are removed and existing outputs stay as they were.

:func:`check_outputs` checks before any work that outputs can be written and are none of the
command's inputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
from collections.abc import Iterable, Iterator

from .errors import NfacepError, UsageError

__all__ = [
    "atomic_files",
    "atomic_write",
    "check_outputs",
    "probe_folder",
    "probe_folder_to_make",
    "summary_path",
]

#: The prefix of the temporary files (hidden, and recognisable as nfacep's).
TEMP_PREFIX = ".nfacep-"


def probe_folder(folder: str, what: str) -> None:
    """A :class:`UsageError` naming ``what`` unless a file can be created in ``folder``
    (it exists, is a folder, is writable and not on a read-only or pseudo file system).
    Tries it: creates and removes an empty temporary file."""
    if not os.path.isdir(folder):
        raise UsageError(f"{what}: the folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
    except OSError as err:
        raise UsageError(f"{what}: cannot write in {folder}: {err.strerror or err}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def probe_folder_to_make(folder: str, what: str) -> None:
    """Before any work: a :class:`UsageError` naming ``what`` unless ``folder`` is a folder
    files can be written in, or can be made with the folders above it: an existing ``folder``
    that is not a folder, or the nearest existing path above it that is not a writable
    folder, is named (:func:`probe_folder`)."""
    path = os.path.abspath(folder)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UsageError(f"{what}: {folder} exists and is not a folder")
    above = path
    while not os.path.isdir(above):
        if os.path.lexists(above):
            raise UsageError(f"{what}: {above} is not a folder, so {folder} cannot be made")
        above = os.path.dirname(above)
    probe_folder(above, what)


def _check_destination(path: str, what: str) -> str:
    """The folder of the output ``path``; a UsageError when ``path`` cannot be an output
    file (empty, a folder, a device or other non-regular file)."""
    if not path:
        raise UsageError(f"{what} is empty: give the name of a file to write")
    if os.path.isdir(path):
        raise UsageError(f"{what} {path} is a folder; give the name of a file to write")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None  # does not exist (or a dangling link): it is created
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(
            f"{what} {path} exists and is not a regular file (a device, a pipe "
            "or a socket); nfacep writes a file by replacing it"
        )
    return os.path.dirname(os.path.abspath(path))


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(
    paths: Iterable[str | None], inputs: Iterable[str | None] = (), *, what: str = "--output"
) -> None:
    """Before any work: a :class:`UsageError` when one of ``paths`` (the files a command will
    write) could not be written, or is one of ``inputs`` (the files and folders it reads),
    also through links, or lies inside an input folder."""
    sources = [i for i in inputs if i]
    for path in paths:
        if path is None:
            continue
        folder = _check_destination(path, what)
        for source in sources:
            if _same(path, source):
                raise UsageError(
                    f"{what} {path} is the input {source}: writing it would "
                    "destroy the input; choose another file"
                )
            if os.path.isdir(source):
                inside = os.path.realpath(source)
                if os.path.realpath(path).startswith(inside.rstrip(os.sep) + os.sep):
                    raise UsageError(
                        f"{what} {path} is inside the input folder {source}; "
                        "choose a file elsewhere"
                    )
        probe_folder(folder, f"{what} {path}")


def is_folder(output: str) -> bool:
    """Whether ``--output M`` asks for a Parquet folder of matches (docs/formats.md): ``M/``,
    a trailing slash (a folder named without one is refused as a match file, as before)."""
    return output.endswith(("/", os.sep))


def check_folder(output: str, inputs: Iterable[str | None] = ()) -> str:
    """Before any work: a :class:`UsageError` unless the Parquet folder ``output`` can be
    written whole (it is new, or an empty folder) with its summary beside it (as
    :func:`check_outputs` checks a file: not an input, not inside an input folder). Returns
    the folder's path without its trailing slash."""
    folder = output.rstrip("/" + os.sep) or output
    if os.path.lexists(folder) and (not os.path.isdir(folder) or os.listdir(folder)):
        raise UsageError(
            f"--output {output}: a Parquet folder of matches is written whole, and this "
            "exists and is not an empty folder"
        )
    check_outputs([summary_path(folder)], inputs)
    return folder


def _temporary(path: str, what: str):
    folder = _check_destination(path, what)
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: the folder {folder} does not exist")
    try:
        return tempfile.mkstemp(prefix=TEMP_PREFIX, dir=folder)
    except OSError as err:
        raise NfacepError(f"{path}: cannot write in {folder}: {err.strerror or err}") from None


@contextlib.contextmanager
def atomic_files(
    paths: list[str], newline: str | None = None, *, what: str = "output"
) -> Iterator[list]:
    """Open a temporary file beside each of ``paths`` (text, UTF-8) and yield them in order;
    when the block completes, close them all and rename each over its destination. On any
    exception (KeyboardInterrupt and SIGTERM's included) remove them all: no destination is
    touched. A destination that is a folder or a device is refused before anything is
    written; an OSError while writing is a :class:`NfacepError` naming the file."""
    for path in paths:
        _check_destination(path, what)
    temps: list[str] = []
    files: list = []
    try:
        for path in paths:
            with _deferred_signals():  # a signal comes after the name is recorded
                fd, tmp = _temporary(path, what)
                temps.append(tmp)
            files.append(os.fdopen(fd, "w", encoding="utf-8", newline=newline))
        yield files
        for f in files:
            f.close()
        mode = 0o666 & ~_umask()  # mkstemp makes them owner-only; follow the umask
        for tmp in temps:
            os.chmod(tmp, mode)
        with _deferred_signals():  # all renamed, or (on an error) none past the failing one
            for tmp, path in zip(temps, paths, strict=True):
                os.replace(tmp, path)
    except OSError as err:
        _remove(files, temps)
        name = err.filename if isinstance(err.filename, str) else ", ".join(paths)
        raise NfacepError(f"{name}: cannot write: {err.strerror or err}") from None
    except BaseException:
        _remove(files, temps)
        raise


@contextlib.contextmanager
def _deferred_signals():
    """Ctrl-C and SIGTERM wait until the block is done (they are then delivered)."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX
        yield
        return
    signals = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _remove(files: list, temps: list[str]) -> None:
    for f in files:
        with contextlib.suppress(OSError):
            f.close()
    for tmp in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_write(path: str, newline: str | None = None, *, what: str = "output"):
    """Open a temporary file beside ``path``; rename it over ``path`` only on success
    (:func:`atomic_files` for one file)."""
    with atomic_files([path], newline, what=what) as (f,):
        yield f


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
