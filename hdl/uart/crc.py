"""The UART link's frame CRC (:func:`nfacep.links.uart.protocol.crc16`) in gateware, shared by
the :class:`~.deframer.Deframer` and the :class:`~.framer.Framer`."""

from amaranth.lib.crc import catalog

__all__ = ["CRC"]

#: The frames' CRC (:func:`nfacep.links.uart.protocol.crc16`) one bit at a time, MSB first:
#: ``CRC.create()`` is the blocks' CRC register.
CRC = catalog.CRC16_CCITT_FALSE(data_width=1)
