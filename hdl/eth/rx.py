"""The UDP link's receive path (:class:`EthRx`), in the receive clock's domain: GMII bytes
through the MAC and the layers' header readers to :class:`~.payload_rx.PayloadRx`, the tuple
bytes through a packet queue with commit and discard to the tuple gatherer, the bytes of loads
through one of their own, and the echo buffer's writes."""

from __future__ import annotations

from amaranth.hdl import (
    Module,
    Mux,
)
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.links.udp.protocol import LOAD_CHUNK, SESSION_IDLE_CYCLES

from ..stream import PacketQueue, StreamBuffer, TupleGatherer
from .arp import ArpRx
from .headers import INDEX_BITS
from .icmp import IcmpRx
from .ipv4 import Ipv4Rx
from .mac import EthernetRx, MacRx
from .payload import event_layout
from .payload_rx import PayloadRx
from .udp import UdpRx

__all__ = ["LOAD_BYTE", "LOAD_CAPACITY", "EthRx"]

#: Bytes of the receive buffer of loads (a programmable engine's): two chunks.
LOAD_CAPACITY = 2 * LOAD_CHUNK
#: A byte of a load, with ``last`` on a load's final byte (the engine's configuration port's).
LOAD_BYTE = data.StructLayout({"data": 8, "last": 1})


class EthRx(wiring.Component):
    """The receive path, in one clock domain (the receive clock's, renamed by the user): GMII
    in, tuples (raw bits) and one event per frame out::

        MacRx ▸ EthernetRx ▸ ArpRx, Ipv4Rx ▸ IcmpRx, UdpRx ▸ PayloadRx ▸ PacketQueue
        ▸ StreamBuffer ▸ TupleGatherer

    Every layer reads the bytes :class:`~.mac.MacRx` hands on at its header's offset and what
    the layer below found; :class:`~.payload_rx.PayloadRx` classifies the frame from all of it.
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
        (:class:`~.payload_rx.PayloadRx`).
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
                layer.frame.first.eq(mac.first),
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
        # (a register after the buffer, for timing when its block RAM was read without its
        # output register; not measured without it since)
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
