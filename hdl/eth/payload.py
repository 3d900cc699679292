"""The nfacep payload layer of the UDP link (the format is :mod:`nfacep.boards.link.eth.payload`):
:class:`RxParser` classifies each received frame and hands on the tuple bytes of TUPLES packets;
:class:`UdpTx` sends RECORDS, STATUS and ARP replies.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.boards.link.eth.payload import (
    FRAME_CLASSES,
    HEADER_BYTES,
    STATUS_FIELDS,
    VERSION,
    PacketType,
)
from nfacep.boards.link.protocol import SWITCH_BYTES

from .headers import INDEX_BITS, MAX_PAYLOAD
from .mac import frame_byte

__all__ = ["EventKind", "FrameClass", "RxParser", "UdpTx", "event_layout"]

#: The byte offsets of a frame (from the destination MAC address, no VLAN tag).
ETH_TYPE, ARP_AT, IP_AT, UDP_AT = 12, 14, 14, 34
PAYLOAD_AT = UDP_AT + 8
DATA_AT = PAYLOAD_AT + HEADER_BYTES
_ETH_IP_UDP = 14 + 20 + 8


class FrameClass(enum.IntEnum, shape=4):
    """A received frame's class (``FRAME_CLASSES`` of :mod:`nfacep.boards.link.eth.payload`, in
    order)."""

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


def _octets(value: int, n: int) -> list[int]:
    return list(value.to_bytes(n, "big"))


class RxParser(wiring.Component):
    """Classifies the frames from a :class:`MacRx` and writes the tuple bytes of TUPLES
    packets to a :class:`~nfacep.hdl.stream.PacketQueue`.

    Byte by byte it checks the fixed-offset headers (Ethernet II; ARP, or IPv4 without options
    with UDP; the payload header) against the board's addresses and accumulates the IPv4 header
    sum. The bytes of the payload after its header go to ``write`` (no backpressure: the buffer
    raises ``overflow`` when one does not fit) when the packet is a TUPLES one; at ``end`` the
    frame's class (:data:`~nfacep.boards.link.eth.payload.FRAME_CLASSES`) is decided from
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
        match(port_ok, UDP_AT + 2, _octets(self._port, 2))
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


def _be(value: Value, n: int) -> list[Value]:
    """The ``n`` bytes of ``value``, most significant first (network order)."""
    value = Value.cast(value)
    return [value.word_select(n - 1 - k, 8) for k in range(n)]


def _le(value: Value, n: int) -> list[Value]:
    value = Value.cast(value)
    return [value.word_select(k, 8) for k in range(n)]


def _const(value: int, n: int) -> Const:
    return Const(value, 8 * n)


