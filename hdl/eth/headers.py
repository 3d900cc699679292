"""The headers of the UDP link's layers, each declared once (LiteEth's ``common.py``): Ethernet
II, ARP for IPv4 over Ethernet, IPv4 without options, ICMP, UDP, and the nfacep payload header
(:data:`nfacep.links.udp.protocol.HEADER`).

A :class:`Header` lists its fields in wire order, each a whole number of bytes in one byte
order (network order, big-endian, but for the payload header's little-endian fields); its
:attr:`~Header.layout` is the :class:`~amaranth.lib.data.StructLayout` the gateware reads and
builds headers as (:mod:`.packet`), and :meth:`~Header.encode` / :meth:`~Header.decode` are the
same format in software, for the tests. Fields narrower than a byte (IPv4's version and IHL,
its flags and fragment offset) are declared as the bytes that hold them.
"""

from __future__ import annotations

from amaranth.lib import data

from nfacep.links.udp.protocol import HEADER

__all__ = [
    "ARP",
    "ETHERNET",
    "ETHERTYPE_ARP",
    "ETHERTYPE_IPV4",
    "ICMP",
    "INDEX_BITS",
    "IPV4",
    "PAYLOAD",
    "PROTOCOL_ICMP",
    "PROTOCOL_UDP",
    "UDP",
    "Header",
    "ipv4_address",
]


class Header:
    """A header of ``fields`` (name: bytes, in wire order) in ``byteorder``.

    :attr:`layout` has a field of ``8 * bytes`` bits per name; the value of a multi-byte field
    is the number its bytes spell in ``byteorder``. :meth:`wire_byte` and :meth:`byte_offset`
    say where each byte on the wire lives in the layout.
    """

    def __init__(self, name: str, fields: dict[str, int], *, byteorder: str = "big"):
        if byteorder not in ("big", "little"):
            raise ValueError(f"byteorder is 'big' or 'little', not {byteorder!r}")
        if not fields or any(n < 1 for n in fields.values()):
            raise ValueError("a header has fields of at least one byte each")
        self._name = name
        self._fields = dict(fields)
        self._byteorder = byteorder
        self._layout = data.StructLayout({k: 8 * n for k, n in self._fields.items()})
        # the wire's bytes: (field, which byte of the field's value, 0 the least significant)
        self._bytes: list[tuple[str, int]] = [
            (field, n - 1 - j if byteorder == "big" else j)
            for field, n in self._fields.items()
            for j in range(n)
        ]

    @property
    def name(self) -> str:
        return self._name

    @property
    def layout(self) -> data.StructLayout:
        return self._layout

    @property
    def length(self) -> int:
        """Bytes on the wire."""
        return len(self._bytes)

    def offset(self, field: str) -> int:
        """The byte offset of ``field`` on the wire."""
        return next(k for k, (name, _) in enumerate(self._bytes) if name == field)

    def wire_byte(self, k: int) -> tuple[str, int]:
        """The field the wire's byte ``k`` belongs to, and which byte of its value it is (0: the
        least significant)."""
        return self._bytes[k]

    def byte_offset(self, k: int) -> int:
        """The bit offset in :attr:`layout` of the wire's byte ``k``."""
        field, j = self._bytes[k]
        return self._layout[field].offset + 8 * j

    def encode(self, **values: int) -> bytes:
        """The header's bytes (missing fields are 0)."""
        unknown = set(values) - set(self._fields)
        if unknown:
            raise ValueError(f"{self._name} has no field {', '.join(sorted(unknown))}")
        return b"".join(
            (values.get(k, 0) & ((1 << 8 * n) - 1)).to_bytes(n, self._byteorder)
            for k, n in self._fields.items()
        )

    def decode(self, raw: bytes) -> dict[str, int]:
        """The fields of the header at the start of ``raw``."""
        if len(raw) < self.length:
            raise ValueError(f"{self._name} takes {self.length} bytes, not {len(raw)}")
        out, at = {}, 0
        for k, n in self._fields.items():
            out[k] = int.from_bytes(raw[at : at + n], self._byteorder)
            at += n
        return out

    def __repr__(self) -> str:
        return f"Header({self._name!r}, {self._fields!r}, byteorder={self._byteorder!r})"


#: Ethernet II (no VLAN tag).
ETHERNET = Header("ethernet", {"dst": 6, "src": 6, "ethertype": 2})
#: ARP for IPv4 over Ethernet (RFC 826).
ARP = Header(
    "arp",
    {
        "htype": 2,
        "ptype": 2,
        "hlen": 1,
        "plen": 1,
        "oper": 2,
        "sha": 6,
        "spa": 4,
        "tha": 6,
        "tpa": 4,
    },
)
#: IPv4 without options (RFC 791): ``ver_ihl`` is 0x45, ``flags_fragment`` the flags (3 bits)
#: and the fragment offset (13).
IPV4 = Header(
    "ipv4",
    {
        "ver_ihl": 1,
        "tos": 1,
        "length": 2,
        "ident": 2,
        "flags_fragment": 2,
        "ttl": 1,
        "protocol": 1,
        "checksum": 2,
        "src": 4,
        "dst": 4,
    },
)
#: ICMP's common header (RFC 792); an echo's identifier, sequence number and data follow.
ICMP = Header("icmp", {"type": 1, "code": 1, "checksum": 2})
#: UDP (RFC 768).
UDP = Header("udp", {"src_port": 2, "dst_port": 2, "length": 2, "checksum": 2})
#: The nfacep payload header, little-endian (:mod:`nfacep.links.udp.protocol`).
PAYLOAD = Header("payload", dict(HEADER), byteorder="little")

#: The Ethertypes and the IP protocol numbers the link speaks.
ETHERTYPE_IPV4, ETHERTYPE_ARP, PROTOCOL_UDP, PROTOCOL_ICMP = 0x0800, 0x0806, 17, 1
#: The bits of a byte's offset in a received frame: offsets saturate at 2047, beyond the
#: longest frame.
INDEX_BITS = 11


def ipv4_address(ip: bytes) -> int:
    """An IPv4 address of 4 bytes as the 32-bit value of a header's field (network order);
    raises ValueError for any other length."""
    if len(ip) != 4:
        raise ValueError("an IPv4 address of 4 bytes")
    return int.from_bytes(ip, "big")
