"""The Gigabit Ethernet/UDP link (``--link udp``, issue 10): tuples in and match records out
in UDP packets.

:mod:`~nfacep.boards.link.eth.payload` is the payload format and the Ethernet/IPv4/UDP framing
in Python (the tests, the host and the software board model use it);
:mod:`nfacep.hdl.eth` the gateware, layered as LiteEth's (MAC, ARP, IPv4, UDP, the payload)
with the link component, its clock-domain crossing and counters. ``boards/UDP.md`` describes
the link for users.
"""
