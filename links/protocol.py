"""What both links' formats share: little-endian fields, a runtime-parameter switch, the
engine's fingerprint and its parameters as STATUS reports them (:data:`ENGINE_FIELDS`).

A leaf module (it imports nothing of :mod:`nfacep.links`): the UART link's frame format
(:mod:`nfacep.links.uart.protocol`) and the UDP link's payload format
(:mod:`nfacep.links.udp.protocol`) are built from it, and the gateware, the hosts and the
software boards of both take these from here.
"""

from __future__ import annotations

import json
import zlib

__all__ = [
    "ENGINE_FIELDS",
    "FINGERPRINT_VERSION",
    "SWITCH_BYTES",
    "decode_fields",
    "encode_fields",
    "engine_fields",
    "engine_from_fields",
    "engine_id",
    "engine_kind_fields",
    "fields_size",
    "params_bytes",
    "shape_engine_id",
    "switch_body",
]

#: The version in :func:`engine_id`'s description: the UART link's protocol version when the
#: fingerprint was defined (2), kept so that a board built before the links were siblings
#: still reports the fingerprint the host expects.
FINGERPRINT_VERSION = 2


def fields_size(fields) -> int:
    return sum(n for _, n in fields)


def decode_fields(fields, payload: bytes) -> dict[str, int]:
    """The little-endian fields of a STATUS or ACK payload."""
    if len(payload) != fields_size(fields):
        raise ValueError(f"payload of {len(payload)} bytes, expected {fields_size(fields)}")
    out, at = {}, 0
    for name, n in fields:
        out[name] = int.from_bytes(payload[at : at + n], "little")
        at += n
    return out


def encode_fields(fields, values: dict[str, int]) -> bytes:
    return b"".join(
        (values.get(name, 0) & ((1 << 8 * n) - 1)).to_bytes(n, "little") for name, n in fields
    )


#: Bytes of the tuple number a PARAMS frame's switch applies from (48 bits, little-endian).
SWITCH_BYTES = 6


def params_bytes(bits: int) -> int:
    """Bytes of ``bits`` bits of packed parameter values, padded to whole bytes (0: none)."""
    return (bits + 7) // 8


def switch_body(switch: int, packed: int, bits: int) -> bytes:
    """A switch as both links send it: the tuple number ``switch`` the values apply from (6
    bytes) and the ``packed`` values (``bits`` wide, :meth:`nfacep.settings.ParamValues.packed`,
    padded to bytes); little-endian. The UDP link's PARAMS body."""
    if not 0 <= switch < 1 << 8 * SWITCH_BYTES:
        raise ValueError(f"a switch at tuple {switch} does not fit {8 * SWITCH_BYTES} bits")
    return switch.to_bytes(SWITCH_BYTES, "little") + packed.to_bytes(params_bytes(bits), "little")


#: The engine parameters in both links' STATUS (little-endian, after ``capacity``), so that
#: ``nfacep run`` learns the engine from the board: ``store`` is the index of the store's name
#: in :data:`nfacep.params.STORES` (0 pipeline, 1 table). :func:`engine_id` covers them.
ENGINE_FIELDS: tuple[tuple[str, int], ...] = (
    ("store", 1),
    ("partitions", 4),
    ("ways", 1),
    ("timer_bits", 1),
    ("tick_tuples", 4),
)


def engine_fields(params) -> dict[str, int]:
    """The :data:`ENGINE_FIELDS` of :class:`~nfacep.params.EngineParams` ``params``."""
    from nfacep.params import STORES

    values = {name: getattr(params, name) for name, _ in ENGINE_FIELDS}
    return {**values, "store": STORES.index(params.store)}


def engine_from_fields(status: dict):
    """The :class:`~nfacep.params.EngineParams` a STATUS's :data:`ENGINE_FIELDS` describe; a
    ValueError (saying why) when they describe none."""
    from nfacep.errors import NfacepError
    from nfacep.params import STORES, EngineParams

    if not 0 <= status["store"] < len(STORES):
        raise ValueError(f"store {status['store']} is none of {', '.join(STORES)}")
    values = {name: status[name] for name, _ in ENGINE_FIELDS}
    if status.get("engine"):  # (the UDP link's STATUS: a programmable engine)
        from nfacep.params import ENGINES, PROGRAMMABLE

        if status["engine"] >= len(ENGINES):
            raise ValueError(f"engine {status['engine']} is none of {', '.join(ENGINES)}")
        values["engine"] = ENGINES[status["engine"]]
        values.update({name: status[name] for name in PROGRAMMABLE})
    try:
        return EngineParams(**{**values, "store": STORES[status["store"]]})
    except NfacepError as err:
        raise ValueError(str(err)) from None


def engine_id(nfa, params) -> int:
    """A 32-bit fingerprint of the engine a query file and :class:`~nfacep.params.EngineParams`
    describe: the board reports the one it was built with, the host checks it against its own.
    A programmable engine's (``params.engine``) depends on the file's stream declaration and
    partition key only, not on its queries (:func:`shape_engine_id`).
    """
    from nfacep.wire import field_slices, record_format

    if params.engine == "programmable":
        from nfacep.image import Capacity, EngineShape

        program = nfa.program
        shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
        return shape_engine_id(shape, params)

    desc = {
        "version": FINGERPRINT_VERSION,
        "nfa": nfa.dump(),
        "tuple": field_slices(nfa.program.schema),
        "record": [list(f) for f in record_format(nfa).fields],
        "queries": [[q.name, q.index] for q in nfa.queries],
        "partition_fields": list(nfa.program.partition_fields),
        "parameters": params.as_dict(),
    }
    return zlib.crc32(json.dumps(desc, sort_keys=True).encode())


def shape_engine_id(shape, params) -> int:
    """:func:`engine_id` of a programmable engine of :class:`~nfacep.image.EngineShape`
    ``shape`` and :class:`~nfacep.params.EngineParams` ``params`` (its partition store): its
    fingerprint (which covers the fields, the key and the capacities) and the store."""
    desc = {
        "version": FINGERPRINT_VERSION,
        "programmable": shape.fingerprint.hex(),
        "parameters": {**params.as_dict(), "engine": "programmable"},
    }
    return zlib.crc32(json.dumps(desc, sort_keys=True).encode())


def engine_kind_fields(params) -> dict[str, int]:
    """STATUS's fields that say which engine the board has (the UDP link's): ``engine`` (0
    fixed, 1 programmable) and the programmable engine's ``states``, ``atoms`` and
    ``queries`` (0 for the fixed engine)."""
    from nfacep.params import ENGINES, PROGRAMMABLE

    programmable = params.engine == "programmable"
    return {
        "engine": ENGINES.index(params.engine),
        **{name: getattr(params, name) if programmable else 0 for name in PROGRAMMABLE},
    }
