"""The nfacep payload layer of the UDP link, on top of UDP (the format is
:mod:`nfacep.links.udp.protocol`): :class:`PayloadRx` classifies each received frame from
what the layers below found and hands on the tuple bytes of TUPLES packets; :class:`UdpTx`
sends RECORDS, STATUS and ARP replies, building the headers of the layers below.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import ENGINE_FIELDS, SWITCH_BYTES
from nfacep.links.udp.protocol import (
    FRAME_CLASSES,
    HEADER_BYTES,
    LOAD_HEADER_BYTES,
    LOAD_LAST,
    MAX_PAYLOAD,
    SESSION_IDLE_CYCLES,
    STATUS_FIELDS,
    VERSION,
    PacketType,
)

from . import arp, icmp, ipv4, udp
from .headers import (
    ARP,
    ETHERNET,
    ETHERTYPE_ARP,
    ETHERTYPE_IPV4,
    ICMP,
    INDEX_BITS,
    IPV4,
    PAYLOAD,
    PROTOCOL_ICMP,
    PROTOCOL_UDP,
    UDP,
    Header,
)
from .mac import frame_byte
from .packet import Depacketizer, Packetizer, frame_signature, on_bytes, pack

__all__ = ["ECHO_AT", "LOWER", "EventKind", "FrameClass", "PayloadRx", "UdpTx", "event_layout"]

#: Where the payload starts in a frame (no VLAN tag, no IPv4 options).
PAYLOAD_AT = ETHERNET.length + IPV4.length + UDP.length
assert PAYLOAD.length == HEADER_BYTES


class FrameClass(enum.IntEnum, shape=4):
    """A received frame's class (``FRAME_CLASSES`` of :mod:`nfacep.links.udp.protocol`, in
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
    FOREIGN = 9
    ENGINE_FULL = 10
    BAD_LOAD = 11


assert [c.name.lower() for c in FrameClass] == list(FRAME_CLASSES)


class EventKind(enum.IntEnum, shape=3):
    """What an accepted frame asks for."""

    TUPLES = 0
    STATUS_REQ = 1
    RESET = 2
    ARP = 3
    PARAMS = 4
    CLOSE = 5
    ECHO = 6  # an ICMP echo request
    LOAD = 7


def event_layout(params_bytes: int = 0, load: bool = False) -> data.StructLayout:
    """One received frame: its class and, when accepted, what it asks for, who sent it and
    its session id (an ICMP echo request: ``seq`` holds its IPv4 length in the low 16 bits and
    its ICMP checksum in the high ones); with ``params_bytes`` (bytes of the engine's runtime
    parameters), a PARAMS packet's body (``switch``: the tuple number in the low 48 bits, the
    values above); with ``load`` (a programmable engine), ``load_offset``: where the load being
    received stands after the frame (STATUS's)."""
    fields = {
        "cls": FrameClass,
        "kind": EventKind,
        "seq": 32,
        "mac": 48,
        "ip": 32,
        "port": 16,
        "session": 32,
    }
    if params_bytes:
        fields["switch"] = 8 * (SWITCH_BYTES + params_bytes)
    if load:
        fields["load_offset"] = 32
    return data.StructLayout(fields)


#: What the layers below say about a received frame (:class:`~.link.EthRx` wires them): the
#: Ethernet destination is ours or broadcast; an ARP packet, a request for our address; IPv4
#: for our address, version 4 without options, its checksum, a fragment, where the packet
#: ends; UDP, to our port, a length that fills the IPv4 packet, the length; the sender; ICMP,
#: an echo request, its checksum, and the IPv4 length.
LOWER = data.StructLayout(
    {
        "for_us": 1,
        "arp": 1,
        "arp_request": 1,
        "ip_for_us": 1,
        "ip_supported": 1,
        "ip_checksum_ok": 1,
        "ip_fragment": 1,
        "ip_end": 17,
        "udp": 1,
        "port_ok": 1,
        "udp_length_ok": 1,
        "udp_length": 16,
        "mac": 48,
        "ip": 32,
        "port": 16,
        "icmp": 1,
        "echo_request": 1,
        "icmp_checksum": 16,
        "ip_length": 16,
    }
)
#: Where an ICMP echo's identifier, sequence number and data start in a frame: what the
#: reply sends back, kept in the echo buffer from its address 0.
ECHO_AT = ETHERNET.length + IPV4.length + ICMP.length


class _Header:
    """:class:`PayloadRx`'s registers for the frame being received and the tests on them."""

    def __init__(self, tuple_bytes: int):
        self.ptype = Signal(8)  # (combinational) the payload header's fields
        self.seq = Signal(32)
        self.version_ok = Signal()
        self.engine_ok = Signal()
        # at the payload's start: its length fits the header, is a command's, a PARAMS'
        self.long_enough = Signal(reset_less=True)
        self.command_ok = Signal(reset_less=True)
        self.params_ok = Signal(reset_less=True)
        # a LOAD: its offset and flags are there, it has bytes of the load; and its next
        # offset (where the load stands after it), at the frame's end
        self.load_ok = Signal(reset_less=True)
        self.load_data = Signal(reset_less=True)
        self.load_next = Signal(32, reset_less=True)
        self.load_skip = Signal(range(LOAD_HEADER_BYTES + 1), reset_less=True)
        self.load_offset = Signal(32)  # (combinational) the LOAD's offset and flags
        self.load_flags = Signal(8)
        # the tuple data: at least one byte, the next byte's place in a tuple
        self.some = Signal(reset_less=True)
        self.phase = Signal(range(tuple_bytes), reset_less=True)
        # what the headers say, decided at the second byte after them (timing); `early`: before
        # the UDP length test, so that nothing overrides it
        self.cls = Signal(FrameClass, reset_less=True)
        self.kind = Signal(EventKind, reset_less=True)
        self.early = Signal(reset_less=True)
        # the session's tests, a byte at a time as the bytes pass (timing): the sender's IPv4
        # address and UDP port are the session's host's, the header carries its session id
        self.same_ip = Signal(reset_less=True)
        self.same_port = Signal(reset_less=True)
        self.same_session = Signal(reset_less=True)
        self.session = Signal(32)  # (combinational) the header's session id


