"""A usable board design without a network: tuples in and match records out over the board's
USB UART (``nfacep build --link uart``, ``nfacep run``).

:mod:`~boards.link.protocol` is the frame format (no Amaranth: the host and the software
board model use it too), :mod:`~boards.link.uart` the UART, :mod:`~boards.link.framing` the
framing blocks, :mod:`~boards.link.top` the link component and the board tops,
:mod:`~boards.link.model` a software board for testing the host. ``boards/LINK.md`` describes
the link for users.
"""
