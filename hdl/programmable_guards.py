"""The programmable engine's guards (:class:`ProgrammableGuards`, a part of
:class:`~nfacep.hdl.programmable.ProgrammableEngine`): each atom a configured comparison of a
tuple's field with a constant or another field, each state slot's guard a configured truth
table over the atoms it reads."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed

from nfacep.image import ATOMS_PER_STATE, OPS
from nfacep.lang.values import FLOAT32_INF, FLOAT32_SIGN

from .programmable_entry import operand_shape

__all__ = ["ProgrammableGuards"]


#: each operator from whether the left operand is less than the right and whether equal
_COMPARE = {
    "=": lambda less, equal: equal,
    "<>": lambda less, equal: ~equal,
    "<": lambda less, equal: less,
    "<=": lambda less, equal: less | equal,
    ">": lambda less, equal: ~(less | equal),
    ">=": lambda less, equal: ~less,
}


class ProgrammableGuards:
    """The guards of :class:`~nfacep.hdl.programmable.ProgrammableEngine` (a mixin: its
    ``_shape`` and ``i_stream`` are the engine's)."""

    def _field(self, config, name: str):
        return config[name.replace(".", "_")]

    @property
    def _wide(self):
        return operand_shape(self._shape)

    def _guards(self, m: Module, config) -> tuple[Signal, Value]:
        """Each state slot's guard for the tuple on ``i_stream``: its truth table at the atoms
        it reads; and the tuple's ORDER BY value (the configured ``order`` operand), which
        its windows are measured in."""
        shape = self._shape
        c = shape.capacity
        tup = self.i_stream.payload
        wide = self._wide
        values = Array(Signal(wide, name=f"operand_{i}") for i in range(len(shape.operands)))
        nans = Array(Signal(name=f"operand_{i}_nan") for i in range(len(shape.operands)))
        for i, name in enumerate(shape.operands):
            bits = Value.cast(tup[name])
            if i in shape.floats:  # the order key, as the decoder compares FLOAT32s
                sign, magnitude = bits[31], bits[:31]
                m.d.comb += [
                    values[i].eq(Mux(sign & (magnitude != 0), ~bits, bits | FLOAT32_SIGN)),
                    nans[i].eq(magnitude > FLOAT32_INF),
                ]
            else:
                m.d.comb += values[i].eq(bits)
        atoms = Signal(c.atoms, name="atoms")
        for a in range(c.atoms):
            left = values[self._field(config, f"atom{a}.field")]
            uses_other = self._field(config, f"atom{a}.uses_other")
            other = Mux(uses_other, values[self._field(config, f"atom{a}.other")], 0)
            nan = nans[self._field(config, f"atom{a}.field")] | (
                uses_other & nans[self._field(config, f"atom{a}.other")]
            )
            constant = self._field(config, f"atom{a}.constant").as_signed()
            right = Signal(signed(wide.width + constant.shape().width + 1), name=f"atom{a}_right")
            m.d.comb += right.eq(other + constant)
            op = self._field(config, f"atom{a}.op")
            # one comparator of each kind per atom, every operator made of their two bits
            less, equal = Signal(name=f"atom{a}_less"), Signal(name=f"atom{a}_equal")
            m.d.comb += [less.eq(left < right), equal.eq(left == right)]
            with m.If(nan):  # IEEE 754: a NaN satisfies only <>
                m.d.comb += atoms[a].eq(op == OPS.index("<>"))
            with m.Else(), m.Switch(op):
                for code, name in enumerate(OPS):
                    with m.Case(code):
                        m.d.comb += atoms[a].eq(_COMPARE[name](less, equal))
        guards = Signal(c.states, name="guards")
        for i in range(c.states):
            index = Cat(
                atoms.bit_select(self._field(config, f"state{i}.atom{j}"), 1)
                for j in range(ATOMS_PER_STATE)
            )
            m.d.comb += guards[i].eq(self._field(config, f"state{i}.table").bit_select(index, 1))
        if not c.timed:
            return guards, Const(0, 0)
        return guards, values[self._field(config, "order")]
