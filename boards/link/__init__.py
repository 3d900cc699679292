"""The links' gateware: the UART link here, the Gigabit Ethernet/UDP link in
:mod:`nfacep.boards.link.eth`. The links themselves — their protocols, hosts, software boards
and board tops — are :mod:`nfacep.links` (``nfacep build --link uart``, ``nfacep run``).

:mod:`~nfacep.boards.link.uart` is the UART receiver, :mod:`~nfacep.boards.link.framing` the
framing blocks, :mod:`~nfacep.boards.link.top` the link component and the engine behind it
(:class:`~nfacep.boards.link.top.UartTop`); the frame format they implement is
:mod:`nfacep.links.uart.protocol`'s. ``boards/LINK.md`` describes the link for users.
"""
