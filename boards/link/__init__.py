"""A usable board design without a network: tuples in and match records out over the board's
USB UART (``nfacep build --link uart``, ``nfacep run``).

:mod:`~nfacep.boards.link.protocol` is the frame format and the software CRC (the host and the
software board model use it too; of Amaranth it needs only ``lib.enum``, for the frame types'
shape), :mod:`nfacep.hdl.uart` the gateware (the UART receiver and the framing blocks),
:mod:`~nfacep.boards.link.top` the link component and the board tops,
:mod:`~nfacep.boards.link.model` a software board for testing the host. ``boards/LINK.md``
describes the link for users.

:mod:`nfacep.boards.link.eth` is the second link, Gigabit Ethernet/UDP (``--link udp``,
``boards/UDP.md``); it shares this package's engine fingerprint (:func:`.protocol.engine_id`).
"""
