# amaranth: UnusedElaboratable=no
"""The partition store in SDRAM (nfacep.hdl.sdram.store, --store sdram) against the table's
sequential model (tests/hdl/test_hdl_table.py's TableModel: the semantics are the table's), in
Amaranth's simulator with the cycle-accurate SDRAM model on its pins, whose timing assertions
must never fire: direct and hashed tables, drops, timers, same-key bursts, a cache far smaller
than the keys (evictions with write-back), random input gaps and output stalls, refresh under
load. Broken hazard tracking and a controller that refreshes too seldom fail."""

from __future__ import annotations

import pathlib
import random

import pytest
from test_hdl_partitioner import (
    PAYLOAD_WIDTH,
    STATE_WIDTH,
    assert_matches_model,
    mix_gateware,
    simulate,
)
from test_hdl_table import TableModel, bursty_keys, random_tuples

from nfacep.cli import main
from nfacep.hdl.sdram.model import SDRAMModel, SDRAMTimingError
from nfacep.hdl.sdram.sim import sdram_process
from nfacep.hdl.sdram.store import SdramPartitioner
from nfacep.hdl.sdram.timing import AS4C32M16SB, M12L16161A, ULX3S, SDRAMGeometry

CLK = 100e6
# the chip's figures with a short power-up and tREFI 1.5 us: a refresh every ~150 clocks
TIMING = M12L16161A.with_(power_up_ns=300.0, init_refreshes=2, trefi_ns=1500.0)
# a small chip (512 words), so that clearing it after reset is quick
GEOMETRY = SDRAMGeometry(banks=2, rows=16, columns=16, width=32)


def make_store(*, entries, ways, key_width, lines=4, geometry=None, timing=None, **kwargs):
    return SdramPartitioner(
        key_shape=key_width,
        payload_shape=PAYLOAD_WIDTH,
        state_width=STATE_WIDTH,
        result_shape=STATE_WIDTH,
        entries=entries,
        ways=ways,
        update=mix_gateware,
        geometry=geometry or GEOMETRY,
        timing=timing or TIMING,
        clk_freq=CLK,
        lines=lines,
        **kwargs,
    )


def run_store(dut, tuples, **kwargs):
    """The store's records for ``tuples`` with the SDRAM model on its pins. A timing violation
    stops the model (the store runs on, reading nonsense) and is raised once the run ends."""
    model = SDRAMModel(GEOMETRY, TIMING.cycles(CLK))
    limit = 4000 + dut.clearing_words + 200 * len(tuples)
    failures: list[AssertionError] = []
    run = simulate(
        dut,
        tuples,
        cycle_limit=limit,
        processes=[sdram_process(model, dut.sdram, failures=failures)],
        **kwargs,
    )
    if failures:
        raise failures[0]
    run.dut = dut
    return run, model


def check(tuples, *, entries, ways, key_width, timers=None, lines=4, **kwargs):
    timers = timers or {}
    dut = make_store(entries=entries, ways=ways, key_width=key_width, lines=lines, **timers)
    reference = TableModel(entries=entries, ways=ways, key_width=key_width, **timers)
    expected = reference.run(tuples)
    run, model = run_store(dut, tuples, **kwargs)
    assert_matches_model(run, expected)
    assert run.tuples == len(tuples)
    assert run.drops == reference.drops
    return run, model, reference


def test_direct_with_evictions_gaps_and_stalls():
    rng = random.Random(1)
    tuples = random_tuples(rng, [rng.randrange(64) for _ in range(120)])
    run, model, _ = check(tuples, entries=64, ways=4, key_width=6, gap=0.2, stall=0.3)
    assert run.dut.direct
    assert model.counts["REFRESH"] > 3  # refreshes under load lost nothing
    assert model.counts["WRITE"] > run.dut.clearing_words  # write-backs of dirty lines


def test_hashed_drops_and_bursts():
    """Keys of 12 bits in 16 buckets of 4 ways: full buckets drop; runs of one key and
    alternating pairs hit lines that are still being fetched."""
    rng = random.Random(2)
    keys = bursty_keys(rng, 150, rng.sample(range(1 << 12), 90))
    run, _, reference = check(random_tuples(rng, keys), entries=64, ways=4, key_width=12)
    assert not run.dut.direct
    assert reference.drops > 0


