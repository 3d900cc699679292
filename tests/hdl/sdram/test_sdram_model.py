"""The SDRAM model (nfacep.hdl.sdram.model): legal command sequences store and return data at
the CAS latency, and every timing rule broken on purpose by a hand-written sequence raises,
naming the rule, the cycle and the bank."""

from __future__ import annotations

import pytest

from nfacep.hdl.sdram.model import SDRAMModel, SDRAMTimingError, unwritten
from nfacep.hdl.sdram.timing import COLORLIGHT_5A75B, M12L16161A, SDRAMTiming

# 100 MHz: tRCD 2, tRP 2, tRAS 4, tRC 6, tRRD 1, tWR 2, tRFC 6, tMRD 2; short power-up, tREFI
TIMING = M12L16161A.with_(power_up_ns=100.0, init_refreshes=2, trefi_ns=2000.0)
T = TIMING.cycles(100e6)
A10 = 1 << 10
MODE_CL2 = 2 << 4


class Chip:
    """Drives a model with named commands, one edge each, NOPs between with ``wait``."""

    def __init__(self, cycles=T):
        self.m = SDRAMModel(COLORLIGHT_5A75B, cycles)
        self.reads: dict[int, int] = {}  # edge -> value the chip drove for it

    def _edge(self, ras=0, cas=0, we=0, ba=0, a=0, dq=0, oe=0):
        out = self.m.clock(ras, cas, we, ba, a, dq, oe)
        if out is not None:
            self.reads[self.m.cycle + 1] = out

    def nop(self, n=1):
        for _ in range(n):
            self._edge()

    def act(self, ba, row):
        self._edge(ras=1, ba=ba, a=row)

    def read(self, ba, col):
        self._edge(cas=1, ba=ba, a=col)
        return self.m.cycle

    def write(self, ba, col, value, oe=1):
        self._edge(cas=1, we=1, ba=ba, a=col, dq=value, oe=oe)

    def pre(self, ba, all_banks=False):
        self._edge(ras=1, we=1, ba=ba, a=A10 if all_banks else 0)

    def refresh(self):
        self._edge(ras=1, cas=1)

    def mode(self, a=MODE_CL2):
        self._edge(ras=1, cas=1, we=1, a=a)

    def init(self):
        t = self.m.t
        self.nop(t.power_up)
        self.pre(0, all_banks=True)
        self.nop(t.trp - 1)
        for _ in range(t.init_refreshes):
            self.refresh()
            self.nop(t.trfc - 1)
        self.mode()
        self.nop(t.tmrd - 1)
        return self


def test_cycles_from_nanoseconds():
    assert (T.trcd, T.trp, T.tras, T.trc, T.trrd, T.twr, T.trfc, T.tmrd) == (2, 2, 4, 6, 1, 2, 6, 2)
    assert T.trefi == 200 and M12L16161A.cycles(100e6).trefi == 1562
    slow = M12L16161A.cycles(50e6)
    assert (slow.trcd, slow.trp, slow.tras, slow.trc, slow.trfc, slow.trefi) == (1, 1, 2, 3, 3, 781)
    with pytest.raises(ValueError, match="CAS latency"):
        SDRAMTiming(name="x", cas_latency=4)


def test_data_comes_back_at_the_cas_latency_and_rows_are_kept():
    c = Chip().init()
    c.act(0, 5)
    c.act(1, 7)  # the other bank, tRRD = 1 later
    c.nop(T.trcd - 1)
    c.write(0, 3, 0xDEADBEEF)
    c.write(1, 3, 0x12345678)
    r0 = c.read(0, 3)
    r1 = c.read(1, 3)
    r2 = c.read(1, 4)
    c.nop(4)
    assert c.reads[r0 + 2] == 0xDEADBEEF and c.reads[r1 + 2] == 0x12345678
    assert c.reads[r2 + 2] == unwritten(1, 7, 4) != 0
    assert set(c.reads) == {r0 + 2, r1 + 2, r2 + 2}  # nothing driven otherwise
    c.pre(0, all_banks=True)
    c.nop(T.trp - 1)
    c.act(0, 5)
    c.nop(T.trcd - 1)
    r = c.read(0, 3)
    c.nop(3)
    assert c.reads[r + 2] == 0xDEADBEEF
    assert c.m.peek(1, 7, 3) == 0x12345678


def opened(bank=0, row=1):
    c = Chip().init()
    c.act(bank, row)
    return c