class Session:
    """The session :class:`PayloadRx` is bound to (registers in its domain): whether one is
    open, its host's IPv4 address and UDP port, its id, and the cycles since its host's last
    accepted packet."""

    def __init__(self, idle_cycles: int):
        self.open = Signal()
        self.ip = Signal(32, reset_less=True)
        self.port = Signal(16, reset_less=True)
        self.id = Signal(32, reset_less=True)
        self.idle = Signal(range(idle_cycles + 1))


class PayloadRx(wiring.Component):
    """Classifies the frames from a :class:`~.mac.MacRx`, with what the layers below found
    (``lower``), and writes the tuple bytes of TUPLES packets to a
    :class:`~nfacep.hdl.stream.PacketQueue`.

    It reads the payload header (:data:`~.headers.PAYLOAD`) and counts the bytes after it; the
    bytes of the payload after its header go to ``write`` (no backpressure: the queue raises
    ``overflow`` when one does not fit) when the packet is a TUPLES one. At ``end`` the frame's
    class (``FRAME_CLASSES`` of :mod:`nfacep.links.udp.protocol`) is decided from what was
    gathered (a cycle after ``end``: every test reads registers); a cycle later ``commit`` or
    ``rollback`` pulses and ``event`` carries the class and, for an accepted frame, its kind
    (:class:`EventKind`), its ``seq`` and the sender's MAC, IP address and port.

    Members
    -------
    frame : ``In(frame_signature)``
    end, fcs_ok, size_ok, length : ``In``
        From :class:`~.mac.MacRx`.
    lower : ``In(LOWER)``
    write : ``Out(stream.Signature(8))``
        Always taken.
    commit, rollback : ``Out(1)``
    overflow : ``In(1)``
    event : ``Out(stream.Signature(event_layout(params_bytes)))``
        ``valid`` for one cycle per frame; ``ready`` is ignored (the events' FIFO is read
        every cycle and frames are at least 84 cycles apart).
    session_open : ``Out(1)``
        A session is open (:mod:`nfacep.links.udp.protocol`).

    Sessions: an accepted RESET opens one, bound to its sender's IPv4 address and UDP port
    and to the id it carries; it is accepted when no session is open or from the session's
    host with its id. Every other packet (TUPLES, STATUS_REQ, PARAMS, CLOSE) that passes the
    other tests is ``foreign`` unless from the session's host with its id. An accepted CLOSE,
    or ``idle_cycles`` cycles without an accepted packet of the session's, ends the session.

    With ``params_bytes`` (the engine's runtime parameters' bytes; 0: a PARAMS packet is a
    ``bad_header``), a PARAMS packet for this engine whose body is exactly the switch's tuple
    number and the values (else ``bad_udp``) is accepted, its body in the event's ``switch``;
    whether the engine takes it is decided after the crossing.

    With ``load`` (a programmable engine; else a LOAD is a ``bad_header``), a LOAD for this
    engine (no session of its own needed: while a session is alive from its host's IPv4
    address, any port, else ``foreign``; with none from any sender; one without bytes, which
    asks for STATUS only,
    whatever its ``engine_id``) is reassembled: its bytes after the offset and
    flags go to ``load_write`` (``data`` and ``last``: the flags' last bit on the chunk's final
    byte), committed with ``load_commit`` when it is accepted, when its offset is where the
    load stands (``bad_load`` else) and its bytes fit (``load_overflow``: ``engine_full``).
    """

    def __init__(
        self,
        *,
        engine_id: int,
        tuple_bytes: int,
        params_bytes: int = 0,
        offset: int = PAYLOAD_AT,
        idle_cycles: int = SESSION_IDLE_CYCLES,
        load: bool = False,
        icmp: bool = True,
    ):
        self._icmp = icmp
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        if idle_cycles < 1:
            raise ValueError("a session's idle time is at least one cycle")
        self._idle_cycles = int(idle_cycles)
        self._engine_id = engine_id & 0xFFFFFFFF
        self._tuple_bytes = tuple_bytes
        self._params_bytes = int(params_bytes)
        self._offset = offset
        self._load = bool(load)
        load_members = {
            "load_write": Out(stream.Signature(data.StructLayout({"data": 8, "last": 1}))),
            "load_commit": Out(1),
            "load_rollback": Out(1),
            "load_overflow": In(1),
        }
        super().__init__(
            {
                **(load_members if load else {}),
                "frame": In(frame_signature),
                "end": In(1),
                "fcs_ok": In(1),
                "size_ok": In(1),
                "length": In(INDEX_BITS),
                "lower": In(LOWER),
                "write": Out(stream.Signature(8)),
                "commit": Out(1),
                "rollback": Out(1),
                "overflow": In(1),
                "event": Out(stream.Signature(event_layout(self._params_bytes, self._load))),
                "session_open": Out(1),
                "echo_addr": Out(INDEX_BITS),
                "echo_data": Out(8),
                "echo_we": Out(1),
                "echo_done": In(1),
            }
        )

    def _echo(self, m) -> Signal:
        """The echo buffer's writes: each frame's bytes from :data:`ECHO_AT` on, unless an
        accepted echo request's reply still waits to be sent (``busy``, from its event until
        ``echo_done``). Returns ``blocked``: the frame began while busy (its bytes were not all
        kept: an echo request is then ``engine_full``)."""
        busy = Signal()
        blocked = Signal(reset_less=True)
        ev = self.event
        answered = (
            ev.valid & (ev.payload.cls == FrameClass.ACCEPTED) & (ev.payload.kind == EventKind.ECHO)
        )
        with m.If(answered):
            m.d.sync += busy.eq(1)
        with m.Elif(self.echo_done):
            m.d.sync += busy.eq(0)
        on_bytes(m, self.frame, {0: [blocked.eq(busy)]})
        m.d.comb += [
            self.echo_we.eq(self.frame.valid & ~busy & (self.frame.index >= ECHO_AT)),
            self.echo_addr.eq(self.frame.index - ECHO_AT),
            self.echo_data.eq(self.frame.byte),
        ]
        return blocked

    def elaborate(self, platform):
        m = Module()
        h = _Header(self._tuple_bytes)
        s = Session(self._idle_cycles)
        switch = self._header(m, h)
        self._data(m, h)
        cls, kind, early = self._header_class(m, h)
        data_at = self._offset + PAYLOAD.length
        on_bytes(m, self.frame, {data_at + 1: [h.cls.eq(cls), h.kind.eq(kind), h.early.eq(early)]})
        self._same(m, h, s)
        # the verdict, a cycle after the frame's end, from registers only
        verdict = Signal()
        fcs_ok, size_ok, truncated = (Signal(reset_less=True) for _ in range(3))
        m.d.sync += verdict.eq(self.end)
        with m.If(self.end):
            m.d.sync += [
                fcs_ok.eq(self.fcs_ok),
                size_ok.eq(self.size_ok),
                truncated.eq(self.lower.ip_end > self.length),
            ]
        self._expected_now = Signal(32, name="load_expected")
        blocked = self._echo(m) if self._icmp else None
        cls = self._verdict(m, h, s, fcs_ok, size_ok, truncated, blocked)
        ev, lower = self.event, self.lower
        if self._load:
            self._reassemble(m, h, verdict, cls)
        m.d.sync += ev.valid.eq(verdict)
        echo = Cat(lower.ip_length, lower.icmp_checksum)
        seq = Mux(h.kind == EventKind.ECHO, echo, h.seq) if self._icmp else h.seq
        with m.If(verdict):
            m.d.sync += [
                ev.payload.cls.eq(cls),
                ev.payload.kind.eq(h.kind),
                ev.payload.seq.eq(seq),
                ev.payload.mac.eq(lower.mac),
                ev.payload.ip.eq(lower.ip),
                ev.payload.port.eq(lower.port),
                ev.payload.session.eq(h.session),
            ]
            if self._params_bytes:
                m.d.sync += ev.payload.switch.eq(switch)
        self._session(m, s)
        # (from the event's registers: timing)
        accept_tuples = (ev.payload.cls == FrameClass.ACCEPTED) & (
            ev.payload.kind == EventKind.TUPLES
        )
        m.d.comb += [
            self.commit.eq(ev.valid & accept_tuples),
            self.rollback.eq(ev.valid & ~accept_tuples),
        ]
        if self._load:
            accept_load = (ev.payload.cls == FrameClass.ACCEPTED) & (
                ev.payload.kind == EventKind.LOAD
            )
            m.d.comb += [
                self.load_commit.eq(ev.valid & accept_load),
                self.load_rollback.eq(ev.valid & ~accept_load),
            ]
        return m

    def _reassemble(self, m, h, verdict, cls):
        """Where the load being received stands (``expected``): an accepted LOAD with bytes
        moves it past them, or to 0 (none) after the last chunk; the event carries it."""
        expected = self._expected_now
        header_end = UDP.length + PAYLOAD.length + LOAD_HEADER_BYTES
        with m.If(self.end):
            m.d.sync += h.load_next.eq(h.load_offset + self.lower.udp_length - header_end)
        moved = (cls == FrameClass.ACCEPTED) & (h.kind == EventKind.LOAD) & h.load_data
        after = Mux(moved, Mux(h.load_flags & LOAD_LAST, 0, h.load_next), expected)
        with m.If(verdict):
            m.d.sync += [expected.eq(after), self.event.payload.load_offset.eq(after)]

    def _same(self, m, h, s):
        """``h.same_ip``, ``same_port`` and ``same_session``: the frame's IPv4 source, UDP
        source port and session id are the session's, compared a byte at a time as their
        bytes pass (as :class:`~.packet.Depacketizer` compares with constants)."""
        udp_at = self._offset - UDP.length
        ip_at = udp_at - IPV4.length
        tests = (
            (h.same_ip, IPV4, ip_at, "src", s.ip),
            (h.same_port, UDP, udp_at, "src_port", s.port),
            (h.same_session, PAYLOAD, self._offset, "session", s.id),
        )
        cases: dict[int, list] = {}
        for flag, header, at, field, value in tests:
            first = header.offset(field)
            for k in range(first, first + header.layout[field].width // 8):
                _, j = header.wire_byte(k)
                hit = self.frame.byte == value.word_select(j, 8)
                cases.setdefault(at + k, []).append(flag.eq(hit if k == first else flag & hit))
        on_bytes(m, self.frame, cases)

    def _session(self, m, s):
        """Open, keep and end the session from the accepted events (their registers)."""
        ev = self.event.payload
        accepted = self.event.valid & (ev.cls == FrameClass.ACCEPTED)
        m.d.comb += self.session_open.eq(s.open)
        with m.If(s.idle == self._idle_cycles):
            m.d.sync += s.open.eq(0)
        with m.Elif(s.open):
            m.d.sync += s.idle.eq(s.idle + 1)
        keeps = (ev.kind != EventKind.ARP) & (ev.kind != EventKind.ECHO)
        with m.If(accepted & keeps & (ev.kind != EventKind.LOAD)):
            m.d.sync += s.idle.eq(0)
        with m.If(accepted & (ev.kind == EventKind.RESET)):
            m.d.sync += [s.open.eq(1), s.ip.eq(ev.ip), s.port.eq(ev.port), s.id.eq(ev.session)]
        with m.If(accepted & (ev.kind == EventKind.CLOSE)):
            m.d.sync += s.open.eq(0)

    def _header(self, m, h):
        """The payload header, its length tests (when the payload starts), and a PARAMS
        packet's body (the switch, returned; None without ``params_bytes``)."""
        compare = {"version": ("version", VERSION), "engine": ("engine_id", self._engine_id)}
        m.submodules.header = header = Depacketizer(PAYLOAD, self._offset, compare)
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        f = header.fields
        m.d.comb += [
            h.ptype.eq(f.type),
            h.seq.eq(f.seq),
            h.session.eq(f.session),
            h.version_ok.eq(header.equal.version),
            h.engine_ok.eq(header.equal.engine),
        ]
        udp_length, header_end = self.lower.udp_length, UDP.length + PAYLOAD.length
        pb = self._params_bytes
        tests = [
            h.long_enough.eq(udp_length >= header_end),
            h.command_ok.eq(udp_length == header_end),
            h.params_ok.eq(udp_length == header_end + SWITCH_BYTES + pb),
            h.load_ok.eq(udp_length >= header_end + LOAD_HEADER_BYTES),
            h.load_data.eq(udp_length > header_end + LOAD_HEADER_BYTES),
        ]
        on_bytes(m, self.frame, {self._offset: tests})
        if self._load:
            body = Header("load", {"offset": 4, "flags": 1}, byteorder="little")
            m.submodules.load = load = Depacketizer(body, self._offset + PAYLOAD.length)
            wiring.connect(m, wiring.flipped(self.frame), load.frame)
            m.d.comb += [h.load_offset.eq(load.fields.offset), h.load_flags.eq(load.fields.flags)]
        if not pb:
            return None
        body = Header("switch", {"switch": SWITCH_BYTES + pb}, byteorder="little")
        m.submodules.switch = switch = Depacketizer(body, self._offset + PAYLOAD.length)
        wiring.connect(m, wiring.flipped(self.frame), switch.frame)
        return switch.fields.switch

    def _data(self, m, h):
        """The bytes after the payload header to the UDP payload's end (counted down: timing):
        to ``write`` for a TUPLES packet; whether there is one and whether whole tuples."""
        data_at = self._offset + PAYLOAD.length
        data_phase = Signal(reset_less=True)
        data_left = Signal(16, reset_less=True)
        header_end = UDP.length + PAYLOAD.length
        udp_length = self.lower.udp_length
        left = Mux(udp_length >= header_end, udp_length - header_end, 0)
        on_bytes(
            m,
            self.frame,
            {
                0: [h.some.eq(0), h.phase.eq(0)],
                self._offset: [data_left.eq(left), h.load_skip.eq(0)],
                data_at - 1: [data_phase.eq(1)],
            },
        )
        tb = self._tuple_bytes
        in_data = Signal()
        m.d.comb += [
            in_data.eq(self.frame.valid & data_phase & (data_left != 0)),
            self.write.valid.eq(in_data & (h.ptype == PacketType.TUPLES)),
            self.write.payload.eq(self.frame.byte),
        ]
        if self._load:
            is_load = h.ptype == PacketType.LOAD
            body = in_data & is_load & (h.load_skip == LOAD_HEADER_BYTES)
            m.d.comb += [
                self.load_write.valid.eq(body),
                self.load_write.payload.data.eq(self.frame.byte),
                self.load_write.payload.last.eq(
                    (h.load_flags & LOAD_LAST).any() & (data_left == 1)
                ),
            ]
            with m.If(in_data & (h.load_skip != LOAD_HEADER_BYTES)):
                m.d.sync += h.load_skip.eq(h.load_skip + 1)
        with m.If(in_data):
            m.d.sync += [
                h.some.eq(1),
                h.phase.eq(Mux(h.phase == tb - 1, 0, h.phase + 1)),
                data_left.eq(data_left - 1),
            ]
        with m.If(self.end):  # (a frame shorter than its UDP length ends its data here)
            m.d.sync += data_phase.eq(0)

    def _header_class(self, m, h):
        """The class the headers give, what the frame asks for, and whether the class is
        decided before the UDP length test."""
        lower, ptype = self.lower, h.ptype
        is_tuples = ptype == PacketType.TUPLES
        is_params = (ptype == PacketType.PARAMS) if self._params_bytes else Const(0)
        is_load = (ptype == PacketType.LOAD) if self._load else Const(0)
        command = (
            (ptype == PacketType.STATUS_REQ)
            | (ptype == PacketType.RESET)
            | (ptype == PacketType.CLOSE)
        )
        cls = Signal(FrameClass)
        kind = Signal(EventKind)
        early = Signal()
        C = FrameClass
        with m.If(ptype == PacketType.STATUS_REQ):
            m.d.comb += kind.eq(EventKind.STATUS_REQ)
        with m.Elif(ptype == PacketType.RESET):
            m.d.comb += kind.eq(EventKind.RESET)
        with m.Elif(ptype == PacketType.CLOSE):
            m.d.comb += kind.eq(EventKind.CLOSE)
        with m.Elif(is_params):
            m.d.comb += kind.eq(EventKind.PARAMS)
        with m.Elif(is_load):
            m.d.comb += kind.eq(EventKind.LOAD)
        m.d.comb += early.eq(1)
        with m.If(~lower.for_us):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(lower.arp):
            m.d.comb += [
                cls.eq(Mux(lower.arp_request, C.ACCEPTED, C.NOT_FOR_US)),
                kind.eq(EventKind.ARP),
            ]
        icmp = lower.icmp if self._icmp else Const(0)
        with m.Elif(~lower.ip_for_us | ~(lower.udp | icmp)):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(~lower.ip_supported):
            m.d.comb += cls.eq(C.IP_UNSUPPORTED)
        with m.Elif(~lower.ip_checksum_ok):
            m.d.comb += cls.eq(C.BAD_IP_CHECKSUM)
        with m.Elif(lower.ip_fragment):
            m.d.comb += cls.eq(C.IP_FRAGMENT)
        if self._icmp:
            with m.Elif(lower.icmp):  # an echo request: its lengths and room at the verdict
                m.d.comb += [
                    cls.eq(Mux(lower.echo_request, C.ACCEPTED, C.NOT_FOR_US)),
                    kind.eq(EventKind.ECHO),
                    early.eq(~lower.echo_request),
                ]
        with m.Elif(~lower.port_ok):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Else():
            m.d.comb += early.eq(0)
            with m.If(~lower.udp_length_ok | ~h.long_enough):
                m.d.comb += cls.eq(C.BAD_UDP)
            with m.Elif(
                ~h.version_ok
                | ~(is_tuples | command | is_params | is_load)
                | ((is_tuples | is_params | (is_load & h.load_data)) & ~h.engine_ok)
            ):
                m.d.comb += cls.eq(C.BAD_HEADER)
            with m.Else():
                m.d.comb += cls.eq(C.ACCEPTED)
        return cls, kind, early

    def _verdict(self, m, h, s, fcs_ok, size_ok, truncated, blocked):
        """The frame's class at its end, from registers: the headers' class
        (:meth:`_header_class`), the MAC's verdict, the length, the tuple data and the
        session ``s``; for an echo request its length (at least the ICMP header, the
        identifier and the sequence number) and whether the echo buffer was free
        (``blocked``)."""
        C = FrameClass
        cls = Signal(FrameClass)
        reset = h.kind == EventKind.RESET
        command = (h.kind == EventKind.STATUS_REQ) | reset | (h.kind == EventKind.CLOSE)
        bound = s.open & h.same_ip & h.same_port & h.same_session
        params = h.kind == EventKind.PARAMS
        load = (h.kind == EventKind.LOAD) if self._load else Const(0)
        # (a LOAD's offset against where the load stands: registers, compared at the end)
        misplaced = Signal()
        load_full = Const(0)
        if self._load:
            m.d.comb += misplaced.eq(h.load_data & (h.load_offset != self._expected_now))
            load_full = self.load_overflow
        with m.If(~size_ok):
            m.d.comb += cls.eq(C.BAD_SIZE)
        with m.Elif(~fcs_ok):
            m.d.comb += cls.eq(C.BAD_FCS)
        with m.Elif(h.early):
            m.d.comb += cls.eq(h.cls)
        with m.Elif(truncated):
            m.d.comb += cls.eq(C.BAD_UDP)
        with m.Elif(h.cls != C.ACCEPTED):
            m.d.comb += cls.eq(h.cls)
        if self._icmp:
            with m.Elif(h.kind == EventKind.ECHO):
                short = self.lower.ip_end < ECHO_AT + 4
                full = Mux(blocked, C.ENGINE_FULL, C.ACCEPTED)
                m.d.comb += cls.eq(Mux(short, C.BAD_UDP, full))
        with m.Elif(
            Mux(
                command,
                ~h.command_ok,
                Mux(params, ~h.params_ok, Mux(load, ~h.load_ok, ~h.some | (h.phase != 0))),
            )
        ):
            m.d.comb += cls.eq(C.BAD_UDP)
        # (a LOAD: while a session is alive, only from its host's IPv4 address, any port)
        with m.Elif(Mux(load, s.open & ~h.same_ip, ~bound & ~(reset & ~s.open))):
            m.d.comb += cls.eq(C.FOREIGN)
        with m.Elif(load & misplaced):
            m.d.comb += cls.eq(C.BAD_LOAD)
        with m.Elif(Mux(load, load_full, ~command & ~params & self.overflow)):
            m.d.comb += cls.eq(C.ENGINE_FULL)
        with m.Else():
            m.d.comb += cls.eq(C.ACCEPTED)
        return cls


#: STATUS's fields that say which engine the board has (constants, :class:`UdpTx`'s
#: ``engine_fields``).
_ENGINE_KIND_FIELDS = ("engine", "states", "atoms", "queries")
#: Header bytes: an ARP reply's (Ethernet, ARP); an echo reply's (Ethernet, IPv4, ICMP); a UDP
#: packet's (Ethernet, IPv4, UDP, payload).
_ARP_HEADERS = ETHERNET.length + ARP.length
_ECHO_HEADERS = ETHERNET.length + IPV4.length + ICMP.length
_UDP_HEADERS = ETHERNET.length + IPV4.length + UDP.length + PAYLOAD.length
#: The IPv4 length of a packet with an empty body.
_IP_UDP_PAYLOAD = IPV4.length + UDP.length + PAYLOAD.length


#: :class:`UdpTx`'s frame kind for an echo reply (0 is an ARP reply's, else a payload type).
_KIND_ECHO = 0x08


class _TxFrame:
    """:class:`UdpTx`'s registers for the frame being built and sent."""

    def __init__(self, max_records: int, record_bytes: int):
        self.kind = Signal(8)  # the payload type, 0 for ARP, _KIND_ECHO for an echo reply
        self.icmp_checksum = Signal(16)  # an echo reply's
        # its first half, from the request's checksum each cycle (folded into icmp_checksum
        # in SUM: one add a cycle, for timing)
        self.echo_sum = Signal(17)
        self.seq = Signal(32)  # the board's UDP packets
        self.n_records = Signal(range(max_records + 1))
        self.body_len = Signal(11)
        self.body_last = Signal(11)  # body_len - 1, registered (timing)
        self.remaining = Signal(11)  # RECORDS: body bytes after the one offered
        self.last_byte = Signal()  # RECORDS: the byte offered is the body's last
        self.ip_len = Signal(16)
        self.dst = Signal(data.StructLayout({"mac": 48, "ip": 32, "port": 16}))
        self.session = Signal(32)  # the payload header's session id
        self.numbered = Signal()  # a STATUS that takes a number of the session's (seq)
        self.record = Signal(8 * record_bytes)
        self.index = Signal(11)  # the byte of the header or the body being offered
        self.in_record = Signal(range(record_bytes))
        self.flags = Signal(32)  # STATUS's (combinational)
        self.cleared = Signal()  # RESET came since the frame was decided
        self.reading = Signal()  # (combinational) an echo reply's headers or body are sent
        self.prefetch = None  # the echo reply's bytes read ahead (UdpTx._echo_reads)


class UdpTx(wiring.Component):
    """Frames to send: ARP replies, ICMP echo replies, STATUS, and the engine's records in
    RECORDS packets.

    Between frames, in this order: an ARP reply when ``arp_request`` pulsed (to ``arp_peer``),
    an echo reply when ``echo_request`` did (to ``echo_peer``: ``echo_length`` is the request's
    IPv4 length, ``echo_checksum`` its ICMP checksum; the rest of the message is read from the
    echo buffer, ``echo_addr`` to ``echo_data`` a cycle later; ``echo_done`` pulses when the
    reply is out), STATUS when ``status_request`` did (to ``peer``), RECORDS (to ``peer``) when
    the record FIFO holds a packet's worth (``max_records``) or its oldest record has waited
    ``flush`` cycles. Requests that come while a frame is built wait for the next. STATUS reports
    ``counters`` as they are when its frame starts (every record sent before is counted), and
    ``idle`` and ``next_seq``.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    o_stream : ``Out(stream.Signature(frame_byte))``
    arp_request, status_request, clear : ``In(1)``
        ``clear`` (RESET) empties the record FIFO and restarts the packet ``seq``.
    peer, arp_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    echo_request : ``In(1)``
    echo_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    echo_length, echo_checksum : ``In(16)``
    echo_addr : ``Out(11)``
    echo_data : ``In(8)``
    echo_done : ``Out(1)``
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
        engine_fields: dict[str, int] | None = None,
        echo: bool = True,
    ):
        self._record_layout = record_layout
        self._echo = echo
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
            # the engine parameters (ENGINE_FIELDS, and the programmable engine's kind and
            # capacities): zero unless given
            **{name: 0 for name, _ in ENGINE_FIELDS},
            **dict.fromkeys(_ENGINE_KIND_FIELDS, 0),
            **(engine_fields or {}),
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
            "status_peer": In(endpoint),
            "status_session": In(32),
            "status_numbered": In(1),
            "image": In(64),
            "refused": In(32),
            "load_offset": In(32),
            "session": In(32),
            "arp_peer": In(endpoint),
            "echo_request": In(1),
            "echo_peer": In(endpoint),
            "echo_length": In(16),
            "echo_checksum": In(16),
            "echo_addr": Out(INDEX_BITS),
            "echo_data": In(8),
            "echo_done": Out(1),
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

    def _status_body(self, flags) -> Value:
        """STATUS's fields (:data:`~nfacep.links.udp.protocol.STATUS_FIELDS`, then the
        values in force) as they are now: the bytes a :class:`~.packet.Packetizer` sends."""
        fields = dict(STATUS_FIELDS)
        if self._values_bytes:
            fields["params"] = self._values_bytes
        values = {
            **self._constants,
            "flags": flags,
            "next_seq": self.next_seq,
            "image": self.image,
            "refused": self.refused,
            "load_offset": self.load_offset,
        }
        for name in self._counter_names:
            values[name] = getattr(self.counters, name)
        if self._params_bits:
            values["params"] = self.params
        body = Header("status", fields, byteorder="little")
        return pack(body, {name: values[name] for name in fields})

    def elaborate(self, platform):
        m = Module()
        fifo, head = self._record_fifo(m)
        want_arp, want_status, go_records, batch = self._requests(m, fifo)
        want_echo = Signal()
        with m.If(self.echo_request):
            m.d.sync += want_echo.eq(1)
        f = _TxFrame(self._max_records, self._record_bytes)
        checksum, icmp_checksum = self._checksums(m, f)
        status_bytes = sum(n for _, n in STATUS_FIELDS) + self._values_bytes
        m.submodules.header = header = Packetizer(_UDP_HEADERS)
        m.submodules.status = status = Packetizer(status_bytes)
        m.d.comb += f.flags.eq(self.idle & (fifo.level == 0))
        if self._echo:
            self._echo_reads(m, f)
            m.d.sync += f.echo_sum.eq(icmp.reply_sum(self.echo_checksum))
        with m.If(self.clear):
            m.d.sync += f.seq.eq(0)
        with m.FSM(name="udp_tx"):
            with m.State("IDLE"):
                m.d.sync += [f.index.eq(0), f.cleared.eq(0)]
                with m.If(want_arp):
                    m.d.sync += [
                        want_arp.eq(0),
                        f.kind.eq(0),
                        f.body_len.eq(0),
                        f.dst.eq(self.arp_peer),
                    ]
                    m.next = "LOAD"
                with m.Elif(want_echo & self._echo):
                    m.d.sync += [
                        want_echo.eq(0),
                        f.kind.eq(_KIND_ECHO),
                        f.dst.mac.eq(self.echo_peer.mac),
                        f.dst.ip.eq(self.echo_peer.ip),
                        f.ip_len.eq(self.echo_length),
                        f.body_len.eq(self.echo_length - IPV4.length - ICMP.length),
                    ]
                    m.next = "SUM"
                with m.Elif(want_status):
                    m.d.sync += [
                        want_status.eq(0),
                        f.kind.eq(PacketType.STATUS),
                        f.body_len.eq(status_bytes),
                        f.dst.eq(self.status_peer),
                        f.session.eq(self.status_session),
                        f.numbered.eq(self.status_numbered),
                        f.ip_len.eq(_IP_UDP_PAYLOAD + status_bytes),
                    ]
                    m.next = "SUM"
                with m.Elif(go_records & ~self.clear):
                    m.d.sync += [
                        f.kind.eq(PacketType.RECORDS),
                        f.n_records.eq(batch),
                        f.dst.eq(self.peer),
                        f.session.eq(self.session),
                    ]
                    m.next = "LENGTH"
            self._lengths(m, f)
            with m.State("LOAD"):
                # (STATUS's body loaded for every frame, unused but by STATUS, so that its
                # shift register's enable, ~900 flip-flops, depends on the state and the
                # stream's ready, not on the payload type: timing)
                m.d.comb += [
                    header.load.eq(1),
                    header.i_data.eq(self._headers(f, checksum, icmp_checksum)),
                    status.load.eq(1),
                    status.i_data.eq(self._status_body(f.flags)),
                ]
                m.next = "HEADER"
                with m.If((self.clear | f.cleared) & (f.kind == PacketType.RECORDS)):
                    m.next = "IDLE"  # RESET since the packet was decided: its records are gone
            self._header_state(m, f, header, fifo, head)
            self._body_states(m, f, status, fifo, head)
        with m.If(self.clear):
            m.d.sync += f.cleared.eq(1)
        return m

    def _checksums(self, m, f):
        """The IPv4 header checksums of the packets sent: UDP's, and (with ``echo``) ICMP's,
        else None."""
        m.submodules.checksum = checksum = ipv4.Ipv4Checksum(self._ip, PROTOCOL_UDP)
        sums = [checksum]
        icmp_checksum = None
        if self._echo:
            m.submodules.icmp_checksum = icmp_checksum = ipv4.Ipv4Checksum(self._ip, PROTOCOL_ICMP)
            sums.append(icmp_checksum)
        for sum_ in sums:
            m.d.comb += [
                sum_.length.eq(f.ip_len),
                sum_.ident.eq(f.seq[:16]),
                sum_.dst.eq(f.dst.ip),
            ]
        return checksum, icmp_checksum

    def _echo_reads(self, m, f):
        """An echo reply's bytes, read from the echo buffer ahead of need into a small FIFO
        (``f.prefetch``) from the start of its headers: the block RAM's slow clock-to-output
        then only reaches the FIFO (timing), and the body still leaves a byte a cycle. A read
        is issued while the FIFO and the read in flight leave room, up to the body's last
        byte; the FIFO is empty again when the reply is out."""
        m.submodules.echo_prefetch = prefetch = SyncFIFOBuffered(width=8, depth=8)
        f.prefetch = prefetch
        next_byte = Signal(INDEX_BITS)
        # a read in flight: the block RAM's output, then a register beside it (timing)
        read, kept = Signal(), Signal()
        byte = Signal(8, reset_less=True)
        issue = Signal()
        room = prefetch.level + read + kept < 6
        m.d.comb += [
            issue.eq(f.reading & (next_byte <= f.body_last) & room),
            self.echo_addr.eq(next_byte),
            prefetch.w_en.eq(kept),
            prefetch.w_data.eq(byte),
        ]
        m.d.sync += [read.eq(issue), kept.eq(read), byte.eq(self.echo_data)]
        with m.If(issue):
            m.d.sync += next_byte.eq(next_byte + 1)
        with m.If(~f.reading):
            m.d.sync += next_byte.eq(0)

    def _requests(self, m, fifo):
        """What waits to be sent: the requests since the last frame, and whether to send
        records and how many (registered: timing; between packets the level only grows, so a
        cycle-old count is there; RESET, ``clear``, forgets it)."""
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
        return want_arp, want_status, go_records, batch

    def _lengths(self, m, f):
        """RECORDS' body length (LENGTH, LENGTH2), then four cycles for the IPv4 checksum
        (:class:`~.ipv4.Ipv4Checksum`, which reads ``ip_len``, ``seq`` and ``dst`` in SUM)."""
        rb = self._record_bytes
        with m.State("LENGTH"):
            # (shifts and adds, not a multiplier block: timing)
            m.d.sync += f.body_len.eq(
                sum(f.n_records << k for k in range(rb.bit_length()) if rb >> k & 1)
            )
            m.next = "LENGTH2"
        with m.State("LENGTH2"):
            m.d.sync += f.ip_len.eq(f.body_len + _IP_UDP_PAYLOAD)
            m.next = "SUM"
        with m.State("SUM"):
            m.d.sync += f.body_last.eq(f.body_len - 1)
            if self._echo:  # (echo_sum is from the request's checksum in IDLE)
                m.d.sync += f.icmp_checksum.eq(icmp.reply_fold(f.echo_sum))
            m.next = "SUM2"
        with m.State("SUM2"):
            m.next = "SUM3"
        with m.State("SUM3"):
            m.next = "SUM4"
        with m.State("SUM4"):
            m.next = "LOAD"

    def _header_state(self, m, f, header, fifo, head):
        """HEADER: the headers' bytes; then IDLE (ARP) or the body."""
        out = self.o_stream
        taken = out.valid & out.ready
        arp_reply = f.kind == 0
        echo = (f.kind == _KIND_ECHO) if self._echo else Const(0)
        last_header = Mux(
            arp_reply, _ARP_HEADERS - 1, Mux(echo, _ECHO_HEADERS - 1, _UDP_HEADERS - 1)
        )
        with m.State("HEADER"):
            m.d.comb += [
                f.reading.eq(echo),
                out.valid.eq(1),
                out.payload.data.eq(header.byte),
                out.payload.last.eq(arp_reply & (f.index == last_header)),
                header.shift.eq(taken),
            ]
            # a RECORDS packet's first record loaded in every cycle of its headers (the head
            # stays: nothing is popped until their last byte), so that the load's enable
            # depends on no byte count (timing: the record's 56 flip-flops)
            with m.If(~arp_reply & ~echo & (f.kind != PacketType.STATUS)):
                m.d.sync += f.record.eq(head)
            with m.If(taken):
                m.d.sync += f.index.eq(f.index + 1)
                with m.If(f.index == last_header):
                    m.d.sync += f.index.eq(0)
                    with m.If(arp_reply):
                        m.next = "IDLE"
                    if self._echo:
                        with m.Elif(echo):
                            m.next = "ECHO"
                    with m.Elif(f.kind == PacketType.STATUS):
                        with m.If(f.numbered):  # (a LOAD's answer: the next number, kept)
                            m.d.sync += f.seq.eq(f.seq + 1)
                        m.next = "STATUS"
                    with m.Else():
                        m.d.sync += [
                            f.seq.eq(f.seq + 1),
                            f.in_record.eq(0),
                            f.remaining.eq(f.body_last),
                            f.last_byte.eq(0),
                        ]
                        m.d.comb += fifo.r_en.eq(1)
                        self._count(m, head)
                        m.next = "RECORDS"

    def _body_states(self, m, f, status, fifo, head):
        """STATUS: its fields' bytes; RECORDS: the records', each popped from the FIFO when its
        first byte is offered; ECHO: the echo buffer's, from the prefetch FIFO
        (:meth:`_echo_reads`; only with ``echo``)."""
        if self._echo:
            self._echo_state(m, f)
        self._status_records_states(m, f, status, fifo, head)

    def _echo_state(self, m, f):
        """ECHO: an echo reply's body, from the prefetch FIFO (:meth:`_echo_reads`)."""
        out = self.o_stream
        taken = out.valid & out.ready
        with m.State("ECHO"):
            last = f.index == f.body_last
            prefetch = f.prefetch
            m.d.comb += [
                f.reading.eq(1),
                out.valid.eq(prefetch.r_rdy),
                out.payload.data.eq(prefetch.r_data),
                out.payload.last.eq(last),
                prefetch.r_en.eq(taken),
            ]
            with m.If(taken):
                m.d.sync += f.index.eq(f.index + 1)
                with m.If(last):
                    m.d.comb += self.echo_done.eq(1)
                    m.next = "IDLE"

    def _status_records_states(self, m, f, status, fifo, head):
        """STATUS and RECORDS (:meth:`_body_states`)."""
        out = self.o_stream
        taken = out.valid & out.ready
        rb = self._record_bytes
        with m.State("STATUS"):
            last = f.index == status.length - 1
            m.d.comb += [
                out.valid.eq(1),
                out.payload.data.eq(status.byte),
                out.payload.last.eq(last),
                status.shift.eq(taken),
            ]
            with m.If(taken):
                m.d.sync += f.index.eq(f.index + 1)
                with m.If(last):
                    m.next = "IDLE"
        with m.State("RECORDS"):
            last = f.last_byte
            m.d.comb += [
                out.valid.eq(1),
                out.payload.data.eq(f.record[:8]),
                out.payload.last.eq(last),
            ]
            with m.If(taken):
                m.d.sync += [
                    f.record.eq(f.record >> 8),
                    f.index.eq(f.index + 1),
                    f.in_record.eq(f.in_record + 1),
                    f.remaining.eq(f.remaining - 1),
                    f.last_byte.eq(f.remaining == 1),
                ]
                with m.If(f.in_record == rb - 1):
                    m.d.sync += f.in_record.eq(0)
                    with m.If(~last):
                        m.d.sync += f.record.eq(head)
                        m.d.comb += fifo.r_en.eq(1)
                        self._count(m, head)
                with m.If(last):
                    m.d.comb += self.count.packets.eq(1)
                    m.next = "IDLE"

    def _headers(self, f, checksum, icmp_checksum) -> Value:
        """The frame's headers, for the packetizer: an ARP reply's (Ethernet and ARP), an echo
        reply's (Ethernet, IPv4, ICMP) or a UDP packet's (Ethernet, IPv4, UDP and the payload
        header)."""
        mac = int.from_bytes(self._mac, "big")
        ip = int.from_bytes(self._ip, "big")
        dst = f.dst
        arp_reply = Cat(
            pack(ETHERNET, {"dst": dst.mac, "src": mac, "ethertype": ETHERTYPE_ARP}),
            pack(ARP, arp.reply(mac=mac, ip=ip, peer_mac=dst.mac, peer_ip=dst.ip)),
        )
        ip_header = ipv4.header(
            length=f.ip_len,
            ident=f.seq[:16],
            checksum=checksum.checksum,
            src=ip,
            dst=dst.ip,
            protocol=PROTOCOL_UDP,
        )
        udp_header = udp.header(
            src_port=self._port, dst_port=dst.port, length=(f.ip_len - IPV4.length)[:16]
        )
        payload_header = {
            "version": VERSION,
            "type": f.kind,
            "seq": f.seq,
            "engine_id": self._engine_id,
            "session": f.session,
        }
        udp_packet = Cat(
            pack(ETHERNET, {"dst": dst.mac, "src": mac, "ethertype": ETHERTYPE_IPV4}),
            pack(IPV4, ip_header),
            pack(UDP, udp_header),
            pack(PAYLOAD, payload_header),
        )
        if not self._echo:
            return Mux(f.kind == 0, arp_reply, udp_packet)
        echo_ip = ipv4.header(
            length=f.ip_len,
            ident=f.seq[:16],
            checksum=icmp_checksum.checksum,
            src=ip,
            dst=dst.ip,
            protocol=PROTOCOL_ICMP,
        )
        echo_reply = Cat(
            pack(ETHERNET, {"dst": dst.mac, "src": mac, "ethertype": ETHERTYPE_IPV4}),
            pack(IPV4, echo_ip),
            pack(ICMP, icmp.header(f.icmp_checksum)),
        )
        return Mux(f.kind == 0, arp_reply, Mux(f.kind == _KIND_ECHO, echo_reply, udp_packet))

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
        # entry being written return the old one (the UART framer's _memory does the same);
        # `head` re-reads every cycle and a record is used two cycles after it is written
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