@pytest.mark.slow
@pytest.mark.parametrize(("tick", "bits"), [(3, 2), (1, 3)])
def test_timers(tick, bits):
    rng = random.Random(tick)
    keys = bursty_keys(rng, 160, rng.sample(range(1 << 12), 100))
    run, _, _ = check(
        random_tuples(rng, keys),
        entries=64,
        ways=4,
        key_width=12,
        timers={"tick_tuples": tick, "timer_bits": bits},
        stall=0.2,
    )
    assert run.dut.stamp_bits >= 48


def test_long_output_stall_loses_nothing():
    rng = random.Random(3)
    tuples = random_tuples(rng, [rng.randrange(64) for _ in range(40)])
    check(tuples, entries=64, ways=4, key_width=6, first_stall=600)


def test_broken_hazard_tracking_fails():
    """Taking a line that queued tuples still wait for gives them another bucket's entries."""
    rng = random.Random(2)
    keys = [rng.randrange(1 << 12) for _ in range(150)]
    tuples = random_tuples(rng, keys)
    expected = TableModel(entries=64, ways=4, key_width=12).run(tuples)
    dut = make_store(entries=64, ways=4, key_width=12, hazard_tracking=False)
    run, _ = run_store(dut, tuples)
    with pytest.raises(AssertionError, match="tuple"):
        assert_matches_model(run, expected)


def test_refreshing_too_seldom_fails():
    """A controller that waits twice tREFI between refreshes makes the model raise."""
    slow = TIMING.cycles(CLK)
    slow = slow.with_(trefi=2 * slow.trefi)
    dut = make_store(entries=64, ways=4, key_width=6, controller={"cycles_override": slow})
    rng = random.Random(4)
    tuples = random_tuples(rng, [rng.randrange(64) for _ in range(200)])
    with pytest.raises(SDRAMTimingError) as error:
        run_store(dut, tuples)
    assert error.value.rule == "tREFI"


def test_addresses_spread_buckets_over_banks():
    dut = make_store(entries=64, ways=4, key_width=12)
    assert dut.line_words == 4
    assert [dut.address(b, 0)[0] for b in range(4)] == [0, 1, 0, 1]
    # 16 buckets of 4 words, 4 to a row of 16 columns: bank, row, then the place in the row
    assert dut.address(3, 2) == (1, 1, 2)
    assert dut.address(7, 1) == (1, 1, 5)
    seen = {dut.address(b, w) for b in range(dut.buckets) for w in range(dut.line_words)}
    assert len(seen) == dut.buckets * dut.line_words
    # buckets equal modulo row_lines (the lines of a cache that shares rows) share a row
    assert dut.row_lines == 4
    rows = {b: dut.address(b, 0)[:2] for b in range(dut.buckets)}
    assert all((rows[a] == rows[b]) == (a % 4 == b % 4) for a in rows for b in rows)


def test_default_cache_shares_rows():
    """By default the cache has a line for every (bank, row) a one-word bucket can use, so a
    write-back goes to the row its line's next bucket is read from."""
    dut = make_store(entries=256, ways=1, key_width=8, lines=None)
    assert dut.line_words == 1 and dut.row_lines == 16  # 2 banks x 8 rows of 16 columns
    assert dut.lines == 256  # all the buckets: CACHE_BITS holds more
    from nfacep.hdl.sdram.store import CACHE_BITS
    from nfacep.hdl.sdram.timing import COLORLIGHT_5A75B

    big = SdramPartitioner(
        key_shape=20,
        payload_shape=PAYLOAD_WIDTH,
        state_width=STATE_WIDTH,
        result_shape=STATE_WIDTH,
        entries=1 << 20,
        ways=1,
        update=mix_gateware,
        geometry=COLORLIGHT_5A75B,
    )
    assert big.row_lines == 4096 == big.lines == CACHE_BITS // 32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"entries": 48, "ways": 4, "key_width": 6}, "power of two"),
        ({"entries": 64, "ways": 4, "key_width": 12, "lines": 3}, "power of two"),
        ({"entries": 4096, "ways": 4, "key_width": 16}, "more than its 512"),
        ({"entries": 64, "ways": 128, "key_width": 12}, "must not exceed"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_store(**kwargs)


QUERIES = pathlib.Path(__file__).resolve().parents[3] / "queries"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["check", "--board", "colorlight-5a75b"], "the harness board top does not drive"),
        (["build", "--board", "colorlight-5a75b"], "the harness board top does not drive"),
        (["build", "--board", "icebreaker", "--link", "uart"], "has no SDRAM"),
    ],
)
def test_commands_that_cannot_take_it_yet_say_so(tmp_path, monkeypatch, capsys, command, message):
    """Only the UDP and UART board tops drive the chip (tests/links/udp/test_udp_sdram.py,
    tests/links/uart/test_uart_link.py), and only on a board that has one."""
    monkeypatch.chdir(tmp_path)
    name, *rest = command
    query = str(QUERIES / "bruteforce.sql")
    assert main([name, query, *rest, "--store", "sdram", "--partitions", "64"]) == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------- the ULX3S's chip