# each: a sequence that breaks one rule at its last command; the rule and bank it must name
BROKEN = {
    "tRCD": (lambda c: (c.act(0, 1), c.nop(T.trcd - 2), c.read(0, 0)), 0),
    "tRCD write": (lambda c: (c.act(1, 1), c.write(1, 0, 1)), 1),
    "tRAS": (lambda c: (c.act(0, 1), c.nop(T.tras - 2), c.pre(0)), 0),
    "tRP": (lambda c: (c.act(0, 1), c.nop(T.tras - 1), c.pre(0), c.act(0, 2)), 0),
    "tRC": (lambda c: (c.act(0, 1), c.nop(T.tras - 1), c.pre(0), c.nop(T.trp - 1), c.act(0, 2)), 0),
    "tWR": (lambda c: (c.act(0, 1), c.nop(T.tras), c.write(0, 0, 1), c.pre(0)), 0),
    "tRFC": (lambda c: (c.refresh(), c.nop(T.trfc - 2), c.act(1, 1)), None),
    "tMRD": (lambda c: (c.mode(), c.act(0, 1)), None),
    "state": (lambda c: (c.act(0, 1), c.nop(T.trc), c.act(0, 2)), 0),
    "state read": (lambda c: c.read(1, 0), 1),
    "state refresh": (lambda c: (c.act(1, 1), c.nop(T.trc), c.refresh()), 1),
    "tRP refresh": (lambda c: (c.act(0, 1), c.nop(T.tras - 1), c.pre(0), c.refresh()), 0),
    "bus": (
        lambda c: (
            c.act(0, 1),
            c.nop(T.trcd),
            c.read(0, 0),
            c.nop(T.cas_latency - 0),
            c.write(0, 1, 2),
        ),
        None,
    ),
    "bus write": (lambda c: (c.act(0, 1), c.nop(T.trcd), c.write(0, 1, 2, oe=0)), 0),
    "address": (lambda c: (c.act(0, 1), c.nop(T.trcd), c.read(0, 256)), 0),
    "unsupported": (lambda c: (c.act(0, 1), c.nop(T.trcd), c.read(0, A10)), 0),
    "tREFI": (lambda c: c.nop(T.trefi), None),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_rule_broken_on_purpose_raises(name):
    steps, bank = BROKEN[name]
    # tRC only binds where it exceeds tRAS + tRP (not at 100 MHz), so that case lengthens it
    c = Chip(T.with_(trc=T.tras + T.trp + 1) if name == "tRC" else T).init()
    before = c.m.cycle
    with pytest.raises(SDRAMTimingError) as caught:
        steps(c)
    err = caught.value
    assert err.rule == name.split()[0] and err.bank == bank
    assert before < err.cycle == c.m.cycle  # the edge of the offending command
    assert f"SDRAM {err.rule} violated at cycle {err.cycle}" in str(err)


def test_the_same_sequences_one_clock_later_are_legal():
    c = Chip().init()
    c.act(0, 1)
    c.act(1, 1)  # tRRD 1
    c.nop(T.trcd - 2)
    c.read(0, 0)
    r = c.read(1, 0)
    c.nop(T.cas_latency + 1)  # a write needs one clock of turnaround after the read data
    c.write(1, 1, 5)
    c.nop(T.twr - 1)
    c.pre(1)
    c.nop(T.tras)
    c.pre(0)
    c.nop(T.trp - 1)
    c.refresh()
    c.nop(T.trfc - 1)
    c.act(1, 9)
    assert r + T.cas_latency in c.reads


def test_refresh_deadline_and_tras_max():
    c = Chip().init()
    c.refresh()
    for _ in range(3):
        c.nop(T.trefi - 1)
        c.refresh()  # exactly tREFI apart: legal
    c.nop(T.trefi)
    with pytest.raises(SDRAMTimingError, match="tREFI violated"):
        c.nop()
    c = Chip(T.with_(tras_max=50, trefi=10**6)).init()
    c.act(1, 3)
    c.nop(50)
    with pytest.raises(SDRAMTimingError) as caught:
        c.nop()
    assert caught.value.rule == "tRAS max" and caught.value.bank == 1


@pytest.mark.parametrize(
    ("steps", "rule"),
    [
        (lambda c: (c.nop(T.power_up - 1), c.pre(0, all_banks=True)), "power-up"),
        (lambda c: (c.nop(T.power_up), c.refresh()), "init"),
        (
            lambda c: (
                c.nop(T.power_up),
                c.pre(0, True),
                c.nop(T.trp),
                c.mode(),
                c.nop(2),
                c.act(0, 1),
            ),
            "init",
        ),
        (
            lambda c: (c.nop(T.power_up), c.pre(0, True), c.nop(T.trp), c.mode(3 << 4 | 1)),
            "unsupported",
        ),
    ],
)
def test_initialisation_rules(steps, rule):
    c = Chip()
    with pytest.raises(SDRAMTimingError) as caught:
        steps(c)
    assert caught.value.rule == rule


def test_trrd_between_activates_of_two_banks():
    """tRRD is one clock at 100 MHz (never broken there); at 125 MHz it is two."""
    fast = M12L16161A.with_(power_up_ns=100.0, init_refreshes=2).cycles(125e6)
    assert fast.trrd == 2
    c = Chip(fast).init()
    c.act(0, 1)
    with pytest.raises(SDRAMTimingError) as caught:
        c.act(1, 1)
    assert caught.value.rule == "tRRD" and caught.value.bank == 1
    c = Chip(fast).init()
    c.act(0, 1)
    c.nop()
    c.act(1, 1)  # two clocks apart: legal


def test_cas_latency_below_what_the_clock_needs_raises():
    c = Chip(T.with_(cas_latency=3))
    c.nop(T.power_up)
    c.pre(0, True)
    c.nop(T.trp)
    with pytest.raises(SDRAMTimingError, match="CL violated"):
        c.mode(2 << 4)
