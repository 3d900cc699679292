"""The Gigabit Ethernet/UDP link's gateware (``nfacep build --link udp``; ``boards/UDP.md``),
layered as LiteEth's: a file per layer, each knowing the header below it and not the payload
above it.

:mod:`~.headers` declares every header once (a :class:`~amaranth.lib.data.StructLayout` and its
software encoding); :mod:`~.packet` reads them from a received frame (``Depacketizer``) and
sends them (``Packetizer``, ``pack``). :mod:`~.mac` is the MAC (preamble, FCS, padding) and the
Ethernet header, :mod:`~.arp`, :mod:`~.ipv4` and :mod:`~.udp` the layers above it, and
:mod:`~.payload` nfacep's payload (the frame classes, the tuples in, RECORDS and STATUS out;
its receive side :mod:`~.payload_rx`, its transmit side :mod:`~.payload_tx`).
:mod:`~.rx` is the receive path (:class:`~.rx.EthRx`), :mod:`~.link` the link component with
its clock-domain crossing (:class:`~.link.UdpLink`) and :mod:`~.link_events` its counters and
requests, and :mod:`~.top` the engine behind it (:class:`~.top.UdpTop`). The payload format
is :mod:`nfacep.links.udp.protocol`.
"""
