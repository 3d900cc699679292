"""The UDP link as one component in the engine's clock domain: the receive path
(:class:`EthRx`) in the receive clock's domain, crossed with :class:`amaranth.lib.fifo.AsyncFIFO`;
the counters, the packet sequence check and the requests in the engine's.
"""

from __future__ import annotations

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer, PulseSynchronizer, ResetSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES, params_bytes
from nfacep.links.udp.protocol import FRAME_CLASSES, LOAD_CHUNK, SESSION_IDLE_CYCLES

from ..stream import PacketQueue, StreamBuffer, StreamQueue, TupleGatherer
from .arp import ArpRx
from .headers import INDEX_BITS
from .icmp import IcmpRx
from .ipv4 import Ipv4Rx
from .mac import EthernetRx, MacRx, MacTx
from .payload import EventKind, PayloadRx, UdpTx, event_layout
from .udp import UdpRx

__all__ = ["CAPACITY", "COUNTERS", "EthRx", "UdpLink", "UdpTop"]

#: The counters the link keeps (STATUS reports them, :data:`.payload.STATUS_FIELDS`).
COUNTERS = (
    "tuples",
    "matched",
    "drops",
    "records",
    "packets",
    "lost",
    "late",
    "echoes",
    *FRAME_CLASSES,
)
#: Bytes of the receive buffer: two ECP5 block RAMs, room for two full frames of tuples.
CAPACITY = 4096
#: Tuples the clock-domain crossing holds.
#: The GMII pins, of the link and of the board top alike: the receive clock and side in, the
#: transmit side out (its clock is the link's own ``sync``).
GMII_MEMBERS = {
    "rx_clk": In(1),
    "rxd": In(8),
    "rx_dv": In(1),
    "rx_er": In(1),
    "txd": Out(8),
    "tx_en": Out(1),
    "tx_er": Out(1),
}

TUPLE_FIFO_DEPTH = 16
#: Bytes of the receive buffer of loads (a programmable engine's): two chunks.
LOAD_CAPACITY = 2 * LOAD_CHUNK
#: The load bytes the clock-domain crossing holds.
LOAD_FIFO_DEPTH = 16
#: A byte of a load, with ``last`` on a load's final byte (the engine's configuration port's).
LOAD_BYTE = data.StructLayout({"data": 8, "last": 1})


