"""``python -m nfacep``: the ``nfacep`` command (:mod:`nfacep.entry`), for an environment whose
scripts folder is not on PATH."""

from .entry import main

main()
