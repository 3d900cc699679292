"""The Gigabit Ethernet/UDP link's gateware (``nfacep build --link udp``; ``boards/UDP.md``),
layered as LiteEth's: a file per layer, each knowing the header below it and not the payload
above it.

:mod:`~.headers` declares every header once (a :class:`~amaranth.lib.data.StructLayout` and its
software encoding); :mod:`~.packet` reads them from a received frame (``Depacketizer``) and
sends them (``Packetizer``, ``pack``). :mod:`~.mac` is the MAC (preamble, FCS, padding) and the
Ethernet header, :mod:`~.arp`, :mod:`~.ipv4` and :mod:`~.udp` the layers above it, and
:mod:`~.payload` nfacep's payload (the frame classes, the tuples in, RECORDS and STATUS out).
:mod:`~.link` puts them together: the receive path (:class:`~.link.EthRx`), the link component
with its clock-domain crossing and counters (:class:`~.link.UdpLink`), and the engine behind it
(:class:`~.link.UdpTop`). The payload format is :mod:`nfacep.links.udp.protocol`.
"""
