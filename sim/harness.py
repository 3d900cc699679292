"""The batch harness: a Verilog testbench top around the emitted engine, so that a simulation
needs no Python per clock cycle.

The harness (module ``nfacep_batch``) holds a memory of ``depth`` packed tuples. The cocotb
test (:mod:`nfacep.sim.batch_testbench`) writes a batch of at most ``depth`` tuples to a file
(one hexadecimal word a line), pulses ``load`` (the harness reads the file with ``$readmemh``),
sets ``count`` and pulses ``go``, then waits for ``done``: it wakes once per batch. Meanwhile
the harness streams the batch into the engine and appends every record the engine emits to the
records file (``$fwrite``, one hexadecimal word a line), with seeded pseudo-random input gaps
and output stalls from two xorshift generators (``+nfacep_traffic=full`` turns them off).
The harness makes its own clock (period ``period_ns``, in the runner's 1 ns time unit), so
no cycle costs a call into Python; with ``NFACEP_EXTERNAL_CLOCK`` defined, ``clk`` is an input
instead, which the native harness (:mod:`nfacep.sim.native`, Verilator and C++, no Python at
all while it runs) drives. ``done`` rises when the batch is sent, the engine counted
every tuple, and ``o_stream`` stayed quiet with ``ready`` high for ``drain`` cycles (longer
than any record takes); ``go`` clears it. The engine keeps its state from batch to batch:
one stream, split only for memory.

Plusargs: ``+nfacep_tuples=F`` (the batch file), ``+nfacep_records=F``, ``+nfacep_seed=S``,
``+nfacep_traffic=random|full``; for an engine with runtime parameters also
``+nfacep_switches=F`` and ``+nfacep_switch_count=N``: the parameter switches (each the word
``i_params`` takes, one hexadecimal word a line, at most :data:`MAX_SWITCHES`), which the
harness writes in order, each before the tuple it applies to (a tuple waits until every
switch up to it is taken). Statistics (cycles since reset, first and last transfer on
each stream, tuples sent, records taken) are output ports, read once at the end.

The traffic is the per-cycle testbench's (:class:`nfacep.sim.testbench.Traffic`) in kind, not
in detail: about 30% of cycles idle between tuples (1 to 4), ``ready`` high about 70% of
cycles, and stalls of up to 64 cycles starting about once in 128 cycles.
"""

from __future__ import annotations

from nfacep.errors import UsageError

from .template import fill

__all__ = [
    "DEPTHS",
    "HARNESS_TOP",
    "MAX_SWITCHES",
    "check_depth",
    "counter_ports",
    "depth_for",
    "drain_cycles",
    "harness_verilog",
    "switch_plusargs",
]

HARNESS_TOP = "nfacep_batch"
#: Batch memory sizes: a run uses the smallest that holds its input, or the largest and
#: several batches; each is one build per engine.
DEPTHS = (1 << 12, 1 << 16, 1 << 20)
#: Parameter switches a simulation can hold.
MAX_SWITCHES = 1 << 12


def switch_plusargs(config: dict, run_dir) -> list[str]:
    """The harness's plusargs for the switches of the run ``config`` describes, and for the
    configuration image a programmable engine takes first."""
    args = []
    if config.get("switch_count"):
        args += [
            f"+nfacep_switches={run_dir / config['switches']}",
            f"+nfacep_switch_count={config['switch_count']}",
        ]
    if config.get("image_bytes"):
        args += [
            f"+nfacep_image={run_dir / config['image']}",
            f"+nfacep_image_bytes={config['image_bytes']}",
        ]
    return args


def counter_ports(sidecar: dict) -> dict[str, int]:
    """The engine's counters (name: width): its output ports besides the streams, the
    parameter registers and the SDRAM's pins, and a programmable engine's configuration port,
    ``configured`` and ``checking`` flags and ``image`` fingerprint (docs/formats.md, "The
    Verilog sidecar")."""
    return {
        name: p["width"]
        for name, p in sidecar["ports"].items()
        if p["dir"] == "out"
        and name not in ("param_values", "configured", "checking", "image")
        and not name.startswith(("i_stream__", "o_stream__", "i_params__", "sdram__", "i_config__"))
    }


