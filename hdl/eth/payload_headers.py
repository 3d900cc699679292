"""The headers :class:`~.payload_tx.UdpTx` sends below the payload (:class:`TxHeaders`):
an ARP reply's (Ethernet, ARP), an ICMP echo reply's (Ethernet, IPv4, ICMP) with its body read
from the echo buffer, and a UDP packet's (Ethernet, IPv4, UDP and the payload header), with
their IPv4 checksums."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal, Value
from amaranth.lib.fifo import SyncFIFOBuffered

from nfacep.links.udp.protocol import (
    VERSION,
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
)
from .packet import pack

__all__ = ["TxHeaders"]

#: :class:`~.payload_tx.UdpTx`'s frame kind for an echo reply (0 is an ARP reply's, else a
#: payload type).
_KIND_ECHO = 0x08


class TxHeaders:
    """The headers and echo replies of a :class:`~.payload_tx.UdpTx` (which sets the
    addresses, ``_echo`` and the members these read)."""

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
        # the read's enable from registers alone (timing): whether a reply is being sent (a
        # cycle late), the bytes read and not yet sent (the FIFO's level and the reads in
        # flight, counted in one register) and whether the body has bytes left to read
        reading, more = Signal(), Signal(init=1)
        pending = Signal(range(8))
        m.d.comb += [
            issue.eq(reading & more & (pending < 6)),
            self.echo_addr.eq(next_byte),
            prefetch.w_en.eq(kept),
            prefetch.w_data.eq(byte),
        ]
        m.d.sync += [
            read.eq(issue),
            kept.eq(read),
            byte.eq(self.echo_data),
            reading.eq(f.reading),
            pending.eq(pending + issue - prefetch.r_en),
        ]
        with m.If(issue):
            m.d.sync += [next_byte.eq(next_byte + 1), more.eq(next_byte != f.body_last)]
        with m.If(~reading):
            m.d.sync += [next_byte.eq(0), more.eq(1)]

    def _echo_state(self, m, f):
        """ECHO: an echo reply's body, from the prefetch FIFO (:meth:`_echo_reads`). A byte
        is taken when the FIFO offers one and the stream is ready, in ECHO (``in_echo``, a
        register, not the state: timing)."""
        out = self.o_stream
        prefetch = f.prefetch
        taken = f.in_echo & prefetch.r_rdy & out.ready
        m.d.comb += prefetch.r_en.eq(taken)
        with m.State("ECHO"):
            last = f.index == f.body_last
            m.d.comb += [
                f.reading.eq(1),
                out.valid.eq(prefetch.r_rdy),
                out.payload.data.eq(prefetch.r_data),
                out.payload.last.eq(last),
            ]
            with m.If(taken):
                m.d.sync += f.index.eq(f.index + 1)
                with m.If(last):
                    m.d.sync += f.in_echo.eq(0)
                    m.d.comb += self.echo_done.eq(1)
                    m.next = "IDLE"

    def _headers(self, f, checksum, icmp_checksum) -> Value:
        """The frame's headers, for the packetizer: an ARP reply's (Ethernet and ARP), an echo
        reply's (Ethernet, IPv4, ICMP) or a UDP packet's (Ethernet, IPv4, UDP and the payload
        header)."""
        mac = int.from_bytes(self._mac, "big")
        ip = int.from_bytes(self._ip, "big")
        dst = f.dst

        def ethernet(ethertype):
            return pack(ETHERNET, {"dst": dst.mac, "src": mac, "ethertype": ethertype})

        def ip_header(sums, protocol):  # a UDP packet's or an echo reply's
            fields = ipv4.header(
                length=f.ip_len,
                ident=f.seq[:16],
                checksum=sums.checksum,
                src=ip,
                dst=dst.ip,
                protocol=protocol,
            )
            return pack(IPV4, fields)

        arp_reply = Cat(
            ethernet(ETHERTYPE_ARP),
            pack(ARP, arp.reply(mac=mac, ip=ip, peer_mac=dst.mac, peer_ip=dst.ip)),
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
            ethernet(ETHERTYPE_IPV4),
            ip_header(checksum, PROTOCOL_UDP),
            pack(UDP, udp_header),
            pack(PAYLOAD, payload_header),
        )
        if not self._echo:
            return Mux(f.kind == 0, arp_reply, udp_packet)
        echo_reply = Cat(
            ethernet(ETHERTYPE_IPV4),
            ip_header(icmp_checksum, PROTOCOL_ICMP),
            pack(ICMP, icmp.header(f.icmp_checksum)),
        )
        return Mux(f.kind == 0, arp_reply, Mux(f.kind == _KIND_ECHO, echo_reply, udp_packet))