# The ULX3S's AS4C32M16SB (4 banks x 8192 rows x 1024 columns x 16 bits) with its own figures
# (tRCD and tRP 3 clocks at 100 MHz, tREFI 7.8 us) but a short power-up
ULX3S_TIMING = AS4C32M16SB.with_(power_up_ns=300.0, init_refreshes=2)


class ClearedModel(SDRAMModel):
    """The chip with every word zero until written: what the store's clearing leaves (a table
    of millions of entries is not cleared in Amaranth's simulator: ``clear=False``)."""

    def peek(self, bank: int, row: int, column: int) -> int:
        return self.memory.get((bank, row, column), 0)


def check_ulx3s(tuples, *, entries, ways, key_width, controller=None):
    """The store at the ULX3S's geometry against the table's model, with the chip's model
    (its assertions raise) on its pins; four cache lines, so buckets are written back and
    fetched again."""
    dut = make_store(
        entries=entries,
        ways=ways,
        key_width=key_width,
        geometry=ULX3S,
        timing=ULX3S_TIMING,
        clear=False,
        controller=controller,
    )
    model = ClearedModel(ULX3S, ULX3S_TIMING.cycles(CLK))
    failures: list[AssertionError] = []
    reference = TableModel(entries=entries, ways=ways, key_width=key_width)
    expected = reference.run(tuples)
    run = simulate(
        dut,
        tuples,
        cycle_limit=4000 + 300 * len(tuples),
        processes=[sdram_process(model, dut.sdram, failures=failures)],
        gap=0.1,
        stall=0.2,
    )
    if failures:
        raise failures[0]
    run.dut = dut
    assert_matches_model(run, expected)
    assert run.tuples == len(tuples) and run.drops == reference.drops
    return run, model


def test_ulx3s_direct_beyond_a_million_entries():
    """A 22-bit key indexes 2^22 entries directly (one 16-bit word each, 4M of the chip's
    32M words): keys above 2^20 land in rows the 5A-75B does not have, and equal the table's
    model through evictions, gaps and stalls; the chip's rules hold at its own figures."""
    rng = random.Random(31)
    pool = [rng.randrange(1 << 20, 1 << 22) for _ in range(12)] + [rng.randrange(1 << 20)]
    run, model = check_ulx3s(
        random_tuples(rng, bursty_keys(rng, 120, pool)), entries=1 << 22, ways=4, key_width=22
    )
    dut = run.dut
    assert dut.direct and dut.entry_words == dut.line_words == 1
    assert dut.clearing_words == 1 << 22 and dut.geometry.words == 1 << 25
    # bank, row, column of the last entry: past the 2,048 rows of 256 columns of the 5A-75B
    assert dut.address((1 << 22) - 1, 0) == (3, 1023, 1023)
    rows = {row for (_, row, _) in model.memory}
    assert max(rows) >= 256  # rows beyond the first 2^20 words were written
    assert model.counts["REFRESH"] > 0


def test_ulx3s_hashed_entries_of_three_words():
    """A 32-bit key hashed into 2^22 entries of 4 ways: an entry (valid, the key as tag,
    state: 39 bits) takes three 16-bit words, a bucket a line of twelve (16 columns), and the
    store equals the table's model."""
    rng = random.Random(32)
    keys = bursty_keys(rng, 120, rng.sample(range(1 << 32), 30))
    run, _ = check_ulx3s(random_tuples(rng, keys), entries=1 << 22, ways=4, key_width=32)
    assert not run.dut.direct
    assert (run.dut.entry_words, run.dut.line_words) == (3, 12)


def test_ulx3s_broken_trcd_fires():
    """A controller one clock short of the AS4C32M16SB's tRCD (21 ns: 3 clocks at 100 MHz)
    makes the chip's model raise naming tRCD."""
    short = ULX3S_TIMING.cycles(CLK)
    assert short.trcd == 3
    rng = random.Random(33)
    tuples = random_tuples(rng, [rng.randrange(1 << 22) for _ in range(20)])
    with pytest.raises(SDRAMTimingError) as error:
        check_ulx3s(
            tuples,
            entries=1 << 22,
            ways=4,
            key_width=22,
            controller={"cycles_override": short.with_(trcd=2)},
        )
    assert error.value.rule == "tRCD"