class EthRx(wiring.Component):
    """The receive path, in one clock domain (the receive clock's, renamed by the user): GMII
    in, tuples (raw bits) and one event per frame out::

        MacRx ▸ EthernetRx ▸ ArpRx, Ipv4Rx ▸ IcmpRx, UdpRx ▸ PayloadRx ▸ PacketQueue
        ▸ StreamBuffer ▸ TupleGatherer

    Every layer reads the bytes :class:`~.mac.MacRx` hands on at its header's offset and what
    the layer below found; :class:`~.payload.PayloadRx` classifies the frame from all of it.
    Nothing here can stall the line: a frame whose tuples do not fit the queue is dropped
    whole and counted (``engine_full``).

    Members
    -------
    rxd, rx_dv, rx_er : ``In``
    o_stream : ``Out(stream.Signature(tuple_width))``
    event : ``Out(stream.Signature(event_layout()))``
    empty : ``Out(1)``
        Nothing committed waits in the queue or the gatherer.
    o_load : ``Out(stream.Signature(LOAD_BYTE))``
        With ``load``: the bytes of accepted LOAD packets, in order (a second queue).
    echo_addr, echo_data, echo_we : ``Out``
        The echo buffer's write port; ``echo_done`` (``In(1)``) frees it
        (:class:`~.payload.PayloadRx`).
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
        idle_cycles: int = SESSION_IDLE_CYCLES,
        load: bool = False,
        icmp: bool = True,
    ):
        if len(mac) != 6 or len(ip) != 4 or not 0 < port < 65536:
            raise ValueError("a MAC address of 6 bytes, an IPv4 address of 4 and a port")
        self._tuple_width = tuple_width
        self._capacity = capacity
        self._icmp = icmp
        self._mac, self._ip, self._port = bytes(mac), bytes(ip), port
        self._payload_args = {
            "engine_id": engine_id,
            "tuple_bytes": (tuple_width + 7) // 8,
            "params_bytes": params_bytes,
            "idle_cycles": idle_cycles,
            "load": load,
            "icmp": icmp,
        }
        self._load = load
        super().__init__(
            {
                "rxd": In(8),
                "rx_dv": In(1),
                "rx_er": In(1),
                "o_stream": Out(stream.Signature(tuple_width)),
                "event": Out(stream.Signature(event_layout(params_bytes, load))),
                "empty": Out(1),
                **({"o_load": Out(stream.Signature(LOAD_BYTE))} if load else {}),
                "echo_addr": Out(INDEX_BITS),
                "echo_data": Out(8),
                "echo_we": Out(1),
                "echo_done": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = MacRx()
        m.d.comb += [mac.rxd.eq(self.rxd), mac.rx_dv.eq(self.rx_dv), mac.rx_er.eq(self.rx_er)]
        m.submodules.ethernet = ethernet = EthernetRx(self._mac)
        m.submodules.arp = arp = ArpRx(self._ip)
        m.submodules.ipv4 = ip = Ipv4Rx(self._ip)
        m.submodules.udp = udp = UdpRx(self._port)
        m.submodules.payload = payload = PayloadRx(**self._payload_args)
        layers = [ethernet, arp, ip, udp, payload]
        if self._icmp:  # (else ICMP is another protocol: not_for_us)
            m.submodules.icmp = icmp = IcmpRx()
            layers.append(icmp)
            m.d.comb += [
                self.echo_addr.eq(payload.echo_addr),
                self.echo_data.eq(payload.echo_data),
                self.echo_we.eq(payload.echo_we),
                payload.echo_done.eq(self.echo_done),
                icmp.protocol.eq(ip.fields.protocol),
                payload.lower.icmp.eq(icmp.is_icmp),
                payload.lower.echo_request.eq(icmp.echo_request),
                payload.lower.icmp_checksum.eq(icmp.fields.checksum),
            ]
        for layer in layers:
            m.d.comb += [
                layer.frame.valid.eq(mac.valid),
                layer.frame.byte.eq(mac.byte),
                layer.frame.index.eq(mac.index),
            ]
        for name in ("end", "fcs_ok", "size_ok", "length"):
            m.d.comb += getattr(payload, name).eq(getattr(mac, name))
        ethertype = ethernet.fields.ethertype
        m.d.comb += [
            arp.ethertype.eq(ethertype),
            ip.ethertype.eq(ethertype),
            udp.protocol.eq(ip.fields.protocol),
            udp.ip_length.eq(ip.fields.length),
        ]
        lower = payload.lower
        m.d.comb += [
            lower.for_us.eq(ethernet.for_us),
            lower.arp.eq(arp.is_arp),
            lower.arp_request.eq(arp.request),
            lower.ip_for_us.eq(ip.for_us),
            lower.ip_supported.eq(ip.supported),
            lower.ip_checksum_ok.eq(ip.checksum_ok),
            lower.ip_fragment.eq(ip.fragment),
            lower.ip_end.eq(ip.end),
            lower.udp.eq(udp.is_udp),
            lower.port_ok.eq(udp.port_ok),
            lower.udp_length_ok.eq(udp.length_ok),
            lower.udp_length.eq(udp.fields.length),
            lower.mac.eq(ethernet.fields.src),
            lower.ip.eq(Mux(arp.is_arp, arp.fields.spa, ip.fields.src)),
            lower.port.eq(udp.fields.src_port),
            lower.ip_length.eq(ip.fields.length),
        ]
        self._buffer(m, payload)
        return m

    def _buffer(self, m, payload):
        """The tuple bytes of accepted TUPLES packets, queued and gathered into tuples."""
        m.submodules.buffer = buffer = PacketQueue(self._capacity)
        # (a register after the block RAM, whose clock-to-output is slow: timing)
        m.submodules.buffer_out = out = StreamBuffer(8)
        m.submodules.gatherer = gatherer = TupleGatherer(self._tuple_width)
        wiring.connect(m, payload.write, buffer.i_stream)
        m.d.comb += [
            buffer.commit.eq(payload.commit),
            buffer.rollback.eq(payload.rollback),
            payload.overflow.eq(buffer.overflow),
        ]
        wiring.connect(m, buffer.o_stream, out.i_stream)
        wiring.connect(m, out.o_stream, gatherer.i_stream)
        wiring.connect(m, gatherer.o_stream, wiring.flipped(self.o_stream))
        wiring.connect(m, payload.event, wiring.flipped(self.event))
        m.d.comb += self.empty.eq(buffer.empty & ~out.o_stream.valid & ~gatherer.o_stream.valid)
        if self._load:
            m.submodules.load_buffer = loads = PacketQueue(LOAD_CAPACITY, LOAD_BYTE.size)
            m.d.comb += [
                loads.i_stream.valid.eq(payload.load_write.valid),
                loads.i_stream.payload.eq(payload.load_write.payload),
                loads.commit.eq(payload.load_commit),
                loads.rollback.eq(payload.load_rollback),
                payload.load_overflow.eq(loads.overflow),
                self.o_load.valid.eq(loads.o_stream.valid),
                self.o_load.payload.eq(loads.o_stream.payload),
                loads.o_stream.ready.eq(self.o_load.ready),
            ]


class UdpLink(wiring.Component):
    """The UDP link: tuples from UDP packets on a GMII receive interface (``rx_clk`` its clock)
    to ``o_stream``, in the ``sync`` domain; records from ``i_stream`` in RECORDS packets,
    STATUS and ARP replies out on the GMII transmit interface (clocked by ``sync``).

    Every frame received becomes one event, crossed into ``sync``: it counts in its class; an
    accepted TUPLES packet updates the sequence check: a ``seq`` at or after ``next_seq`` adds
    the jump to ``lost`` and sets ``next_seq`` to ``seq + 1``; one behind it (by up to 2**31)
    counts in ``late`` and leaves ``next_seq`` alone, so without duplicates ``lost - late``
    packets are missing; an accepted STATUS_REQ, RESET or ARP request pulses ``status_request``,
    ``reset_request`` (a cycle later; RESET also zeroes the counters and ``next_seq``) or
    ``arp_request``; an accepted CLOSE pulses ``status_request``; an accepted ICMP echo request
    pulses ``echo_request`` (its sender in ``echo_peer``, its IPv4 length and ICMP checksum in
    ``echo_length`` and ``echo_checksum``) and counts in ``echoes``.
    The sender of an accepted RESET, the session's host, becomes ``peer`` (where records and
    STATUS go) and its session id ``session`` (in every packet sent); the receive path refuses
    every other host's packets (``foreign``, :class:`~.payload.PayloadRx`), so nothing else
    changes them. An ARP request's sender is ``arp_peer``.

    With ``params_bits`` (the engine's runtime parameters; 0: none), an accepted PARAMS packet
    is checked in sequence as TUPLES are and its switch is offered on ``o_params`` (to the
    engine's ``i_params``) when the engine takes one (``o_params.ready``, nothing offered);
    when a switch is still pending it counts as ``engine_full`` instead of ``accepted`` and is
    dropped (``next_seq`` stays). STATUS ends with ``param_values``.

    Members
    -------
    rx_clk, rxd, rx_dv, rx_er : ``In``
        GMII, receive side.
    o_stream : ``Out(stream.Signature(tuple_layout))``
    txd, tx_en, tx_er : ``Out``
        GMII, transmit side, clocked by ``sync``.
    i_stream : ``In(stream.Signature(record_layout))``
        The engine's records, sent in RECORDS packets (:class:`~.payload.UdpTx`).
    engine_reset : ``Out(1)``
        Pulses with an accepted RESET: reset the engine with it.
    counters : ``Out(...)``
        One 32-bit ``Out`` per name in :data:`COUNTERS` (STATUS sends them).
    next_seq : ``Out(32)``
    rx_empty : ``Out(1)``
        Nothing waits in the receive path (synchronised: a few cycles late).
    status_request, reset_request, arp_request : ``Out(1)``
    activity, trouble : ``Out(1)``
        Pulse (a cycle after the count) with a frame accepted; with a frame refused (any class
        but ``accepted``), a TUPLES packet lost or late upstream, or a tuple the engine dropped
        (for the LEDs).
    engine_busy : ``In(1)``
        Something waits between ``o_stream``/``i_stream`` and the engine (a clock-domain
        crossing): STATUS's ``idle`` waits for it as for the engine (0 when nothing does).
    peer, arp_peer : ``Out(data.StructLayout({"mac": 48, "ip": 32, "port": 16}))``
    session : ``Out(32)``
    o_params : ``Out(stream.Signature(48 + 8 * ceil(params_bits / 8)))``
        With ``params_bits``: a switch, the tuple number in the low 48 bits, the values above.
    param_values : ``In(params_bits)``
        With ``params_bits``: the engine's values in force, for STATUS.
    o_config : ``Out(stream.Signature(LOAD_BYTE))``
        With ``load`` (a programmable engine): the bytes of the loads (the engine's
        ``i_config``), crossed from the receive clock's domain as the tuples are. An accepted
        LOAD (from the session host's IPv4 address while a session is alive, else from any
        sender) is answered with STATUS to its sender.
    image, refused : ``In(64)``, ``In(32)``
        With ``load``: the engine's image in force and loads refused, for STATUS.
    """

    def __init__(
        self,
        tuple_layout: data.StructLayout,
        record_layout: data.StructLayout,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        capacity: int = CAPACITY,
        quiet: int = 64,
        flush: int = 1024,
        params_bits: int = 0,
        idle_cycles: int = SESSION_IDLE_CYCLES,
        engine_fields: dict[str, int] | None = None,
        load: bool = False,
        icmp: bool = True,
    ):
        self._load = bool(load)
        self._tuple_layout = tuple_layout
        self._icmp = icmp
        self._record_layout = record_layout
        self._params_bytes = params_bytes(params_bits)
        self._rx_args = {
            "tuple_width": tuple_layout.size,
            "capacity": capacity,
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": engine_id,
            "params_bytes": self._params_bytes,
            "idle_cycles": idle_cycles,
            "load": self._load,
            "icmp": icmp,
        }
        self._tx_args = {
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": engine_id,
            "tuple_bytes": (tuple_layout.size + 7) // 8,
            "capacity": capacity,
            "counters": COUNTERS,
            "flush": flush,
            "params_bits": params_bits,
            "engine_fields": engine_fields,
            "echo": icmp,
        }
        self._quiet = max(int(quiet), 2)
        super().__init__(self._members(tuple_layout, record_layout, params_bits))

    def _members(self, tuple_layout, record_layout, params_bits: int) -> dict:
        """The component's ports (the class's description)."""
        endpoint = data.StructLayout({"mac": 48, "ip": 32, "port": 16})
        members = {
            **GMII_MEMBERS,
            "o_stream": Out(stream.Signature(tuple_layout)),
            "i_stream": In(stream.Signature(record_layout)),
            "engine_reset": Out(1),
            "counters": Out(wiring.Signature({name: Out(32) for name in COUNTERS})),
            "next_seq": Out(32),
            "rx_empty": Out(1),
            "status_request": Out(1),
            "reset_request": Out(1),
            "arp_request": Out(1),
            "peer": Out(endpoint),
            "session": Out(32),
            "arp_peer": Out(endpoint),
            "echo_request": Out(1),
            "echo_peer": Out(endpoint),
            "echo_length": Out(16),
            "echo_checksum": Out(16),
            "activity": Out(1),
            "trouble": Out(1),
            "engine_busy": In(1),
        }
        if params_bits:
            members["o_params"] = Out(stream.Signature(8 * (SWITCH_BYTES + self._params_bytes)))
            members["param_values"] = In(params_bits)
        if self._load:
            members["o_config"] = Out(stream.Signature(LOAD_BYTE))
            members["image"] = In(64)
            members["refused"] = In(32)
        return members

    def elaborate(self, platform):
        m = Module()
        m.domains.eth_rx = ClockDomain("eth_rx", local=True)
        m.d.comb += ClockSignal("eth_rx").eq(self.rx_clk)
        m.submodules.rx_reset = ResetSynchronizer(ResetSignal("sync"), domain="eth_rx")
        m.submodules.rx = rx = DomainRenamer("eth_rx")(EthRx(**self._rx_args))
        m.d.comb += [rx.rxd.eq(self.rxd), rx.rx_dv.eq(self.rx_dv), rx.rx_er.eq(self.rx_er)]

        m.submodules.tuple_fifo = tuples = AsyncFIFO(
            width=self._tuple_layout.size,
            depth=TUPLE_FIFO_DEPTH,
            w_domain="eth_rx",
            r_domain="sync",
        )
        # ready from a register (the FIFO's fullness is a Gray-code compare; timing): the
        # level a cycle ago left room for this cycle's write and the last one's
        room = Signal()
        m.d.eth_rx += room.eq(tuples.w_level < TUPLE_FIFO_DEPTH - 2)
        m.d.comb += [
            tuples.w_en.eq(rx.o_stream.valid & room),
            tuples.w_data.eq(rx.o_stream.payload),
            rx.o_stream.ready.eq(room),
        ]
        m.d.comb += [
            self.o_stream.valid.eq(tuples.r_rdy),
            self.o_stream.payload.eq(tuples.r_data),
            tuples.r_en.eq(self.o_stream.ready),
        ]

        if self._load:
            self._load_crossing(m, rx)
        layout = event_layout(self._params_bytes, self._load)
        m.submodules.event_fifo = events = AsyncFIFO(
            width=layout.size, depth=4, w_domain="eth_rx", r_domain="sync"
        )
        m.d.comb += [
            events.w_en.eq(rx.event.valid),
            events.w_data.eq(rx.event.payload),
            rx.event.ready.eq(events.w_rdy),
            events.r_en.eq(1),
        ]
        # (registered: the FIFO's read side decodes Gray counters; timing)
        event_valid = Signal()
        event = Signal(layout.size, reset_less=True)
        m.d.sync += [event_valid.eq(events.r_rdy), event.eq(events.r_data)]
        empty = Signal()
        m.submodules.empty_sync = FFSynchronizer(rx.empty, empty, init=1)
        m.d.comb += self.rx_empty.eq(empty & ~tuples.r_rdy)
        count = self._events(m, event_valid, data.View(layout, event))
        tx = self._transmit(m, count)
        if self._icmp:
            self._echo_buffer(m, rx, tx)
        return m

    def _load_crossing(self, m, rx):
        """The load bytes into the ``sync`` domain, as the tuples cross (ready from a
        register: the level a cycle ago left room for this cycle's write and the last one's)."""
        m.submodules.load_fifo = loads = AsyncFIFO(
            width=LOAD_BYTE.size, depth=LOAD_FIFO_DEPTH, w_domain="eth_rx", r_domain="sync"
        )
        room = Signal()
        m.d.eth_rx += room.eq(loads.w_level < LOAD_FIFO_DEPTH - 2)
        m.d.comb += [
            loads.w_en.eq(rx.o_load.valid & room),
            loads.w_data.eq(rx.o_load.payload),
            rx.o_load.ready.eq(room),
            self.o_config.valid.eq(loads.r_rdy),
            self.o_config.payload.eq(loads.r_data),
            loads.r_en.eq(self.o_config.ready),
        ]

    def _echo_buffer(self, m, rx, tx):
        """The echo buffer (a block RAM of a frame's bytes): written in the receive clock's
        domain, read by the transmit side; ``echo_done`` crosses back to free it."""
        m.submodules.echo_buffer = memory = Memory(shape=8, depth=2**INDEX_BITS, init=[])
        write = memory.write_port(domain="eth_rx")
        read = memory.read_port(domain="sync")
        m.submodules.echo_done = done = PulseSynchronizer(i_domain="sync", o_domain="eth_rx")
        m.d.comb += [
            write.addr.eq(rx.echo_addr),
            write.data.eq(rx.echo_data),
            write.en.eq(rx.echo_we),
            read.addr.eq(tx.echo_addr),
            tx.echo_data.eq(read.data),
            done.i.eq(tx.echo_done),
            rx.echo_done.eq(done.o),
        ]

    def _transmit(self, m, count):
        """Records, STATUS and ARP replies out on GMII (the ``sync`` domain is the transmit
        clock's); STATUS's ``idle``: nothing waits in the receive path, nothing went into or
        came out of the engine for ``quiet`` cycles, no record waits."""
        m.submodules.udp_tx = tx = UdpTx(self._record_layout, **self._tx_args)
        m.submodules.mac_tx = mac = MacTx()
        # a small FIFO between the packet's byte multiplexers and the MAC's state machine
        # (timing: its ready, which enables every shift register of UdpTx, comes from its
        # level, not from the MAC's state); it passes a byte a cycle, so the frame's bytes
        # stay back to back
        m.submodules.tx_buffer = buffer = StreamQueue(tx.o_stream.payload.shape(), depth=4)
        wiring.connect(m, wiring.flipped(self.i_stream), tx.i_stream)
        wiring.connect(m, tx.o_stream, buffer.i_stream)
        wiring.connect(m, buffer.o_stream, mac.i_stream)
        m.d.comb += [
            self.txd.eq(mac.txd),
            self.tx_en.eq(mac.tx_en),
            self.tx_er.eq(mac.tx_er),
            tx.arp_request.eq(self.arp_request),
            tx.arp_peer.eq(self.arp_peer),
            tx.echo_request.eq(self.echo_request),
            tx.echo_peer.eq(self.echo_peer),
            tx.echo_length.eq(self.echo_length),
            tx.echo_checksum.eq(self.echo_checksum),
            tx.status_request.eq(self.status_request),
            tx.status_peer.eq(self._status_peer),
            tx.status_session.eq(self._status_session),
            tx.status_numbered.eq(self._status_numbered),
            tx.peer.eq(self.peer),
            tx.session.eq(self.session),
            tx.clear.eq(self.reset_request),
            tx.next_seq.eq(self.next_seq),
            self.engine_reset.eq(self.reset_request),
        ]
        for name in COUNTERS:
            m.d.comb += getattr(tx.counters, name).eq(getattr(self.counters, name))
        if self._params_bytes:
            m.d.comb += tx.params.eq(self.param_values)
        if self._load:
            m.d.comb += [
                tx.image.eq(self.image),
                tx.refused.eq(self.refused),
                tx.load_offset.eq(self._load_offset),
            ]
        for name in ("matched", "drops", "records", "packets"):
            m.d.comb += count[name].eq(getattr(tx.count, name))
        quiet = Signal(range(self._quiet + 1))
        with m.If(self.o_stream.valid | self.i_stream.valid | ~self.rx_empty | self.engine_busy):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self._quiet):
            m.d.sync += quiet.eq(quiet + 1)
        m.d.comb += tx.idle.eq(quiet == self._quiet)
        return tx

    def _peers(self, m, reset, event):
        """Who the answers go to: the session's host (the sender of an accepted RESET,
        ``reset``), an ARP request's sender, an echo request's."""
        with m.If(reset):
            m.d.sync += [
                self.peer.mac.eq(event.mac),
                self.peer.ip.eq(event.ip),
                self.peer.port.eq(event.port),
                self.session.eq(event.session),
            ]
        with m.If(self.arp_request):
            m.d.sync += [self.arp_peer.mac.eq(event.mac), self.arp_peer.ip.eq(event.ip)]
        with m.If(self.echo_request):  # (the next waits until this reply is out)
            m.d.sync += [
                self.echo_peer.mac.eq(event.mac),
                self.echo_peer.ip.eq(event.ip),
                self.echo_length.eq(event.seq[:16]),
                self.echo_checksum.eq(event.seq[16:]),
            ]

    def _asker(self, m, valid, event):
        """Where STATUS goes: to whoever asked for it (the session's host; a LOAD's sender,
        any station), with its session id; and where the load being received stands."""
        self._status_peer = Signal(data.StructLayout({"mac": 48, "ip": 32, "port": 16}))
        self._status_session = Signal(32)
        self._status_numbered = Signal()
        self._load_offset = Signal(32)
        with m.If(self.status_request):
            m.d.sync += [
                self._status_numbered.eq(event.kind != EventKind.LOAD),
                self._status_peer.mac.eq(event.mac),
                self._status_peer.ip.eq(event.ip),
                self._status_peer.port.eq(event.port),
                self._status_session.eq(event.session),
            ]
        if self._load:
            with m.If(valid):
                m.d.sync += self._load_offset.eq(event.load_offset)

    def _events(self, m, valid, event):
        """Count each frame in its class, check TUPLES' ``seq``, raise the requests."""
        counts = {name: Signal(name=f"pulse_{name}") for name in COUNTERS}
        accepted = valid & (event.cls == 0)
        kind = event.kind
        tuples_packet = accepted & (kind == EventKind.TUPLES)
        refused = Signal()  # an accepted PARAMS packet while a switch is pending
        if self._params_bytes:
            params_packet = accepted & (kind == EventKind.PARAMS)
            busy = self.o_params.valid | ~self.o_params.ready
            m.d.comb += refused.eq(params_packet & busy)
            with m.If(self.o_params.ready | self.reset_request):
                m.d.sync += self.o_params.valid.eq(0)
            with m.If(params_packet & ~busy):
                m.d.sync += [self.o_params.valid.eq(1), self.o_params.payload.eq(event.switch)]
            # (in sequence with the TUPLES packets)
            tuples_packet = tuples_packet | (params_packet & ~busy)
        gap = Signal(32)
        m.d.comb += gap.eq(event.seq - self.next_seq)
        behind = gap[31]
        m.d.comb += [
            counts["tuples"].eq(self.o_stream.valid & self.o_stream.ready),
            counts["late"].eq(tuples_packet & behind),
            self.status_request.eq(
                accepted
                & (
                    (kind == EventKind.STATUS_REQ)
                    | (kind == EventKind.RESET)
                    | (kind == EventKind.CLOSE)
                    | (kind == EventKind.LOAD)
                )
            ),
            self.arp_request.eq(accepted & (kind == EventKind.ARP)),
            self.echo_request.eq(accepted & (kind == EventKind.ECHO)),
            counts["echoes"].eq(self.echo_request),
        ]
        # (registered: it resets the counters, the engine and the record FIFO; timing)
        m.d.sync += self.reset_request.eq(accepted & (kind == EventKind.RESET))
        for i, name in enumerate(FRAME_CLASSES):
            m.d.comb += counts[name].eq(valid & (event.cls == i))
        m.d.comb += [
            counts["accepted"].eq(accepted & ~refused),
            counts["engine_full"].eq(
                (valid & (event.cls == FRAME_CLASSES.index("engine_full"))) | refused
            ),
        ]
        for name in COUNTERS:
            if name == "lost":
                continue
            counter = getattr(self.counters, name)
            with m.If(counts[name]):
                m.d.sync += counter.eq(counter + 1)
        with m.If(tuples_packet & ~behind):
            m.d.sync += [
                self.next_seq.eq(event.seq + 1),
                self.counters.lost.eq(self.counters.lost + gap),
            ]
        self._peers(m, accepted & (kind == EventKind.RESET), event)
        self._asker(m, valid, event)
        with m.If(self.reset_request):  # RESET zeroes the counts (its own frame's included)
            m.d.sync += [getattr(self.counters, name).eq(0) for name in COUNTERS]
            m.d.sync += self.next_seq.eq(0)
        # (registered here, beside the sequence check, for the LEDs far away: timing)
        m.d.sync += [
            self.activity.eq(counts["accepted"]),
            self.trouble.eq(
                (tuples_packet & ~behind & (gap != 0))
                | counts["late"]
                | counts["drops"]
                | Cat(counts[name] for name in FRAME_CLASSES[1:]).any()
            ),
        ]
        return counts


class UdpTop(wiring.Component):
    """``engine`` behind a :class:`UdpLink`: the ports are GMII's (receive side clocked by
    ``rx_clk``, transmit side by the ``sync`` domain, the link's). An accepted RESET resets
    the engine. A programmable engine (:class:`~nfacep.hdl.programmable.ProgrammableEngine`)
    takes its loads from LOAD packets (its configuration, the image in force, survives RESET).

    Without ``engine_clock`` the engine runs in ``sync`` too. With it, the engine runs in a
    clock domain of its own, clocked by the ``engine_clk`` port at any frequency (the board top
    gives it one from a PLL, fast enough for the line: :mod:`nfacep.links.udp.top`), and
    everything crosses with :class:`~amaranth.lib.fifo.AsyncFIFO`:

    - tuples into the engine (the link counts a tuple in ``tuples`` when it enters the
      crossing); a full crossing stalls the link's tuples, the receive buffer fills and
      frames that do not fit count as ``engine_full``, as when the engine itself is slow;
    - records out of the engine (the link counts them as they leave the crossing);
    - runtime parameter switches into the engine (queued: one waits in the crossing while the
      engine holds another until its tuple; the link refuses a PARAMS packet only when the
      crossing is full). A switch that reaches the engine's side is written before any
      further tuple is taken, so it is in force from its tuple as without the crossing;
    - the values in force back to ``sync`` for STATUS (through synchronisers, taken when two
      samples agree: they change only at a switch);
    - the resets: the ``sync`` reset and every accepted RESET hold the engine's domain in reset
      (asynchronously asserted, released in step with ``engine_clk``) and empty the crossings,
      until the engine's domain was seen in reset;
    - STATUS's ``idle``: the engine's domain tells, through a synchroniser, that nothing went
      into or came out of the engine for as many of its cycles as the link waits of its own.

    Members
    -------
    rx_clk, rxd, rx_dv, rx_er : ``In``
    txd, tx_en, tx_er : ``Out``
    engine_clk : ``In(1)``
        With ``engine_clock``: the engine's clock.
    activity, trouble : ``Out(1)``
        The link's pulses (:class:`UdpLink`), for the LEDs.
    sdram : ``Out(pins_signature(...))``
        With an engine of ``--store sdram``: its SDRAM chip's pins, in the engine's clock
        domain (the board top puts them on the board's pads, :mod:`nfacep.boards.sdram`).
    """

    def __init__(
        self,
        engine,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        capacity: int = CAPACITY,
        flush: int = 1024,
        engine_clock: bool = False,
        icmp: bool = True,
    ):
        from nfacep.hdl.layout import params_layout
        from nfacep.links.protocol import engine_fields, engine_id, engine_kind_fields

        self._engine = engine
        self._programmable = hasattr(engine, "shape")
        params = engine.params
        if self._programmable:
            import dataclasses

            from nfacep.image import Capacity
            from nfacep.links.protocol import shape_engine_id

            c = engine.shape.capacity
            params = dataclasses.replace(
                params, engine="programmable", states=c.states, atoms=c.atoms, queries=c.queries
            )
            assert Capacity.of(params) == c
            self._engine_id = shape_engine_id(engine.shape, params)
            layout = None
        else:
            self._engine_id = engine_id(engine.nfa, engine.params)
            layout = params_layout(engine.nfa.program.parameters)
        self._engine_clock = bool(engine_clock)
        self._quiet = 2 * (engine.params.partitions + 32)
        self._link_args = {
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": self._engine_id,
            "capacity": capacity,
            "flush": flush,
            "quiet": self._quiet,
            "params_bits": layout.size if layout is not None else 0,
            "engine_fields": {**engine_fields(params), **engine_kind_fields(params)},
            "load": self._programmable,
            "icmp": icmp,
        }
        members = {
            **GMII_MEMBERS,
            "activity": Out(1),
            "trouble": Out(1),
        }
        if self._engine_clock:
            members["engine_clk"] = In(1)
        if "sdram" in engine.signature.members:  # --store sdram: the chip's pins, passed out
            members["sdram"] = engine.signature.members["sdram"]
        super().__init__(members)

    @property
    def engine_id(self) -> int:
        return self._engine_id

    @property
    def engine_clock(self) -> bool:
        """Whether the engine has a clock domain of its own (``engine_clk``)."""
        return self._engine_clock

    def elaborate(self, platform):
        from amaranth.hdl import ResetInserter

        m = Module()
        engine = self._engine
        m.submodules.link = link = UdpLink(
            engine.tuple_layout, engine.record_layout, **self._link_args
        )
        m.d.comb += [
            link.rx_clk.eq(self.rx_clk),
            link.rxd.eq(self.rxd),
            link.rx_dv.eq(self.rx_dv),
            link.rx_er.eq(self.rx_er),
            self.txd.eq(link.txd),
            self.tx_en.eq(link.tx_en),
            self.tx_er.eq(link.tx_er),
            self.activity.eq(link.activity),
            self.trouble.eq(link.trouble),
        ]
        if "sdram" in self.signature.members:  # (in the engine's clock domain)
            wiring.connect(m, engine.sdram, wiring.flipped(self.sdram))
        if self._engine_clock:
            self._crossings(m, link, engine)
            return m
        m.submodules.engine = ResetInserter(link.engine_reset)(engine)
        wiring.connect(m, link.o_stream, engine.i_stream)
        wiring.connect(m, engine.o_stream, link.i_stream)
        if self._programmable:
            wiring.connect(m, link.o_config, engine.i_config)
            m.d.comb += [link.image.eq(engine.image), link.refused.eq(engine.refused)]
        if self._link_args["params_bits"]:
            m.d.comb += [
                engine.i_params.valid.eq(link.o_params.valid),
                link.o_params.ready.eq(engine.i_params.ready),
                link.param_values.eq(engine.param_values),
            ]
            self._switch(m, link.o_params.payload, engine)
        return m

    def _switch(self, m, switch, engine):
        """The engine's switch from the link's: the tuple number and the values."""
        seq = engine.i_params.payload.seq
        width = self._link_args["params_bits"]
        m.d.comb += [
            seq.eq(switch[: min(len(seq), 8 * SWITCH_BYTES)]),
            engine.i_params.payload.values.eq(switch[8 * SWITCH_BYTES : 8 * SWITCH_BYTES + width]),
        ]

    def _crossings(self, m, link, engine):
        """The engine in the ``engine`` domain, every signal between it and the link crossed
        (the class's description)."""
        m.domains.engine = ClockDomain("engine", local=True)
        m.d.comb += ClockSignal("engine").eq(self.engine_clk)
        # the crossings' write side in the link's clock, emptied with the engine's reset
        m.domains.to_engine = ClockDomain("to_engine", local=True)
        flush, seen = Signal(), Signal()
        m.d.comb += [
            ClockSignal("to_engine").eq(ClockSignal("sync")),
            ResetSignal("to_engine").eq(ResetSignal("sync") | flush),
        ]
        with m.If(link.engine_reset):
            m.d.sync += flush.eq(1)
        with m.Elif(seen):
            m.d.sync += flush.eq(0)
        m.submodules.engine_reset = ResetSynchronizer(ResetSignal("sync") | flush, domain="engine")
        in_reset = Signal(reset_less=True)
        m.d.engine += in_reset.eq(ResetSignal("engine"))
        m.submodules.reset_seen = FFSynchronizer(in_reset, seen, o_domain="sync")
        m.submodules.engine = DomainRenamer("engine")(engine)

        m.submodules.tuples_in = tuples = AsyncFIFO(
            width=engine.tuple_layout.size, depth=16, w_domain="to_engine", r_domain="engine"
        )
        staged = self._tuple_stage(m, link, tuples, flush)
        m.submodules.records_out = records = AsyncFIFO(
            width=engine.record_layout.size, depth=16, w_domain="engine", r_domain="sync"
        )
        m.d.comb += [
            records.w_en.eq(engine.o_stream.valid),
            records.w_data.eq(engine.o_stream.payload),
            engine.o_stream.ready.eq(records.w_rdy),
            link.i_stream.valid.eq(records.r_rdy),
            link.i_stream.payload.eq(records.r_data),
            records.r_en.eq(link.i_stream.ready),
        ]
        writing = (
            self._params_crossing(m, link, engine, flush) if self._link_args["params_bits"] else 0
        )
        if self._programmable:
            self._load_crossing(m, link, engine, flush)
        # a switch is written before any further tuple is taken
        m.d.comb += [
            engine.i_stream.valid.eq(tuples.r_rdy & ~writing),
            engine.i_stream.payload.eq(tuples.r_data),
            tuples.r_en.eq(engine.i_stream.ready & ~writing),
        ]
        self._engine_idle(m, link, engine, tuples, records, staged)

    def _tuple_stage(self, m, link, tuples, flush):
        """The link's tuples into the crossing through a one-tuple register (part of the
        crossing: emptied with the engine's reset, and none taken during it): the link's FIFO
        is read on that register's state alone, and the crossing written from it, so that no
        one LUT drives both FIFOs' counters and memories across the chip (timing; a tuple
        every other cycle, ample for tuples of several bytes). Returns whether it holds one."""
        staged = Signal()
        tuple_ = Signal(len(tuples.w_data), reset_less=True)
        room = Signal()  # (registered: the fullness is a Gray-code compare; timing)
        m.d.sync += room.eq((tuples.w_level < 14) & ~flush)
        m.d.comb += [
            link.o_stream.ready.eq(~staged & ~flush),
            tuples.w_en.eq(staged & room),
            tuples.w_data.eq(tuple_),
        ]
        with m.If(~staged):
            m.d.to_engine += tuple_.eq(link.o_stream.payload)
        with m.If(tuples.w_en):
            m.d.to_engine += staged.eq(0)
        with m.If(link.o_stream.valid & link.o_stream.ready):
            m.d.to_engine += staged.eq(1)
        return staged

    def _engine_idle(self, m, link, engine, tuples, records, staged):
        """``link.engine_busy``: a tuple or record in a crossing, or the engine's domain not
        quiet for the link's ``quiet`` cycles of its own (told through a synchroniser)."""
        quiet = Signal(range(self._quiet + 1))
        idle, idle_sync = Signal(), Signal()
        with m.If(tuples.r_rdy | engine.o_stream.valid):
            m.d.engine += [quiet.eq(0), idle.eq(0)]
        with m.Elif(quiet != self._quiet):
            m.d.engine += [quiet.eq(quiet + 1), idle.eq(quiet + 1 == self._quiet)]
        m.submodules.idle_sync = FFSynchronizer(idle, idle_sync, o_domain="sync")
        m.d.comb += link.engine_busy.eq(~idle_sync | staged | (tuples.w_level != 0) | records.r_rdy)

    def _params_crossing(self, m, link, engine, flush):
        """Switches into the engine's domain, the values in force back; returns the engine-side
        signal that a switch is written in this cycle."""
        switch = link.o_params.payload
        m.submodules.params_in = params = AsyncFIFO(
            width=len(switch), depth=2, w_domain="to_engine", r_domain="engine"
        )
        payload = Signal(len(switch))
        m.d.comb += [
            params.w_en.eq(link.o_params.valid),
            params.w_data.eq(switch),
            link.o_params.ready.eq(params.w_rdy),
            engine.i_params.valid.eq(params.r_rdy),
            payload.eq(params.r_data),
            params.r_en.eq(engine.i_params.ready),
        ]
        self._switch(m, payload, engine)
        initial = engine.values.packed(engine.values.initial)
        values = self._agreed(m, "values", engine.param_values.as_value(), link, flush, initial)
        m.d.comb += link.param_values.eq(values)
        return params.r_rdy & engine.i_params.ready

    def _load_crossing(self, m, link, engine, flush):
        """A programmable engine's load bytes into its domain, as the tuples cross (emptied
        with the engine's reset: a chunk's bytes still crossing at RESET are lost, and the
        load is refused when its last chunk comes); the image in force and ``refused`` back,
        as the values in force (the image survives RESET, ``refused`` does not)."""
        m.submodules.config_in = loads = AsyncFIFO(
            width=LOAD_BYTE.size, depth=LOAD_FIFO_DEPTH, w_domain="to_engine", r_domain="engine"
        )
        room = Signal()  # (registered, as the tuples' crossing)
        m.d.sync += room.eq((loads.w_level < LOAD_FIFO_DEPTH - 2) & ~flush)
        m.d.comb += [
            loads.w_en.eq(link.o_config.valid & room),
            loads.w_data.eq(link.o_config.payload),
            link.o_config.ready.eq(room),
            engine.i_config.valid.eq(loads.r_rdy),
            engine.i_config.payload.eq(loads.r_data),
            loads.r_en.eq(engine.i_config.ready),
        ]
        image = self._agreed(m, "image", engine.image, link, flush, 0, survives=True)
        refused = self._agreed(m, "refused", engine.refused, link, flush, 0)
        m.d.comb += [link.image.eq(image), link.refused.eq(refused)]

    def _agreed(self, m, name, value, link, flush, initial, survives=False):
        """``value`` of the engine's domain in ``sync``: through a synchroniser, taken when
        two samples agree (it changes seldom); back to ``initial`` at an accepted RESET
        unless it ``survives`` it."""
        width = len(value)
        sampled, last = Signal(width, init=initial), Signal(width, init=initial)
        agreed = Signal(width, init=initial, name=f"{name}_in_sync")
        m.submodules[f"{name}_sync"] = FFSynchronizer(value, sampled, o_domain="sync", init=initial)
        m.d.sync += last.eq(sampled)
        with m.If(Const(0) if survives else link.engine_reset):
            m.d.sync += agreed.eq(initial)
        with m.Elif(~flush & (last == sampled)):  # (after a RESET: once the engine was reset)
            m.d.sync += agreed.eq(sampled)
        return agreed
