"""The UDP link's receive path, one byte per clock cycle of the receive clock (125 MHz at
1000 Mb/s)::

    GMII ▸ MacRx ▸ RxParser ▸ CommitBuffer ▸ TupleGatherer ▸ (AsyncFIFO) ▸ engine
                     └─ one event per frame ▸ (AsyncFIFO) ▸ counters, requests

The blocks here are written for the ``sync`` domain; :class:`EthRx` puts the first four
together and :class:`nfacep.boards.link.eth.link.UdpLink` runs it in the receive clock's domain
(``DomainRenamer``). Nothing here can stall the line: a frame whose tuples do not fit the
buffer is dropped whole and counted (``engine_full``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES
from nfacep.links.udp.protocol import (
    FRAME_CLASSES,
    HEADER_BYTES,
    MAX_FRAME,
    MIN_FRAME,
    VERSION,
    PacketType,
)

__all__ = [
    "FCS",
    "CommitBuffer",
    "EthRx",
    "EventKind",
    "FrameClass",
    "MacRx",
    "RxParser",
    "TupleGatherer",
    "event_layout",
]

#: The Ethernet FCS, a byte per cycle: IEEE 802.3's CRC-32 (``CRC32_ETHERNET`` in the catalog).
FCS = catalog.CRC32_ETHERNET(data_width=8)

#: The byte offsets of a frame (from the destination MAC address, no VLAN tag).
ETH_TYPE, ARP_AT, IP_AT, UDP_AT = 12, 14, 14, 34
PAYLOAD_AT = UDP_AT + 8
DATA_AT = PAYLOAD_AT + HEADER_BYTES
#: Frame lengths without the FCS.
_MIN, _MAX = MIN_FRAME - 4, MAX_FRAME - 4
INDEX_BITS = 11  # byte offsets saturate at 2047, beyond the longest frame


class FrameClass(enum.IntEnum, shape=4):
    """A received frame's class (:data:`~.payload.FRAME_CLASSES`, in order)."""

    ACCEPTED = 0
    BAD_SIZE = 1
    BAD_FCS = 2
    NOT_FOR_US = 3
    IP_UNSUPPORTED = 4
    BAD_IP_CHECKSUM = 5
    IP_FRAGMENT = 6
    BAD_UDP = 7
    BAD_HEADER = 8
    ENGINE_FULL = 9


assert [c.name.lower() for c in FrameClass] == list(FRAME_CLASSES)


class EventKind(enum.IntEnum, shape=3):
    """What an accepted frame asks for."""

    TUPLES = 0
    STATUS_REQ = 1
    RESET = 2
    ARP = 3
    PARAMS = 4


def event_layout(params_bytes: int = 0) -> data.StructLayout:
    """One received frame: its class and, when accepted, what it asks for and who sent it;
    with ``params_bytes`` (bytes of the engine's runtime parameters), a PARAMS packet's body
    (``switch``: the tuple number in the low 48 bits, the values above)."""
    fields = {"cls": FrameClass, "kind": EventKind, "seq": 32, "mac": 48, "ip": 32, "port": 16}
    if params_bytes:
        fields["switch"] = 8 * (SWITCH_BYTES + params_bytes)
    return data.StructLayout(fields)


def _be(value: int, n: int) -> list[int]:
    return list(value.to_bytes(n, "big"))