def depth_for(n: int) -> int:
    """The batch memory depth for an input of ``n`` tuples."""
    return next((d for d in DEPTHS if n <= d), DEPTHS[-1])


def check_depth(depth: int | None) -> None:
    """UsageError unless ``depth`` is None or a power of two from 16 to ``2**24``."""
    if depth is None:
        return
    if (
        not isinstance(depth, int)
        or isinstance(depth, bool)
        or not 16 <= depth <= 1 << 24
        or depth & (depth - 1)
    ):
        raise UsageError(
            f"the batch depth must be a power of two from 16 to {1 << 24}, not {depth!r}"
        )


def drain_cycles(sidecar: dict) -> int:
    """Cycles ``o_stream`` must stay quiet (``ready`` high) before a batch is done: longer than
    any record of the engine the sidecar describes takes after its tuple (the partitioner's
    swap pipeline, ``partitions`` + 2 cycles, plus the decoder, FIFO and output stages,
    generously). With ``--store sdram`` (the sidecar's ``sdram``) a tuple may first wait for
    the chip's power-up and the store's clearing of every word it uses (a word a clock or
    so: two allowed), and then for the fetches queued before it, each with a refresh, a
    write-back and a fetch: 4,096 clocks more. With the block-RAM table (the sidecar's
    ``table``) a tuple may wait for the clearing sweep after the reset, ``rows`` cycles, then
    takes the table's ``latency``: 256 cycles more for the decoder, FIFO and output stages (a
    sidecar without ``table`` or ``sdram`` gets the swap pipeline's bound)."""
    if "sdram" in sidecar:
        sdram = sidecar["sdram"]
        return int(sdram["power_up_cycles"]) + 2 * int(sdram["clearing_words"]) + 4096
    if "table" in sidecar:
        table = sidecar["table"]
        return int(table["rows"]) + int(table["latency"]) + 256
    return 2 * int(sidecar.get("parameters", {}).get("partitions", 256)) + 256


def harness_verilog(sidecar: dict, depth: int, *, period_ns: int = 10) -> str:
    """The harness around the engine the sidecar describes (docs/formats.md, "The Verilog
    sidecar"): Verilog-2005, which Icarus and Verilator both take (``templates/harness.v``)."""
    check_depth(depth)
    ports = sidecar["ports"]
    counters = counter_ports(sidecar)
    tuples_width = counters.get("tuples", 32)
    switching = "i_params__valid" in ports
    params_conns = (
        (
            "        .i_params__valid(p_valid),\n        .i_params__ready(p_ready),\n"
            "        .i_params__payload(p_payload),\n"
        )
        if switching
        else ""
    )
    configurable = "i_config__valid" in ports
    config_conns = (
        (
            "        .i_config__valid(c_valid),\n        .i_config__ready(c_ready),\n"
            "        .i_config__payload(c_payload),\n"
        )
        if configurable
        else ""
    )
    # a load: the tuple number, the engine's fingerprint, the body, a CRC-32
    image_bytes = sidecar["configuration"]["load_bytes"] if configurable else 1
    return fill(
        "harness.v",
        config_conns=config_conns,
        last_image_byte=image_bytes - 1,
        harness_top=HARNESS_TOP,
        top=sidecar["top"],
        tw=sidecar["tuple"]["width"],
        rw=sidecar["record"]["width"],
        depth=depth,
        drain=drain_cycles(sidecar),
        pw=ports["i_params__payload"]["width"] if switching else 1,
        vw=sidecar["runtime_parameters"]["width"] if switching else 0,
        half_period=period_ns // 2,
        last_switch=MAX_SWITCHES - 1,
        index_msb=max(depth - 1, 1).bit_length() - 1,
        counter_decls="".join(
            f"    output wire [{w - 1}:0] {name},\n" for name, w in counters.items()
        ),
        counter_conns="".join(f"        .{name}({name}),\n" for name in counters),
        params_conns=params_conns,
        # a tuple is loaded only once every switch up to it is taken
        params_gate=(
            "(k >= switch_count || switches[k][PW-1:VW] > next_seq)" if switching else "1'b1"
        ),
        tuples_check=(
            "1'b1" if "tuples" not in counters else f"(tuples == sent[{tuples_width - 1}:0])"
        ),
    )
