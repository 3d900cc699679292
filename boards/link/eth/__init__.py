"""The Gigabit Ethernet/UDP link's gateware (``--link udp``, issue 10): tuples in and match
records out in UDP packets.

:mod:`~nfacep.boards.link.eth.rx` is the receive path (MAC, parser and filters, commit buffer,
tuple gatherer), :mod:`~nfacep.boards.link.eth.tx` the transmit path,
:mod:`~nfacep.boards.link.eth.link` the link component, its clock-domain crossing and counters.
The payload format they implement is :mod:`nfacep.links.udp.protocol`'s; the board top is
:mod:`nfacep.links.udp.top`. ``boards/UDP.md`` describes the link for users.
"""
