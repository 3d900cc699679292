"""The UART link's gateware (``nfacep build --link uart``; ``boards/LINK.md``):
:mod:`~.rx` the UART receiver and the bit time, :mod:`~.deframer` the host's frames in,
:mod:`~.framer` records, ACKs and STATUS out on the line (its STATUS counters
:mod:`~.status`), :mod:`~.crc` their CRC. The bytes of good TUPLES frames go through
:class:`nfacep.hdl.stream.PacketQueue` and :class:`nfacep.hdl.stream.TupleGatherer` to the
engine. The frame format is
:mod:`nfacep.links.uart.protocol`.
"""
