"""The Ethernet MAC layer, a byte per clock cycle (GMII at 1000 Mb/s): :class:`MacRx` finds
the start delimiter after the preamble, checks the FCS and the frame's size and hands on its
bytes with their offsets, :class:`EthernetRx` reads the Ethernet II header from them and
filters the destination address; :class:`MacTx` adds the preamble and start delimiter, pads to
the minimum size, appends the FCS (:data:`FCS`, ``amaranth.lib.crc``) and keeps the
inter-frame gap (its user sends the Ethernet header, :data:`~.headers.ETHERNET`).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from nfacep.links.udp.protocol import MAX_FRAME, MIN_FRAME

from .headers import ETHERNET, INDEX_BITS
from .packet import Depacketizer, frame_signature

__all__ = ["FCS", "EthernetRx", "MacRx", "MacTx", "frame_byte"]

#: The Ethernet FCS, a byte per cycle: IEEE 802.3's CRC-32 (``CRC32_ETHERNET`` in the catalog).
FCS = catalog.CRC32_ETHERNET(data_width=8)
#: The layout of the bytes a MAC sends: the byte and whether it is the frame's last.
frame_byte = data.StructLayout({"data": 8, "last": 1})
_IFG = 12


class MacRx(wiring.Component):
    """The receive MAC: GMII in, the frame's bytes (destination MAC to the end of the payload,
    the FCS removed) out, then a verdict.

    The inputs and the outputs are registered. Any number of ``0x55`` bytes and then ``0xD5``
    start a frame;
    the FCS (:data:`FCS`) runs over every byte after it. The bytes come out four bytes late
    (so the FCS never does), back to back, with their offset ``index`` (``first`` with the
    first, index 0); two cycles after ``rx_dv`` falls,
    ``end`` pulses with ``fcs_ok`` (a good FCS, no ``rx_er``, a start delimiter seen),
    ``size_ok`` (64 to 1518 bytes with the FCS; also set without a start delimiter, so
    that such a burst counts as a bad FCS) and ``length`` (bytes before the FCS,
    saturating at 2047). Every burst of ``rx_dv`` ends in exactly one ``end``.

    Members
    -------
    rxd : ``In(8)``
    rx_dv, rx_er : ``In(1)``
    valid, first : ``Out(1)``
    byte : ``Out(8)``
    index : ``Out(11)``
    end, fcs_ok, size_ok : ``Out(1)``
    length : ``Out(11)``
    """

    def __init__(self):
        super().__init__(
            {
                "rxd": In(8),
                "rx_dv": In(1),
                "rx_er": In(1),
                "valid": Out(1),
                "first": Out(1),
                "byte": Out(8),
                "index": Out(INDEX_BITS),
                "end": Out(1),
                "fcs_ok": Out(1),
                "size_ok": Out(1),
                "length": Out(INDEX_BITS),
            }
        )

    def elaborate(self, platform):
        m = Module()
        d = Signal(8, reset_less=True)
        dv = Signal()
        er = Signal()
        m.d.sync += [d.eq(self.rxd), dv.eq(self.rx_dv), er.eq(self.rx_er)]
        m.submodules.fcs = fcs = FCS.create()
        busy = Signal()  # inside a burst of rx_dv
        sfd = Signal()  # the start delimiter was seen
        bad = Signal()  # rx_er, or no delimiter after the preamble
        count = Signal(INDEX_BITS + 1)  # bytes after the delimiter, saturating
        delay = [Signal(8, name=f"delay{i}", reset_less=True) for i in range(4)]
        saturated = count[INDEX_BITS]
        length = Signal(INDEX_BITS + 1)
        m.d.comb += [
            fcs.data.eq(d),
            fcs.valid.eq(dv & sfd),
            fcs.start.eq(dv & ~sfd & (d == 0xD5)),
            length.eq(Mux(saturated, 2047, count - 4)),
        ]
        # the outputs, registered (timing): a byte a cycle later, the verdict with it
        m.d.sync += [
            self.valid.eq(dv & sfd & (count >= 4)),
            self.first.eq(dv & sfd & (count == 4)),
            self.byte.eq(delay[3]),
            self.index.eq((count - 4)[:INDEX_BITS]),
            self.length.eq(length[:INDEX_BITS]),
            self.end.eq(busy & ~dv),
            self.fcs_ok.eq(sfd & ~bad & fcs.match_detected),
            self.size_ok.eq(~sfd | ((count >= MIN_FRAME) & (count <= MAX_FRAME))),
        ]
        with m.If(dv):
            m.d.sync += [busy.eq(1), bad.eq(bad | er)]
            with m.If(sfd):
                m.d.sync += [delay[0].eq(d), *(delay[i].eq(delay[i - 1]) for i in (1, 2, 3))]
                with m.If(~saturated):
                    m.d.sync += count.eq(count + 1)
            with m.Elif(d == 0xD5):
                m.d.sync += [sfd.eq(1), count.eq(0)]
            with m.Elif(d != 0x55):
                m.d.sync += bad.eq(1)
        with m.Else():
            m.d.sync += [busy.eq(0), sfd.eq(0), bad.eq(0), count.eq(0)]
        return m


class MacTx(wiring.Component):
    """The transmit MAC: preamble and SFD, the frame's bytes (zero-padded to 60), the FCS
    (:data:`FCS`), then at least 12 idle cycles. GMII outputs come two registers after
    the byte is taken.

    ``i_stream`` must offer the frame's bytes back to back once its first is taken (it is not
    waited for: a byte missing mid-frame ends the frame with ``tx_er``, so the receiver drops
    it). ``busy`` is high from the first byte taken to the gap's end.

    Members
    -------
    i_stream : ``In(stream.Signature(frame_byte))``
    txd : ``Out(8)``
    tx_en, tx_er, busy : ``Out(1)``
    """

    def __init__(self):
        super().__init__(
            {
                "i_stream": In(stream.Signature(frame_byte)),
                "txd": Out(8),
                "tx_en": Out(1),
                "tx_er": Out(1),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.fcs = fcs = FCS.create()
        count = Signal(range(max(_IFG, 64)))
        error = Signal()
        # the FSM's byte (comb), then two registered stages (timing: the byte comes through
        # UdpTx's multiplexers): stage 1 feeds the FCS, stage 2 is GMII, the FCS's bytes put
        # in there, when the FCS has taken every byte before them
        txd, en, feed, fcs_slot = Signal(8), Signal(), Signal(), Signal()
        txd1 = Signal(8, reset_less=True)
        en1, feed1, fcs1 = Signal(), Signal(), Signal()
        index1 = Signal(2, reset_less=True)
        m.d.sync += [
            txd1.eq(txd),
            en1.eq(en),
            feed1.eq(feed),
            fcs1.eq(fcs_slot),
            index1.eq(count[:2]),
        ]
        m.d.comb += [fcs.data.eq(txd1), fcs.valid.eq(feed1)]
        m.d.sync += [
            self.txd.eq(Mux(fcs1, fcs.crc.word_select(index1, 8), txd1)),
            self.tx_en.eq(en1),
            self.tx_er.eq(en1 & error),
        ]
        i = self.i_stream
        with m.FSM(name="mac_tx") as fsm:
            with m.State("IDLE"):
                m.d.sync += [count.eq(0), error.eq(0)]
                with m.If(i.valid):
                    m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                m.d.comb += [en.eq(1), txd.eq(Mux(count == 7, 0xD5, 0x55)), fcs.start.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 7):
                    m.d.sync += count.eq(0)
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [en.eq(1), i.ready.eq(1), txd.eq(i.payload.data), feed.eq(1)]
                m.d.sync += count.eq(Mux(count == 63, 63, count + 1))
                with m.If(~i.valid):
                    m.d.sync += error.eq(1)
                with m.If(~i.valid | i.payload.last):
                    with m.If(count >= 59):  # 60 bytes with this one
                        m.d.sync += count.eq(0)
                        m.next = "FCS"
                    with m.Else():
                        m.next = "PAD"
            with m.State("PAD"):
                m.d.comb += [en.eq(1), txd.eq(0), feed.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 59):
                    m.d.sync += count.eq(0)
                    m.next = "FCS"
            with m.State("FCS"):
                m.d.comb += [en.eq(1), fcs_slot.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 3):
                    m.d.sync += count.eq(0)
                    m.next = "GAP"
            with m.State("GAP"):
                m.d.sync += count.eq(count + 1)
                with m.If(count == _IFG - 2):
                    m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE") | en1)
        return m


class EthernetRx(wiring.Component):
    """The Ethernet II header of a received frame (:data:`~.headers.ETHERNET`, from its first
    byte) and whether the frame is for ``mac``: its destination is ``mac`` or broadcast.

    Latency: each field from the cycle after its last byte (:class:`~.packet.Depacketizer`),
    ``for_us`` too (compared as the bytes pass).

    Members
    -------
    frame : ``In(frame_signature)``
        The bytes from :class:`MacRx`.
    fields : ``Out(ETHERNET.layout)``
    for_us : ``Out(1)``
    """

    def __init__(self, mac: bytes):
        if len(mac) != 6:
            raise ValueError("a MAC address of 6 bytes")
        self._mac = int.from_bytes(mac, "big")
        super().__init__(
            {"frame": In(frame_signature), "fields": Out(ETHERNET.layout), "for_us": Out(1)}
        )

    def elaborate(self, platform):
        m = Module()
        compare = {"ours": ("dst", self._mac), "broadcast": ("dst", (1 << 48) - 1)}
        m.submodules.header = header = Depacketizer(ETHERNET, 0, compare)
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        m.d.comb += [
            self.fields.eq(header.fields),
            self.for_us.eq(header.equal.ours | header.equal.broadcast),
        ]
        return m
