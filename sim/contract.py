"""The engine's contract with the simulation, read from its JSON sidecar: the stream ports and
record layout checked (:func:`check_sidecar`, :class:`ContractError`), the records checked
against the tuples sent, and the words its parameter and configuration ports take
(:func:`switch_words`, :func:`configuration`).
"""

from __future__ import annotations

from nfacep import wire
from nfacep.errors import UsageError
from nfacep.nfa import Nfa
from nfacep.settings import ParamValues

from .build import SimulationError

#: The ports the testbench drives, with their direction.
STREAM_PORTS = (
    ("i_stream__valid", "in"),
    ("i_stream__ready", "out"),
    ("i_stream__payload", "in"),
    ("o_stream__valid", "out"),
    ("o_stream__ready", "in"),
    ("o_stream__payload", "out"),
)


class ContractError(SimulationError):
    """The generated engine or its sidecar does not keep the port and record contract."""


def switch_words(values: ParamValues, sidecar: dict) -> list[int]:
    """The words the engine's ``i_params`` takes for the switches of ``values``: the values
    in force from each switch on, packed, and the switch's tuple number above them."""
    from .harness import MAX_SWITCHES

    if len(values.switches) > MAX_SWITCHES:
        raise UsageError(
            f"{len(values.switches)} parameter switches: a simulation takes at most {MAX_SWITCHES}"
        )
    width = sidecar["runtime_parameters"]["width"]
    seq_bits = sidecar["ports"]["i_params__payload"]["width"] - width
    for seq, _ in values.switches:
        if seq >= 1 << seq_bits:
            raise UsageError(f"--param …@{seq}: the engine numbers tuples modulo 2^{seq_bits}")
    return [values.packed(values.in_force(seq)) | seq << width for seq, _ in values.switches]


def configuration(nfa: Nfa, sidecar: dict, values: ParamValues | None) -> list[int]:
    """The load of ``nfa``'s configuration image (:func:`nfacep.image.load`, in force from
    tuple 0) for the programmable engine the sidecar describes, with the runtime parameters'
    ``values`` as constants: the words its ``i_config`` takes before the tuples
    (:func:`nfacep.image.port_words`). :class:`~nfacep.image.ImageError` when the file
    does not fit; :class:`ContractError` when the sidecar's engine is not the one the file's
    stream declaration and the sidecar's capacities make."""
    from nfacep.image import Capacity, EngineShape, image, load, port_words

    c = sidecar["capacity"]
    program = nfa.program
    shape = EngineShape(
        program.schema,
        program.partition_fields,
        Capacity(c["states"], c["atoms"], c["queries"]),
    )
    if sidecar["configuration"]["engine_fingerprint"] != shape.fingerprint.hex():
        raise ContractError(
            "the programmable engine's sidecar names another engine (its fingerprint is not "
            "the one of the file's stream declaration and its capacities)"
        )
    return port_words(load(image(nfa, shape, values)))


def check_sidecar(sidecar: dict, nfa: Nfa) -> None:
    """Raise :class:`ContractError` unless the sidecar describes the engine of this query file
    with the ports the testbench drives and the wire formats of :mod:`nfacep.wire`."""
    programmable = sidecar.get("engine") == "programmable"
    keys = ("top", "ports", "tuple", "record") + (
        ("capacity", "configuration") if programmable else ("queries",)
    )
    problems = [f"no '{key}'" for key in keys if key not in sidecar]
    if problems:
        raise ContractError(f"the engine's sidecar: {'; '.join(problems)}")
    ports = sidecar["ports"]
    for name, direction in STREAM_PORTS:
        port = ports.get(name)
        if port is None:
            problems.append(f"no port {name}")
        elif port.get("dir") != direction:
            problems.append(f"port {name} is '{port.get('dir')}', expected '{direction}'")
    schema = nfa.program.schema
    width = wire.tuple_width(schema)
    if sidecar["tuple"].get("width") != width:
        problems.append(
            f"the tuple is {sidecar['tuple'].get('width')} bits wide, the wire format's {width}"
        )
    if ports.get("i_stream__payload", {}).get("width") != sidecar["tuple"].get("width"):
        problems.append("i_stream__payload is not tuple.width bits wide")
    if ports.get("o_stream__payload", {}).get("width") != sidecar["record"].get("width"):
        problems.append("o_stream__payload is not record.width bits wide")
    fields = [
        (f.get("name"), f.get("offset"), f.get("width")) for f in sidecar["tuple"].get("fields", [])
    ]
    if fields != wire.field_slices(schema):
        problems.append(f"tuple fields {fields} are not the stream's {wire.field_slices(schema)}")
    problems += _record_problems(sidecar, nfa, programmable)
    if sidecar.get("partition_fields") != list(nfa.program.partition_fields):
        problems.append(
            f"partition_fields {sidecar.get('partition_fields')!r} are not the "
            f"query's {list(nfa.program.partition_fields)!r}"
        )
    if problems:
        raise ContractError(f"the engine's sidecar does not fit the query: {'; '.join(problems)}")


def _record_problems(sidecar: dict, nfa: Nfa, programmable: bool) -> list[str]:
    """What in the sidecar's record layout and query bits is not the file's wire format (a
    programmable engine: a match bit per query slot, the file's queries the first; its
    queries are its image's, not the sidecar's)."""
    problems = []
    try:
        record = wire.RecordFormat.from_description(sidecar["record"].get("fields", []))
    except ValueError as err:
        return [str(err)]
    want = wire.record_format(nfa, record.widths["seq"])
    if programmable:
        want = wire.RecordFormat.from_widths(
            {**want.widths, "matches": sidecar["capacity"].get("queries")}
        )
    if record != want:
        problems.append(f"the record {record.fields} is not the wire format's {want.fields}")
    if not programmable:
        names = [q.get("name") for q in sidecar["queries"]]
        expected = [q.name for q in nfa.queries]
        bits = [q.get("bit") for q in sidecar["queries"]]
        if names != expected or bits != list(range(len(names))):
            problems.append(
                f"queries {names} are not the file's {expected} with bits in file order"
            )
    return problems
