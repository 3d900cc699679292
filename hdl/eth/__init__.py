"""The Gigabit Ethernet/UDP link's gateware (``nfacep build --link udp``; ``boards/UDP.md``).

:mod:`~.mac` the MAC (preamble, FCS, padding), :mod:`~.payload` the nfacep payload (the frame
classes, the tuples in, RECORDS and STATUS out), :mod:`~.link` the link component
(:class:`~.link.UdpLink`), its clock-domain crossing and counters, and the engine behind it
(:class:`~.link.UdpTop`). The payload format is :mod:`nfacep.boards.link.eth.payload`.
"""