class MacRx(wiring.Component):
    """The receive MAC: GMII in, the frame's bytes (destination MAC to the end of the payload,
    the FCS removed) out, then a verdict.

    The inputs and the outputs are registered. Any number of ``0x55`` bytes and then ``0xD5``
    start a frame;
    the FCS (:data:`FCS`) runs over every byte after it. The bytes come out four bytes late
    (so the FCS never does), with their offset ``index``; two cycles after ``rx_dv`` falls,
    ``end`` pulses with ``fcs_ok`` (a good FCS, no ``rx_er``, a start delimiter seen),
    ``size_ok`` (64 to 1518 bytes with the FCS; also set without a start delimiter, so
    that such a burst counts as a bad FCS) and ``length`` (bytes before the FCS,
    saturating at 2047). Every burst of ``rx_dv`` ends in exactly one ``end``.

    Members
    -------
    rxd : ``In(8)``
    rx_dv, rx_er : ``In(1)``
    valid : ``Out(1)``
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


class RxParser(wiring.Component):
    """Classifies the frames from a :class:`MacRx` and writes the tuple bytes of TUPLES
    packets to a :class:`CommitBuffer`.

    Byte by byte it checks the fixed-offset headers (Ethernet II; ARP, or IPv4 without options
    with UDP; the payload header of :mod:`~.payload`) against the board's addresses and
    accumulates the IPv4 header sum. The bytes of the payload after its header go to ``write``
    (no backpressure: the buffer raises ``overflow`` when one does not fit) when the packet is a
    TUPLES one; at ``end`` the frame's class (:data:`~.payload.FRAME_CLASSES`) is decided from
    what was gathered (a cycle after ``end``: every test reads registers); a cycle later
    ``commit`` or ``rollback`` pulses and ``event`` carries
    the class and, for an accepted frame, its kind (:class:`EventKind`), its ``seq`` and the
    sender's MAC, IP address and port.

    Members
    -------
    valid, byte, index, end, fcs_ok, size_ok, length : ``In``
        From :class:`MacRx`.
    write : ``Out(stream.Signature(8))``
        Always taken.
    commit, rollback : ``Out(1)``
    overflow : ``In(1)``
    event : ``Out(stream.Signature(event_layout(params_bytes)))``
        ``valid`` for one cycle per frame; ``ready`` is ignored (the events' FIFO is read
        every cycle and frames are at least 84 cycles apart).

    With ``params_bytes`` (the engine's runtime parameters' bytes; 0: a PARAMS packet is a
    ``bad_header``), a PARAMS packet for this engine whose body is exactly the switch's tuple
    number and the values (else ``bad_udp``) is accepted, its body in the event's ``switch``;
    whether the engine takes it is decided after the crossing.
    """

    def __init__(
        self,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        tuple_bytes: int,
        params_bytes: int = 0,
    ):
        if len(mac) != 6 or len(ip) != 4 or not 0 < port < 65536:
            raise ValueError("a MAC address of 6 bytes, an IPv4 address of 4 and a port")
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        self._mac, self._ip, self._port = bytes(mac), bytes(ip), port
        self._engine_id = engine_id & 0xFFFFFFFF
        self._tuple_bytes = tuple_bytes
        self._params_bytes = int(params_bytes)
        super().__init__(
            {
                "valid": In(1),
                "byte": In(8),
                "index": In(INDEX_BITS),
                "end": In(1),
                "fcs_ok": In(1),
                "size_ok": In(1),
                "length": In(INDEX_BITS),
                "write": Out(stream.Signature(8)),
                "commit": Out(1),
                "rollback": Out(1),
                "overflow": In(1),
                "event": Out(stream.Signature(event_layout(self._params_bytes))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        byte = self.byte
        cases: dict[int, list] = {}

        def at(offset, *statements):
            cases.setdefault(offset, []).extend(statements)

        def match(flag, offset, expected: list[int], *, alt=None):
            """``flag``: the bytes from ``offset`` are ``expected`` (or ``alt``)."""
            for k, value in enumerate(expected):
                hit = byte == value if alt is None else (byte == value) | (byte == alt[k])
                at(offset + k, flag.eq(hit if k == 0 else flag & hit))

        def capture(reg, offset, n, *, little=False):
            for k in range(n):
                j = k if little else n - 1 - k
                at(offset + k, reg[8 * j : 8 * j + 8].eq(byte))

        # Ethernet
        mac_ok, bcast = Signal(), Signal()
        match(mac_ok, 0, list(self._mac))
        match(bcast, 0, [0xFF] * 6)
        peer_mac = Signal(48, reset_less=True)
        capture(peer_mac, 6, 6)
        ethertype = Signal(16, reset_less=True)
        capture(ethertype, ETH_TYPE, 2)
        is_arp = ethertype == 0x0806
        is_ip = ethertype == 0x0800
        # ARP: a request for our address from an Ethernet/IPv4 station
        arp_ok, arp_tpa = Signal(), Signal()
        match(arp_ok, ARP_AT, [0, 1, 8, 0, 6, 4, 0, 1])
        match(arp_tpa, ARP_AT + 24, list(self._ip))
        peer_ip = Signal(32, reset_less=True)  # the sender: ARP's SPA, IPv4's source
        for k in range(4):
            j = 8 * (3 - k)
            at(IP_AT + 12 + k, peer_ip[j : j + 8].eq(Mux(is_ip, byte, peer_ip[j : j + 8])))
            at(ARP_AT + 14 + k, peer_ip[j : j + 8].eq(Mux(is_arp, byte, peer_ip[j : j + 8])))
        # IPv4
        ver_ihl = Signal(8, reset_less=True)
        capture(ver_ihl, IP_AT, 1)
        ip_length = Signal(16, reset_less=True)
        capture(ip_length, IP_AT + 2, 2)
        fragment = Signal(16, reset_less=True)
        capture(fragment, IP_AT + 6, 2)
        proto = Signal(8, reset_less=True)
        capture(proto, IP_AT + 9, 1)
        ip_ok = Signal()
        match(ip_ok, IP_AT + 16, list(self._ip))
        high = Signal(8, reset_less=True)
        total = Signal(20, reset_less=True)  # the IPv4 header's 10 words, summed
        for k in range(0, 20, 2):
            at(IP_AT + k, high.eq(byte))
            at(IP_AT + k + 1, total.eq((0 if k == 0 else total) + Cat(byte, high)))
        # UDP
        peer_port = Signal(16, reset_less=True)
        capture(peer_port, UDP_AT, 2)
        port_ok = Signal()
        match(port_ok, UDP_AT + 2, _be(self._port, 2))
        udp_length = Signal(16, reset_less=True)
        capture(udp_length, UDP_AT + 4, 2)
        # the payload's header
        version_ok = Signal()
        match(version_ok, PAYLOAD_AT, [VERSION])
        ptype = Signal(8, reset_less=True)
        capture(ptype, PAYLOAD_AT + 1, 1)
        seq = Signal(32, reset_less=True)
        capture(seq, PAYLOAD_AT + 4, 4, little=True)
        engine_ok = Signal()
        match(engine_ok, PAYLOAD_AT + 8, list(self._engine_id.to_bytes(4, "little")))
        # a PARAMS packet's body
        pb = self._params_bytes
        switch = Signal(8 * (SWITCH_BYTES + pb), reset_less=True) if pb else None
        if pb:
            capture(switch, DATA_AT, SWITCH_BYTES + pb, little=True)
        is_params = (ptype == PacketType.PARAMS) if pb else Const(0)

        # the tuple bytes: from DATA_AT to the UDP payload's end (counted down: timing)
        data_phase = Signal(reset_less=True)
        data_left = Signal(16, reset_less=True)
        at(DATA_AT - 1, data_phase.eq(1))
        at(
            UDP_AT + 6,
            data_left.eq(Mux(udp_length >= 8 + HEADER_BYTES, udp_length - (8 + HEADER_BYTES), 0)),
        )
        tb = self._tuple_bytes
        phase = Signal(range(tb), reset_less=True)
        some = Signal(reset_less=True)  # at least one tuple byte
        in_data = Signal()
        is_tuples = ptype == PacketType.TUPLES
        at(0, some.eq(0), phase.eq(0))
        m.d.comb += [
            in_data.eq(self.valid & data_phase & (data_left != 0)),
            self.write.valid.eq(in_data & is_tuples),
            self.write.payload.eq(byte),
        ]
        with m.If(in_data):
            m.d.sync += [
                some.eq(1),
                phase.eq(Mux(phase == tb - 1, 0, phase + 1)),
                data_left.eq(data_left - 1),
            ]
        with m.If(self.end):  # (a frame shorter than its UDP length ends its data here)
            m.d.sync += data_phase.eq(0)

        # IPv4 and UDP tests, registered as soon as their fields are in (timing)
        sum1 = Signal(17, reset_less=True)  # the sum folded once, then twice
        at(UDP_AT, sum1.eq(total[:16] + total[16:]))
        checksum_ok = Signal(reset_less=True)
        at(UDP_AT + 1, checksum_ok.eq((sum1[:16] + sum1[16])[:16] == 0xFFFF))
        ip_end = Signal(17, reset_less=True)
        at(IP_AT + 4, ip_end.eq(ip_length + IP_AT))
        header_end = 8 + HEADER_BYTES
        udp_ok, command_ok = Signal(reset_less=True), Signal(reset_less=True)
        params_ok = Signal(reset_less=True)
        at(
            UDP_AT + 6,
            udp_ok.eq((udp_length + 20 == ip_length) & (udp_length >= header_end)),
            command_ok.eq(udp_length == header_end),
            params_ok.eq(udp_length == header_end + SWITCH_BYTES + pb),
        )

        # what the headers say, decided at the first byte after them (timing)
        header_cls = Signal(FrameClass, reset_less=True)
        header_kind = Signal(EventKind, reset_less=True)
        early = Signal(reset_less=True)  # decided before the UDP length: nothing overrides it
        cls_h, kind_h, early_h = self._header_class(m, locals())
        at(DATA_AT + 1, header_cls.eq(cls_h), header_kind.eq(kind_h), early.eq(early_h))

        with m.If(self.valid), m.Switch(self.index):
            for offset in sorted(cases):
                with m.Case(offset):
                    m.d.sync += cases[offset]

        # the verdict, a cycle after the frame's end, from registers only
        verdict = Signal()
        fcs_ok, size_ok, truncated = (Signal(reset_less=True) for _ in range(3))
        m.d.sync += verdict.eq(self.end)
        with m.If(self.end):
            m.d.sync += [
                fcs_ok.eq(self.fcs_ok),
                size_ok.eq(self.size_ok),
                truncated.eq(ip_end > self.length),
            ]
        cls, kind = self._verdict(m, locals())
        ev = self.event
        m.d.sync += ev.valid.eq(verdict)
        with m.If(verdict):
            m.d.sync += [
                ev.payload.cls.eq(cls),
                ev.payload.kind.eq(kind),
                ev.payload.seq.eq(seq),
                ev.payload.mac.eq(peer_mac),
                ev.payload.ip.eq(peer_ip),
                ev.payload.port.eq(peer_port),
            ]
            if pb:
                m.d.sync += ev.payload.switch.eq(switch)
        # (from the event's registers: timing)
        accept_tuples = (ev.payload.cls == FrameClass.ACCEPTED) & (
            ev.payload.kind == EventKind.TUPLES
        )
        m.d.comb += [
            self.commit.eq(ev.valid & accept_tuples),
            self.rollback.eq(ev.valid & ~accept_tuples),
        ]
        return m

    def _header_class(self, m, f):
        """The class the headers give (``f``: the parser's locals), what the frame asks for,
        and whether the class is decided before the UDP length test."""
        ptype = f["ptype"]
        command = (ptype == PacketType.STATUS_REQ) | (ptype == PacketType.RESET)
        cls = Signal(FrameClass)
        kind = Signal(EventKind)
        early = Signal()
        C = FrameClass
        with m.If(ptype == PacketType.STATUS_REQ):
            m.d.comb += kind.eq(EventKind.STATUS_REQ)
        with m.Elif(ptype == PacketType.RESET):
            m.d.comb += kind.eq(EventKind.RESET)
        with m.Elif(f["is_params"]):
            m.d.comb += kind.eq(EventKind.PARAMS)
        m.d.comb += early.eq(1)
        with m.If(~f["mac_ok"] & ~f["bcast"]):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(f["is_arp"]):
            m.d.comb += [
                cls.eq(Mux(f["arp_ok"] & f["arp_tpa"], C.ACCEPTED, C.NOT_FOR_US)),
                kind.eq(EventKind.ARP),
            ]
        with m.Elif(~f["is_ip"] | ~f["ip_ok"] | (f["proto"] != 17)):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(f["ver_ihl"] != 0x45):
            m.d.comb += cls.eq(C.IP_UNSUPPORTED)
        with m.Elif(~f["checksum_ok"]):
            m.d.comb += cls.eq(C.BAD_IP_CHECKSUM)
        with m.Elif(f["fragment"][:14] != 0):  # more fragments, or an offset
            m.d.comb += cls.eq(C.IP_FRAGMENT)
        with m.Elif(~f["port_ok"]):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Else():
            m.d.comb += early.eq(0)
            with m.If(~f["udp_ok"]):
                m.d.comb += cls.eq(C.BAD_UDP)
            with m.Elif(
                ~f["version_ok"]
                | ~(f["is_tuples"] | command | f["is_params"])
                | ((f["is_tuples"] | f["is_params"]) & ~f["engine_ok"])
            ):
                m.d.comb += cls.eq(C.BAD_HEADER)
            with m.Else():
                m.d.comb += cls.eq(C.ACCEPTED)
        return cls, kind, early

    def _verdict(self, m, f):
        """The frame's class and kind at its end, from registers: the headers' class
        (:meth:`_header_class`), the MAC's verdict, the length and the tuple data."""
        C = FrameClass
        cls = Signal(FrameClass)
        command = (f["header_kind"] == EventKind.STATUS_REQ) | (f["header_kind"] == EventKind.RESET)
        with m.If(~f["size_ok"]):
            m.d.comb += cls.eq(C.BAD_SIZE)
        with m.Elif(~f["fcs_ok"]):
            m.d.comb += cls.eq(C.BAD_FCS)
        with m.Elif(f["early"]):
            m.d.comb += cls.eq(f["header_cls"])
        with m.Elif(f["truncated"]):
            m.d.comb += cls.eq(C.BAD_UDP)
        with m.Elif(f["header_cls"] != C.ACCEPTED):
            m.d.comb += cls.eq(f["header_cls"])
        params = f["header_kind"] == EventKind.PARAMS
        with m.Elif(
            Mux(
                command,
                ~f["command_ok"],
                Mux(params, ~f["params_ok"], ~f["some"] | (f["phase"] != 0)),
            )
        ):
            m.d.comb += cls.eq(C.BAD_UDP)
        with m.Elif(~command & ~params & self.overflow):
            m.d.comb += cls.eq(C.ENGINE_FULL)
        with m.Else():
            m.d.comb += cls.eq(C.ACCEPTED)
        return cls, f["header_kind"]


class CommitBuffer(wiring.Component):
    """A byte FIFO whose writes become visible only when committed, a byte per cycle each way
    (the UART link's :class:`~nfacep.boards.link.framing.FrameBuffer` reads one byte in two
    cycles, too slow for the line).

    ``write`` is always ready; a byte that finds the buffer full is dropped and raises
    ``overflow`` until the next ``commit`` or ``rollback``. ``commit`` makes every byte written
    so far readable on ``o_stream``; ``rollback`` forgets them. No byte may be written in the
    cycle of either. The storage is one block-RAM memory read one cycle ahead. ``empty``:
    nothing committed is left to read, nor waits on ``o_stream``.

    Members
    -------
    write : ``In(stream.Signature(8))``
    commit, rollback : ``In(1)``
    overflow : ``Out(1)``
    o_stream : ``Out(stream.Signature(8))``
    empty : ``Out(1)``
    """

    def __init__(self, capacity: int):
        if capacity < 2 or capacity & (capacity - 1):
            raise ValueError(f"the capacity must be a power of 2, not {capacity}")
        self._capacity = capacity
        super().__init__(
            {
                "write": In(stream.Signature(8)),
                "commit": In(1),
                "rollback": In(1),
                "overflow": Out(1),
                "o_stream": Out(stream.Signature(8)),
                "empty": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bits = self._capacity.bit_length()  # one more than the address: full or empty
        # (no_rw_check: a byte is read only once committed, and written only where nothing
        # committed is, so no read meets a write of its address; Yosys then adds no bypass)
        m.submodules.memory = memory = Memory(
            shape=8,
            depth=self._capacity,
            init=[],
            attrs={"ram_style": "block", "no_rw_check": True},
        )
        wp = memory.write_port()
        rp = memory.read_port(transparent_for=())
        wptr, cptr, rptr = Signal(bits), Signal(bits), Signal(bits)
        full = Signal()
        load = Signal()
        m.d.comb += [
            self.write.ready.eq(1),
            full.eq((wptr[:-1] == rptr[:-1]) & (wptr[-1] != rptr[-1])),
            wp.addr.eq(wptr[:-1]),
            wp.data.eq(self.write.payload),
            wp.en.eq(self.write.valid & ~full),
            load.eq((rptr != cptr) & (~self.o_stream.valid | self.o_stream.ready)),
            rp.addr.eq(rptr[:-1]),
            rp.en.eq(load),
            self.o_stream.payload.eq(rp.data),
            self.empty.eq((rptr == cptr) & ~self.o_stream.valid),
        ]
        with m.If(wp.en):
            m.d.sync += wptr.eq(wptr + 1)
        with m.If(self.write.valid & full):
            m.d.sync += self.overflow.eq(1)
        with m.If(self.commit):
            m.d.sync += [cptr.eq(wptr), self.overflow.eq(0)]
        with m.If(self.rollback):
            m.d.sync += [wptr.eq(cptr), self.overflow.eq(0)]
        with m.If(load):
            m.d.sync += [rptr.eq(rptr + 1), self.o_stream.valid.eq(1)]
        with m.Elif(self.o_stream.ready):
            m.d.sync += self.o_stream.valid.eq(0)
        return m


class TupleGatherer(wiring.Component):
    """Gathers ``tuple_bytes`` bytes, little-endian, into a tuple of ``width`` bits (the padding
    above it dropped), taking a byte every cycle while the tuple before waits to be taken.

    Members
    -------
    i_stream : ``In(stream.Signature(8))``
    o_stream : ``Out(stream.Signature(width))``
    """

    def __init__(self, width: int):
        self._width = width
        self._bytes = (width + 7) // 8
        super().__init__(
            {"i_stream": In(stream.Signature(8)), "o_stream": Out(stream.Signature(width))}
        )

    def elaborate(self, platform):
        m = Module()
        n = self._bytes
        shreg = Signal(8 * n, reset_less=True)
        count = Signal(range(n))
        last = count == n - 1
        taken = self.i_stream.valid & self.i_stream.ready
        gathered = Cat(shreg[8:], self.i_stream.payload) if n > 1 else self.i_stream.payload
        m.d.comb += self.i_stream.ready.eq(~last | ~self.o_stream.valid | self.o_stream.ready)
        with m.If(self.o_stream.ready):
            m.d.sync += self.o_stream.valid.eq(0)
        with m.If(taken):
            m.d.sync += shreg.eq(gathered)
            with m.If(last):
                m.d.sync += [
                    count.eq(0),
                    self.o_stream.valid.eq(1),
                    self.o_stream.payload.eq(gathered[: self._width]),
                ]
            with m.Else():
                m.d.sync += count.eq(count + 1)
        return m


class EthRx(wiring.Component):
    """``MacRx ▸ RxParser ▸ CommitBuffer ▸ TupleGatherer``, in one clock domain (the receive
    clock's, renamed by the user): GMII in, tuples (raw bits) and one event per frame out.

    Members
    -------
    rxd, rx_dv, rx_er : ``In``
    o_stream : ``Out(stream.Signature(tuple_width))``
    event : ``Out(stream.Signature(event_layout()))``
    empty : ``Out(1)``
        Nothing committed waits in the buffer or the gatherer.
    """

    def __init__(
        self,
        *,
        tuple_width: int,
        capacity: int,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        params_bytes: int = 0,
    ):
        self._tuple_width = tuple_width
        self._capacity = capacity
        self._addresses = {
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": engine_id,
            "params_bytes": params_bytes,
        }
        super().__init__(
            {
                "rxd": In(8),
                "rx_dv": In(1),
                "rx_er": In(1),
                "o_stream": Out(stream.Signature(tuple_width)),
                "event": Out(stream.Signature(event_layout(params_bytes))),
                "empty": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = MacRx()
        m.submodules.parser = parser = RxParser(
            tuple_bytes=(self._tuple_width + 7) // 8, **self._addresses
        )
        m.submodules.buffer = buffer = CommitBuffer(self._capacity)
        m.submodules.gatherer = gatherer = TupleGatherer(self._tuple_width)
        m.d.comb += [mac.rxd.eq(self.rxd), mac.rx_dv.eq(self.rx_dv), mac.rx_er.eq(self.rx_er)]
        for name in ("valid", "byte", "index", "end", "fcs_ok", "size_ok", "length"):
            m.d.comb += getattr(parser, name).eq(getattr(mac, name))
        wiring.connect(m, parser.write, buffer.write)
        m.d.comb += [
            buffer.commit.eq(parser.commit),
            buffer.rollback.eq(parser.rollback),
            parser.overflow.eq(buffer.overflow),
        ]
        wiring.connect(m, buffer.o_stream, gatherer.i_stream)
        wiring.connect(m, gatherer.o_stream, wiring.flipped(self.o_stream))
        wiring.connect(m, parser.event, wiring.flipped(self.event))
        m.d.comb += self.empty.eq(buffer.empty & ~gatherer.o_stream.valid)
        return m
