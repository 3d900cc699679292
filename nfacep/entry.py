"""The ``nfacep`` command's entry point (:func:`nfacep.cli.main` does the work).

Python loads the compiler before :func:`~nfacep.cli.main` can catch anything: a Ctrl-C in that
moment is an interrupted command too (one line, exit 130), never a traceback. Importing the
:mod:`nfacep` package itself loads almost nothing, so that moment starts here.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print("nfacep: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(run())
