"""The UART link's frame format, shared by the gateware, the host and the software board model.

Every frame, in both directions::

    0xA5 0x5A | type (1) | length (2, little-endian) | payload (length bytes) | CRC (2, MSB first)

The CRC is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, not reflected, no final
XOR; ``amaranth.lib.crc.catalog.CRC16_CCITT_FALSE``) over ``type``, ``length`` and ``payload``;
sent most significant byte first, so running the CRC over the whole frame after the sync word
leaves 0. Multi-byte fields are little-endian.

Host to board:

========== ====== ================================================================================
type       code   payload
========== ====== ================================================================================
TUPLES     0x01   ``seq`` (1 byte, the frame's sequence number mod 256), then one or more tuples
                  of :func:`nfacep.wire.tuple_bytes` bytes each, packed as docs/formats.md says
STATUS_REQ 0x02   none: the board answers with a STATUS frame
RESET      0x03   none: clear the engine (partitions, counters, sequence numbers, runtime
                  parameters back to the values it was built with) and the link (buffer,
                  counters, expected ``seq`` = 0); the board answers with STATUS
PARAMS     0x04   only for queries with runtime parameters: ``seq`` (1 byte, numbered with the
                  TUPLES frames), the tuple number the switch applies from (6 bytes), then the
                  new values of every parameter packed as the engine's parameter registers hold
                  them (:meth:`nfacep.settings.ParamValues.packed`), padded to whole bytes
                  (:func:`params_payload`)
========== ====== ================================================================================

Board to host:

========== ====== ================================================================================
RECORD     0x81   one match record of the engine: ``seq``, ``partition``, ``matches``, ``dropped``
                  packed LSB-first (:func:`nfacep.wire.record_format`), padded to whole bytes
STATUS     0x82   :data:`STATUS_FIELDS`: protocol version, engine identity, sizes, the engine
                  parameters (:data:`~nfacep.links.protocol.ENGINE_FIELDS`), counters;
                  then, for queries with runtime parameters, the values in force (packed as in
                  PARAMS; :func:`decode_status`)
ACK        0x83   :data:`ACK_FIELDS`: after every TUPLES or PARAMS frame received with a good
                  CRC
========== ====== ================================================================================

Flow control (go-back-N with credits): the board accepts a TUPLES frame only when its ``seq``
is the one it expects and its tuples fit the free part of its buffer of ``capacity`` bytes
(as they arrive);
then it commits them and expects ``seq + 1``. Otherwise (a duplicate, a gap, no room) it
discards the frame. Either way it answers with ACK, carrying the ``seq`` it expects next and
the engine's ``tuples`` counter: tuples the engine has taken out of the buffer. The host
keeps at most ``capacity`` bytes of tuples between what it sent and what the engine took,
resends from the first unacknowledged frame when no ACK advances for a while, and polls
STATUS when it waits for room.

A PARAMS frame takes its place in the same sequence: the board accepts it when its ``seq`` is
the one expected and no switch is pending (an earlier one waits for its tuple); then it writes
the switch to the engine (the values are in force from the stated tuple on, or from the next
tuple the engine takes if that one has passed) and expects ``seq + 1``. A PARAMS frame that
finds a switch pending is discarded and counted as ``overflow`` (no room, as for tuples), and
acknowledged with the ``seq`` expected unchanged: the host resends it, like any frame that was
not accepted, once the pending switch's tuple was taken (ACK's ``tuples`` passed it).

Resynchronisation: the board hunts for the sync word, then checks the type (unknown: a
``bad_type`` error) and the length (beyond the buffer, no whole number of tuples, or a
non-empty command, a PARAMS frame of another length: ``bad_length``; PARAMS for an engine without
runtime parameters: ``bad_type``); a frame whose bytes stop for longer than the link's
timeout is ``truncated``; a CRC mismatch is ``bad_crc``. After any error the board hunts for
the next sync word; nothing of a bad frame reaches the engine. UART stop-bit errors count as
``uart_errors``. All counters are in STATUS; RESET clears them.

End of a run: STATUS's ``flags`` bit 0 (``idle``) says that nothing is waiting in the buffer,
the engine or the transmitter and that nothing moved for longer than the engine's latency;
``records`` counts the RECORD frames sent before that STATUS frame. STATUS and ACK give each
counter whole, as at the frame's start give or take a few dozen clock cycles (exact once
``idle`` is set).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

from amaranth.lib import enum

from ..protocol import ENGINE_FIELDS, decode_fields, encode_fields, fields_size, switch_body

__all__ = [
    "ACK_FIELDS",
    "ERROR_COUNTERS",
    "OVERHEAD",
    "STATUS_FIELDS",
    "SYNC",
    "VERSION",
    "FrameReader",
    "FrameType",
    "crc16",
    "decode_status",
    "encode",
    "encode_status",
    "params_payload",
]

#: Protocol version, the first byte of STATUS. (2: PARAMS, and the values in force in STATUS;
#: 3: the engine parameters in STATUS.)
VERSION = 3
#: The two bytes that start every frame.
SYNC = bytes([0xA5, 0x5A])
#: Bytes a frame adds around its payload: sync, type, length, CRC.
OVERHEAD = 7


class FrameType(enum.IntEnum, shape=8):
    """The type byte of a frame. An :mod:`amaranth.lib.enum` (8 bits), so a signal of this
    shape shows the names in waveforms; to the host and the model it is a plain
    :class:`enum.IntEnum`."""

    TUPLES = 0x01
    STATUS_REQ = 0x02
    RESET = 0x03
    PARAMS = 0x04
    RECORD = 0x81
    STATUS = 0x82
    ACK = 0x83


#: STATUS payload: (name, bytes), in order. ``flags`` bit 0: idle.
STATUS_FIELDS: tuple[tuple[str, int], ...] = (
    ("version", 1),
    ("flags", 1),
    ("next_seq", 1),
    ("reserved", 1),
    ("engine_id", 4),
    ("tuple_bytes", 2),
    ("record_bytes", 2),
    ("capacity", 2),  # bytes of the tuple buffer
    *ENGINE_FIELDS,  # the engine parameters it was built with
    ("tuples", 4),  # tuples the engine took
    ("matched", 4),  # RECORD frames sent for a tuple that matched a query
    ("drops", 4),  # RECORD frames sent for a dropped tuple
    ("records", 4),  # RECORD frames sent
    ("frames", 4),  # TUPLES frames accepted
    ("bad_type", 2),  # link errors, each wrapping at 2**16
    ("bad_length", 2),
    ("bad_crc", 2),
    ("truncated", 2),
    ("out_of_seq", 2),
    ("overflow", 2),
    ("uart_errors", 2),
)

#: ACK payload.
ACK_FIELDS: tuple[tuple[str, int], ...] = (("next_seq", 1), ("tuples", 4))

#: The STATUS counters that count link errors.
ERROR_COUNTERS = (
    "bad_type",
    "bad_length",
    "bad_crc",
    "truncated",
    "out_of_seq",
    "overflow",
    "uart_errors",
)


def params_payload(seq: int, switch: int, packed: int, bits: int) -> bytes:
    """A PARAMS frame's payload: frame number ``seq`` (mod 256), then :func:`switch_body`."""
    return bytes([seq % 256]) + switch_body(switch, packed, bits)


