"""Tuple generation: schema- and predicate-aware background traffic plus planted instances.

Pure numpy, no Spark: :class:`Generator` is built once on the driver from a compiled query
file and the :class:`Options`, then shipped to the Spark tasks, each of which calls
:meth:`Generator.block` for the blocks it owns. Behind it, one module per job: the background
traffic (:mod:`.background`), the planted instances' templates (:mod:`.templates`) and each
block's plan and columns (:mod:`.plan`).

Determinism: the stream is cut into fixed blocks of ``block_tuples`` tuples (a parameter of
the content, recorded in the manifest, never derived from the number of Spark tasks). Block
*b* draws its background from ``SeedSequence(seed, spawn_key=(0, b))`` and its planted
instances from ``SeedSequence(seed, spawn_key=(1, b))``; the templates come from
``spawn_key=(2,)``. So a seed gives the same tuples whichever task computes which block, for a
given numpy version (numpy keeps bit streams stable within a version, not across all).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nfacep.lang import predicates as P
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, UIntType
from nfacep.nfa import Nfa
from nfacep.settings import ParamValues

from .. import BLOCK_TUPLES
from .background import Background, FieldSpec
from .plan import Plan, Planted
from .templates import KINDS, WINDOW_KINDS, Templates

__all__ = [
    "BLOCK_TUPLES",
    "KINDS",
    "WINDOW_KINDS",
    "FieldSpec",
    "Generator",
    "Options",
    "Planted",
    "arrow_schema",
    "to_arrow",
]


@dataclass(frozen=True)
class Options:
    """What to generate; every field is part of the content (and of the manifest)."""

    tuples: int
    seed: int = 0
    keys: int = 1  #: distinct partition keys (1 when the query has no PARTITION)
    zipf: float = 1.0  #: Zipf exponent of the key ranks; 0 = uniform
    plant_rate: float = 0.02  #: share of tuples that belong to planted instances
    block_tuples: int = BLOCK_TUPLES
    #: ENUM weights: (field, ((label, weight), …)) pairs, unlisted labels weigh 0
    enum_weights: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()


class Generator:
    """Everything needed to generate any block of the stream (picklable, no Spark)."""

    def __init__(self, nfa: Nfa, options: Options, values: ParamValues | None = None):
        self.options = options
        if values:  # what the predicates compare with: the parameters' values, as constants
            nfa = dataclasses.replace(
                nfa,
                predicates=tuple(
                    dataclasses.replace(p, expr=P.bind(p.expr, values.initial))
                    for p in nfa.predicates
                ),
            )
        self._background = Background(nfa, options, values)
        templates = Templates(nfa, self._background)
        #: query -> why it has no planted instances (of some kinds)
        self.unplanted = templates.unplanted
        self._plan = Plan(self._background, templates)

    @property
    def keys(self) -> int:
        """Distinct partition keys (1 without PARTITION)."""
        return self._background.keys

    @property
    def n_blocks(self) -> int:
        return self._plan.n_blocks

    def block(self, b: int) -> dict[str, np.ndarray]:
        """Columns of block ``b`` (``seq`` first), in the generator's internal types."""
        return self._plan.block(b)

    def planted(self, b: int) -> list[Planted]:
        """The instances block ``b`` plants (replays its plan only, no background)."""
        return self._plan.planted(b)

    def describe(self) -> list[dict]:
        """Each field's generator, as the manifest lists it."""
        return self._background.describe()

    def sample_rates(self, nfa: Nfa, n: int = 1 << 16) -> dict[str, float]:
        """Share of background tuples satisfying each decoder predicate."""
        return self._background.sample_rates(nfa, n)

    def typed(self, cols: dict[str, np.ndarray], key_rank: bool = True) -> dict:
        """Columns as the reference matcher types them (UINT as uint64, keys as values)."""
        return self._background.typed(cols, key_rank)

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self._background.schema)

    def to_arrow(self, cols: dict[str, np.ndarray]) -> pa.RecordBatch:
        return to_arrow(self._background.schema, cols)


def arrow_schema(schema) -> pa.Schema:
    """The vectors' tuples of the stream ``schema`` (a :class:`nfacep.schema.Schema`): ``seq``,
    then the fields in declaration order, UINT/INT as int64, BOOL as boolean, ENUM as its
    label, FLOAT32 as float."""
    fields = [pa.field("seq", pa.int64(), nullable=False)]
    for f in schema.fields:
        fields.append(pa.field(f.name, _arrow_type(f.type), nullable=False))
    return pa.schema(fields)


def to_arrow(schema, cols: dict[str, np.ndarray]) -> pa.RecordBatch:
    """Columns (``seq`` and each field's, as :class:`nfacep.io.tuples.Tuples` holds them) in
    the layout of :func:`arrow_schema`."""
    arrays = [pa.array(cols["seq"], pa.int64())]
    for f in schema.fields:
        v = cols[f.name]
        if isinstance(f.type, EnumType):
            arrays.append(
                pc.take(pa.array(list(f.type.labels), pa.string()), pa.array(v, pa.int64()))
            )
        else:
            arrays.append(pa.array(v, _arrow_type(f.type)))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(schema))


def _arrow_type(ty) -> pa.DataType:
    if isinstance(ty, EnumType):
        return pa.string()
    if isinstance(ty, BoolType):
        return pa.bool_()
    if isinstance(ty, Float32Type):
        return pa.float32()
    assert isinstance(ty, UIntType | IntType)
    return pa.int64()
