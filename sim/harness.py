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

__all__ = [
    "DEPTHS",
    "HARNESS_TOP",
    "MAX_SWITCHES",
    "check_depth",
    "counter_ports",
    "depth_for",
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
    """The harness's plusargs for the switches of the run ``config`` describes."""
    if not config.get("switch_count"):
        return []
    return [
        f"+nfacep_switches={run_dir / config['switches']}",
        f"+nfacep_switch_count={config['switch_count']}",
    ]


def counter_ports(sidecar: dict) -> dict[str, int]:
    """The engine's counters (name: width): its output ports besides the streams and the
    parameter registers (docs/formats.md, "The Verilog sidecar")."""
    return {
        name: p["width"]
        for name, p in sidecar["ports"].items()
        if p["dir"] == "out"
        and name != "param_values"
        and not name.startswith(("i_stream__", "o_stream__", "i_params__"))
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


def harness_verilog(sidecar: dict, depth: int, *, period_ns: int = 10) -> str:
    """The harness around the engine the sidecar describes (docs/formats.md, "The Verilog
    sidecar"): Verilog-2005, which Icarus and Verilator both take."""
    check_depth(depth)
    ports = sidecar["ports"]
    top = sidecar["top"]
    tw = sidecar["tuple"]["width"]
    rw = sidecar["record"]["width"]
    counters = counter_ports(sidecar)
    tuples_width = counters.get("tuples", 32)
    partitions = int(sidecar.get("parameters", {}).get("partitions", 256))
    drain = 2 * partitions + 256
    half_period = period_ns // 2
    counter_decls = "".join(
        f"    output wire [{w - 1}:0] {name},\n" for name, w in counters.items()
    )
    counter_conns = "".join(f"        .{name}({name}),\n" for name in counters)
    tuples_check = "1'b1" if "tuples" not in counters else f"(tuples == sent[{tuples_width - 1}:0])"
    switching = "i_params__valid" in ports
    pw = ports["i_params__payload"]["width"] if switching else 1
    vw = sidecar["runtime_parameters"]["width"] if switching else 0
    params_conns = (
        (
            "        .i_params__valid(p_valid),\n        .i_params__ready(p_ready),\n"
            "        .i_params__payload(p_payload),\n"
        )
        if switching
        else ""
    )
    # a tuple is loaded only once every switch up to it is taken
    params_gate = "(k >= switch_count || switches[k][PW-1:VW] > next_seq)" if switching else "1'b1"
    return f"""// nfacep batch harness around {top} (generated by nfacep.sim.harness)
module {HARNESS_TOP} (
`ifdef NFACEP_EXTERNAL_CLOCK
    input wire clk,
`else
    output reg clk,
`endif
    input wire rst,
    input wire load,
    input wire go,
    input wire [31:0] count,
    output reg done,
{counter_decls}    output reg [63:0] cycle,
    output reg [63:0] first_in,
    output reg [63:0] last_in,
    output reg [63:0] last_out,
    output reg [63:0] sent,
    output reg [63:0] taken
);
    localparam TW = {tw};
    localparam RW = {rw};
    localparam DEPTH = {depth};
    localparam DRAIN = {drain};
    localparam PW = {pw};
    localparam VW = {vw};

    // the clock runs in the simulator, not in Python: cocotb wakes only for the edges it
    // waits for (reset, load, go, done), not for every cycle; the native harness
    // (nfacep.sim.native) defines NFACEP_EXTERNAL_CLOCK and clocks it from C++
`ifndef NFACEP_EXTERNAL_CLOCK
    initial clk = 0;
    always #{half_period} clk = ~clk;
`endif

    // (the native harness writes the batch into it from C++, no file between)
    reg [TW-1:0] mem [0:DEPTH-1] /*verilator public_flat_rw*/;
    reg [8*4096-1:0] tuples_path;
    reg [8*4096-1:0] records_path;
    reg [8*16-1:0] traffic;
    reg full;
    integer fd;
    integer seed;
    // the parameter switches (an engine with runtime parameters)
    reg [PW-1:0] switches [0:{MAX_SWITCHES - 1}];
    reg [8*4096-1:0] switches_path;
    integer switch_count;
    reg [31:0] k;
    reg [63:0] next_seq;
    reg p_valid;
    reg [PW-1:0] p_payload;
    wire p_ready;
    initial begin
        if (!$value$plusargs("nfacep_switch_count=%d", switch_count)) switch_count = 0;
        if (switch_count > 0) begin
            if (!$value$plusargs("nfacep_switches=%s", switches_path))
                switches_path = "switches.hex";
            $readmemh(switches_path, switches);
        end
    end
    initial begin
        if (!$value$plusargs("nfacep_tuples=%s", tuples_path)) tuples_path = "batch.hex";
        if (!$value$plusargs("nfacep_records=%s", records_path)) records_path = "records.hex";
        if (!$value$plusargs("nfacep_seed=%d", seed)) seed = 0;
        if (!$value$plusargs("nfacep_traffic=%s", traffic)) traffic = "random";
        full = (traffic == "full");
        fd = $fopen(records_path, "w");
    end

    // the engine
    reg i_valid;
    reg [TW-1:0] i_payload;
    wire i_ready;
    wire o_valid;
    wire [RW-1:0] o_payload;
    reg o_ready;
    {top} engine (
        .clk(clk),
        .rst(rst),
        .i_stream__valid(i_valid),
        .i_stream__ready(i_ready),
        .i_stream__payload(i_payload),
        .o_stream__valid(o_valid),
        .o_stream__ready(o_ready),
{params_conns}{counter_conns}        .o_stream__payload(o_payload)
    );

    // xorshift32 generators for the gaps (input) and the stalls (output)
    reg [31:0] rng_in;
    reg [31:0] rng_out;
    function [31:0] xorshift(input [31:0] x);
        reg [31:0] y;
        begin
            y = x ^ (x << 13);
            y = y ^ (y >> 17);
            xorshift = y ^ (y << 5);
        end
    endfunction

    reg [31:0] index;
    reg running;
    reg [2:0] gap;
    reg [6:0] stall;
    reg [31:0] quiet;
    reg started;

    always @(posedge clk) begin
`ifndef NFACEP_DIRECT_LOAD
        if (load) $readmemh(tuples_path, mem);
`endif
    end

    always @(posedge clk) begin
        if (rst) begin
            i_valid <= 0;
            i_payload <= 0;
            o_ready <= 0;
            rng_in <= 32'h9e3779b9 ^ seed;
            rng_out <= 32'h7f4a7c15 ^ (seed * 3 + 1);
            index <= 0;
            running <= 0;
            done <= 0;
            gap <= 0;
            stall <= 0;
            quiet <= 0;
            cycle <= 0;
            first_in <= 0;
            last_in <= 0;
            last_out <= 0;
            sent <= 0;
            taken <= 0;
            started <= 0;
            k <= 0;
            next_seq <= 0;
            p_valid <= 0;
            p_payload <= 0;
        end else begin
            cycle <= cycle + 1;
            // the switches, in order, each offered until taken
            if (!p_valid || p_ready) begin
                if (p_valid) k <= k + 1;
                if ((p_valid ? k + 1 : k) < switch_count) begin
                    p_valid <= 1;
                    p_payload <= switches[p_valid ? k + 1 : k];
                end else begin
                    p_valid <= 0;
                end
            end
            rng_in <= xorshift(rng_in);
            rng_out <= xorshift(rng_out);
            if (go) begin
                running <= 1;
                done <= 0;
                index <= 0;
            end
            // input: a tuple stays offered until taken; gaps only between tuples
            if (i_valid && i_ready) begin
                sent <= sent + 1;
                last_in <= cycle;
                if (!started) begin
                    first_in <= cycle;
                    started <= 1;
                end
            end
            if (!i_valid || i_ready) begin
                if (gap != 0) begin
                    gap <= gap - 1;
                    i_valid <= 0;
                end else if (running && !go && index < count && {params_gate}) begin
                    if (!full && rng_in[3:0] < 5) begin
                        gap <= rng_in[5:4];
                        i_valid <= 0;
                    end else begin
                        i_valid <= 1;
                        i_payload <= mem[index[{max(depth - 1, 1).bit_length() - 1}:0]];
                        index <= index + 1;
                        next_seq <= next_seq + 1;
                    end
                end else begin
                    i_valid <= 0;
                end
            end
            // output: ready about 70% of cycles, and stalls of up to 64 cycles
            if (full) begin
                o_ready <= 1;
            end else if (stall != 0) begin
                stall <= stall - 1;
                o_ready <= 0;
            end else if (rng_out[10:4] == 0) begin
                stall <= {{1'b0, rng_out[16:11]}};
                o_ready <= 0;
            end else begin
                o_ready <= rng_out[3:0] < 11;
            end
            if (o_valid && o_ready) begin
                $fwrite(fd, "%h\\n", o_payload);
                taken <= taken + 1;
                last_out <= cycle;
            end
            if (o_valid)
                quiet <= 0;
            else if (o_ready)
                quiet <= quiet + 1;
            if (running && !go && index >= count && !i_valid && quiet >= DRAIN
                    && {tuples_check}) begin
                running <= 0;
                done <= 1;
                $fflush(fd);
            end
        end
    end
endmodule
"""