class UdpTx(wiring.Component):
    """Frames to send: ARP replies, STATUS, and the engine's records in RECORDS packets.

    Between frames, in this order: an ARP reply when ``arp_request`` pulsed (to ``arp_peer``),
    STATUS when ``status_request`` did (to ``peer``), RECORDS (to ``peer``) when the record
    FIFO holds a packet's worth (``max_records``) or its oldest record has waited ``flush``
    cycles. Requests that come while a frame is built wait for the next. STATUS reports
    ``counters`` as they are when its frame starts (every record sent before is counted), and
    ``idle`` and ``next_seq``.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    o_stream : ``Out(stream.Signature(frame_byte))``
    arp_request, status_request, clear : ``In(1)``
        ``clear`` (RESET) empties the record FIFO and restarts the packet ``seq``.
    peer, arp_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    counters : ``In(...)``
        The STATUS counters (32 bits each).
    next_seq : ``In(32)``
    idle : ``In(1)``
    count : ``Out(...)``
        ``matched``, ``drops``, ``records``, ``packets`` pulses.
    params : ``In(params_bits)``
        With ``params_bits``: the engine's runtime parameters' values in force, sent after
        STATUS's fields (padded to bytes, little-endian), as they are when its frame starts.
    """

    def __init__(
        self,
        record_layout: data.StructLayout,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        tuple_bytes: int,
        capacity: int,
        counters,
        fifo_depth: int = 512,
        flush: int = 1024,
        params_bits: int = 0,
    ):
        self._record_layout = record_layout
        self._record_bytes = (record_layout.size + 7) // 8
        if fifo_depth < 4:
            raise ValueError(f"the record FIFO needs at least 4 entries, not {fifo_depth}")
        self._max_records = min(
            (MAX_PAYLOAD - HEADER_BYTES) // self._record_bytes, fifo_depth - 2
        )  # (the FIFO takes records up to depth - 2)
        self._mac, self._ip, self._port = mac, ip, port
        self._engine_id = engine_id & 0xFFFFFFFF
        self._constants = {
            "tuple_bytes": tuple_bytes,
            "record_bytes": self._record_bytes,
            "capacity": capacity,
        }
        self._counter_names = tuple(counters)
        self._fifo_depth = fifo_depth
        self._flush = flush
        self._params_bits = int(params_bits)
        self._values_bytes = (self._params_bits + 7) // 8
        endpoint = data.StructLayout({"mac": 48, "ip": 32, "port": 16})
        members = {
            "i_stream": In(stream.Signature(record_layout)),
            "o_stream": Out(stream.Signature(frame_byte)),
            "arp_request": In(1),
            "status_request": In(1),
            "clear": In(1),
            "peer": In(endpoint),
            "arp_peer": In(endpoint),
            "counters": In(wiring.Signature({n: Out(32) for n in self._counter_names})),
            "next_seq": In(32),
            "idle": In(1),
            "count": Out(
                wiring.Signature({n: Out(1) for n in ("matched", "drops", "records", "packets")})
            ),
        }
        if self._params_bits:
            members["params"] = In(self._params_bits)
        super().__init__(members)

    @property
    def max_records(self) -> int:
        return self._max_records

    def _status_body(self, flags) -> list[Value]:
        values = {**self._constants, "flags": flags, "next_seq": self.next_seq}
        out = []
        for name, n in STATUS_FIELDS:
            if name in values:
                out += _le(
                    Value.cast(values[name])
                    if not isinstance(values[name], int)
                    else _const(values[name], n),
                    n,
                )
            else:
                out += _le(getattr(self.counters, name), n)
        if self._params_bits:
            out += _le(self.params, self._values_bytes)  # (word_select pads with zeros)
        return out

    def elaborate(self, platform):
        m = Module()
        rb = self._record_bytes
        fifo, head = self._record_fifo(m)

        want_arp, want_status = Signal(), Signal()
        with m.If(self.arp_request):
            m.d.sync += want_arp.eq(1)
        with m.If(self.status_request):
            m.d.sync += want_status.eq(1)
        waited = Signal(range(self._flush + 1))
        with m.If(fifo.level == 0):
            m.d.sync += waited.eq(0)
        with m.Elif(waited != self._flush):
            m.d.sync += waited.eq(waited + 1)
        # whether to send records and how many, registered (timing); between packets the
        # level only grows, so a cycle-old count is there; RESET (clear) forgets it
        batch = Signal(range(self._max_records + 1))
        go_records = Signal()
        m.d.sync += [
            batch.eq(Mux(fifo.level >= self._max_records, self._max_records, fifo.level)),
            go_records.eq(
                (fifo.level >= self._max_records) | ((fifo.level != 0) & (waited == self._flush))
            ),
        ]
        with m.If(self.clear):
            m.d.sync += [batch.eq(0), go_records.eq(0)]

        seq = Signal(32)  # the board's UDP packets
        with m.If(self.clear):
            m.d.sync += seq.eq(0)
        kind = Signal(8)  # the payload type, or 0 for ARP
        n_records = Signal(range(self._max_records + 1))
        body_len = Signal(11)
        body_last = Signal(11)  # body_len - 1, registered (timing)
        remaining = Signal(11)  # RECORDS: body bytes after the one offered
        last_byte = Signal()  # RECORDS: the byte offered is the body's last (remaining == 0)
        ip_len = Signal(16)
        checksum = Signal(16)
        dst = Signal.like(self.peer)
        header_bytes = _ETH_IP_UDP + HEADER_BYTES
        header = Signal(8 * header_bytes)
        status_bytes = sum(n for _, n in STATUS_FIELDS) + self._values_bytes
        status = Signal(8 * status_bytes)
        record = Signal(8 * rb)
        index = Signal(11)  # the byte of the header or the body being offered
        in_record = Signal(range(rb))
        status_flags = Signal(32)

        out = self.o_stream
        taken = out.valid & out.ready
        m.d.comb += status_flags.eq(self.idle & (fifo.level == 0))

        src_ip = int.from_bytes(self._ip, "big")
        constant = 0x4500 + 0x4000 + 0x4011 + (src_ip >> 16) + (src_ip & 0xFFFF)
        # the checksum in three registered steps (timing)
        part1, part2 = Signal(17), Signal(17)
        total = Signal(20)
        fold = Signal(17)

        cleared = Signal()
        with m.FSM(name="udp_tx"):
            with m.State("IDLE"):
                m.d.sync += [index.eq(0), cleared.eq(0)]
                with m.If(want_arp):
                    m.d.sync += [want_arp.eq(0), kind.eq(0), body_len.eq(0), dst.eq(self.arp_peer)]
                    m.next = "LOAD"
                with m.Elif(want_status):
                    m.d.sync += [
                        want_status.eq(0),
                        kind.eq(PacketType.STATUS),
                        body_len.eq(status_bytes),
                        dst.eq(self.peer),
                        ip_len.eq(20 + 8 + HEADER_BYTES + status_bytes),
                    ]
                    m.next = "SUM"
                with m.Elif(go_records & ~self.clear):
                    m.d.sync += [
                        kind.eq(PacketType.RECORDS),
                        n_records.eq(batch),
                        dst.eq(self.peer),
                    ]
                    m.next = "LENGTH"
            with m.State("LENGTH"):
                # (shifts and adds, not a multiplier block: timing)
                m.d.sync += body_len.eq(
                    sum(n_records << k for k in range(rb.bit_length()) if rb >> k & 1)
                )
                m.next = "LENGTH2"
            with m.State("LENGTH2"):
                m.d.sync += ip_len.eq(body_len + 20 + 8 + HEADER_BYTES)
                m.next = "SUM"
            with m.State("SUM"):
                m.d.sync += [
                    part1.eq(ip_len + seq[:16]),
                    part2.eq(dst.ip[16:] + dst.ip[:16]),
                    body_last.eq(body_len - 1),
                ]
                m.next = "SUM2"
            with m.State("SUM2"):
                m.d.sync += total.eq(part1 + part2 + constant)
                m.next = "SUM3"
            with m.State("SUM3"):
                m.d.sync += fold.eq(total[:16] + total[16:])
                m.next = "SUM4"
            with m.State("SUM4"):
                m.d.sync += checksum.eq(~(fold[:16] + fold[16])[:16])
                m.next = "LOAD"
            with m.State("LOAD"):
                self._load(m, header, status, kind, dst, ip_len, checksum, seq, status_flags)
                m.next = "HEADER"
                with m.If((self.clear | cleared) & (kind == PacketType.RECORDS)):
                    m.next = "IDLE"  # RESET since the packet was decided: its records are gone
            with m.State("HEADER"):
                arp = kind == 0
                last_header = Mux(arp, 42 - 1, header_bytes - 1)
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(header[:8]),
                    out.payload.last.eq(arp & (index == last_header)),
                ]
                with m.If(taken):
                    m.d.sync += [header.eq(header >> 8), index.eq(index + 1)]
                    with m.If(index == last_header):
                        m.d.sync += index.eq(0)
                        with m.If(arp):
                            m.next = "IDLE"
                        with m.Elif(kind == PacketType.STATUS):
                            m.d.sync += seq.eq(seq + 1)
                            m.next = "STATUS"
                        with m.Else():
                            m.d.sync += [
                                seq.eq(seq + 1),
                                in_record.eq(0),
                                record.eq(head),
                                remaining.eq(body_last),
                                last_byte.eq(0),
                            ]
                            m.d.comb += fifo.r_en.eq(1)
                            self._count(m, head)
                            m.next = "RECORDS"
            with m.State("STATUS"):
                last = index == status_bytes - 1
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(status[:8]),
                    out.payload.last.eq(last),
                ]
                with m.If(taken):
                    m.d.sync += [status.eq(status >> 8), index.eq(index + 1)]
                    with m.If(last):
                        m.next = "IDLE"
            with m.State("RECORDS"):
                last = last_byte
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(record[:8]),
                    out.payload.last.eq(last),
                ]
                with m.If(taken):
                    m.d.sync += [
                        record.eq(record >> 8),
                        index.eq(index + 1),
                        in_record.eq(in_record + 1),
                        remaining.eq(remaining - 1),
                        last_byte.eq(remaining == 1),
                    ]
                    with m.If(in_record == rb - 1):
                        m.d.sync += in_record.eq(0)
                        with m.If(~last):
                            m.d.sync += record.eq(head)
                            m.d.comb += fifo.r_en.eq(1)
                            self._count(m, head)
                    with m.If(last):
                        m.d.comb += self.count.packets.eq(1)
                        m.next = "IDLE"
        with m.If(self.clear):
            m.d.sync += cleared.eq(1)
        return m

    def _record_fifo(self, m):
        """The records waiting: a block-RAM ring of ``fifo_depth`` entries. Returns the FIFO
        (``level``, ``r_en`` to pop the head) and ``head``, the oldest record.

        ``i_stream.ready`` comes from a register (the engine's stall logic behind it is deep:
        timing): the level a cycle ago left room for this cycle's write and the last one's,
        so the ring holds at most ``depth - 2`` records. The block RAM's read data goes
        into a register and then into ``head`` (the block RAM's clock-to-output is slow);
        ``head`` shows the entry at the read pointer two cycles after the pointer moves or the
        entry is written,
        and records are popped at least ``record_bytes`` >= 7 cycles apart. ``clear`` empties
        the ring."""
        depth = self._fifo_depth
        width = self._record_layout.size
        m.submodules.records = memory = Memory(
            shape=width, depth=depth, init=[], attrs={"ram_style": "block", "no_rw_check": True}
        )
        wp = memory.write_port()
        # an asynchronous read port registered outside, and no_rw_check: Yosys merges the
        # register into the block RAM without the bypass logic that would make a read of the
        # entry being written return the old one (framing._memory does the same); `head`
        # re-reads every cycle and a record is used two cycles after it is written
        rp = memory.read_port(domain="comb")
        read = Signal(width, reset_less=True)

        class Fifo:
            level = Signal(range(depth + 1))
            r_en = Signal()

        fifo = Fifo()
        wptr, rptr = Signal(range(depth)), Signal(range(depth))
        room = Signal()
        write = Signal()
        head = Signal(width, reset_less=True)
        m.d.comb += [
            write.eq(self.i_stream.valid & room),
            self.i_stream.ready.eq(room),
            wp.addr.eq(wptr),
            wp.data.eq(self.i_stream.payload),
            wp.en.eq(write),
            rp.addr.eq(rptr),
        ]
        m.d.sync += [
            room.eq(fifo.level < depth - 2),
            read.eq(rp.data),
            head.eq(read),
            fifo.level.eq(fifo.level + write - fifo.r_en),
        ]
        with m.If(write):
            m.d.sync += wptr.eq(Mux(wptr == depth - 1, 0, wptr + 1))
        with m.If(fifo.r_en):
            m.d.sync += rptr.eq(Mux(rptr == depth - 1, 0, rptr + 1))
        with m.If(self.clear):
            m.d.sync += [wptr.eq(0), rptr.eq(0), fifo.level.eq(0), room.eq(0)]
        return fifo, head

    def _count(self, m, raw):
        record = data.View(self._record_layout, raw)
        m.d.comb += [
            self.count.records.eq(1),
            self.count.matched.eq(record.matches.any()),
            self.count.drops.eq(record.dropped),
        ]

    def _load(self, m, header, status, kind, dst, ip_len, checksum, seq, flags):
        """The header (UDP: Ethernet, IPv4, UDP and payload header; ARP: the reply) and the
        STATUS body, whole."""
        mac = _const(int.from_bytes(self._mac, "big"), 6)
        ip = _const(int.from_bytes(self._ip, "big"), 4)
        with m.If(kind == 0):
            arp = [
                *_be(dst.mac, 6),
                *_be(mac, 6),
                *_be(_const(0x0806, 2), 2),
                *_be(_const(0x0001_0800_0604_0002, 8), 8),
                *_be(mac, 6),
                *_be(ip, 4),
                *_be(dst.mac, 6),
                *_be(dst.ip, 4),
            ]
            m.d.sync += header.eq(Cat(*arp))
        with m.Else():
            udp = [
                *_be(dst.mac, 6),
                *_be(mac, 6),
                *_be(_const(0x0800, 2), 2),
                *_be(_const(0x4500, 2), 2),
                *_be(ip_len, 2),
                *_be(seq[:16], 2),
                *_be(_const(0x4000, 2), 2),
                *_be(_const(0x4011, 2), 2),
                *_be(checksum, 2),
                *_be(ip, 4),
                *_be(dst.ip, 4),
                *_be(_const(self._port, 2), 2),
                *_be(dst.port, 2),
                *_be((ip_len - 20)[:16], 2),
                *_be(_const(0, 2), 2),
                _const(VERSION, 1),
                kind,
                *_le(_const(0, 2), 2),
                *_le(seq, 4),
                *_le(_const(self._engine_id, 4), 4),
            ]
            m.d.sync += [header.eq(Cat(*udp)), status.eq(Cat(*self._status_body(flags)))]