def decode_status(payload: bytes, values_bytes: int) -> dict[str, int]:
    """A STATUS payload: :data:`STATUS_FIELDS`, then ``values_bytes`` bytes of the values in
    force (``values``, an int: packed as in PARAMS; 0 without parameters). A ValueError for
    another length."""
    size = fields_size(STATUS_FIELDS)
    if len(payload) != size + values_bytes:
        raise ValueError(f"payload of {len(payload)} bytes, expected {size + values_bytes}")
    return {
        **decode_fields(STATUS_FIELDS, payload[:size]),
        "values": int.from_bytes(payload[size:], "little"),
    }


def encode_status(status: dict[str, int], values_bytes: int) -> bytes:
    """The inverse of :func:`decode_status` (missing fields are 0)."""
    return encode_fields(STATUS_FIELDS, status) + status.get("values", 0).to_bytes(
        values_bytes, "little"
    )


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (``crc16(b"123456789") == 0x29B1``), continuing from
    ``crc``.

    Python's :func:`binascii.crc_hqx` is this CRC (polynomial 0x1021, not reflected, no final
    XOR) started at 0xFFFF; ``amaranth.lib.crc.catalog.CRC16_CCITT_FALSE(8).compute`` computes
    the same a bit at a time in Python, hundreds of times slower (the tests check that they
    agree).
    """
    return binascii.crc_hqx(data, crc)


def encode(ftype: int, payload: bytes = b"") -> bytes:
    """One whole frame."""
    if len(payload) > 0xFFFF:
        raise ValueError(f"a payload of {len(payload)} bytes does not fit a frame")
    body = bytes([ftype]) + len(payload).to_bytes(2, "little") + payload
    return SYNC + body + crc16(body).to_bytes(2, "big")


@dataclass(frozen=True)
class Frame:
    type: int
    payload: bytes


class FrameReader:
    """Splits a byte stream into frames, resynchronising after errors as the board does.

    :meth:`feed` returns the complete frames with a good CRC; ``errors`` counts the rest by
    kind (``bad_type``, ``bad_length``, ``bad_crc``) and ``skipped`` the bytes between frames.
    ``max_payload`` bounds the length field (longer: ``bad_length``, hunt again).
    """

    def __init__(self, types, max_payload: int):
        self._types = {int(t) for t in types}
        self._max = max_payload
        self._buf = bytearray()
        self.errors = {"bad_type": 0, "bad_length": 0, "bad_crc": 0}
        self.skipped = 0

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        buf = self._buf
        buf += data
        frames = []
        while True:
            start = buf.find(SYNC)
            if start < 0:
                keep = 1 if buf[-1:] == SYNC[:1] else 0
                self.skipped += len(buf) - keep
                del buf[: len(buf) - keep]
                return frames
            self.skipped += start
            del buf[:start]
            if len(buf) < 3:
                return frames
            if buf[2] not in self._types:
                self.errors["bad_type"] += 1
                del buf[:2]
                continue
            if len(buf) < 5:
                return frames
            length = int.from_bytes(buf[3:5], "little")
            if length > self._max:
                self.errors["bad_length"] += 1
                del buf[:2]
                continue
            end = 5 + length + 2
            if len(buf) < end:
                return frames
            if crc16(bytes(buf[2:end])) != 0:
                self.errors["bad_crc"] += 1
                del buf[:2]  # hunt again from just after this sync word
                continue
            frames.append(Frame(buf[2], bytes(buf[5 : 5 + length])))
            del buf[:end]
