"""The generated code's templates (``sim/templates/``) and their one fill function."""

import os

import pytest

from nfacep.sim import harness, native
from nfacep.sim.template import TEMPLATES, fill

SIDECAR = {
    "top": "nfacep_engine",
    "tuple": {"width": 70},
    "record": {"width": 40},
    "parameters": {"partitions": 16},
    "ports": {
        "i_stream__payload": {"dir": "in", "width": 70},
        "o_stream__payload": {"dir": "out", "width": 40},
        "tuples": {"dir": "out", "width": 32},
        "drops": {"dir": "out", "width": 32},
    },
}


def test_fill_wants_exactly_the_templates_fields(tmp_path):
    fields = dict.fromkeys(
        ["harness_top", "reset_cycles", "words", "store", "drain", "counter_lines"], 1
    )
    assert fill("native_main.cpp", **fields)
    with pytest.raises(ValueError, match="fields"):
        fill("native_main.cpp", **{k: v for k, v in fields.items() if k != "drain"})
    with pytest.raises(ValueError, match="fields"):
        fill("native_main.cpp", **fields, extra=1)


def test_only_braced_fields_are_filled():
    """Verilog's system tasks (``$readmemh``) and every brace stay text."""
    text = harness.harness_verilog(SIDECAR, 64)
    assert "${" not in text and "$readmemh(tuples_path, mem);" in text
    assert "stall <= {1'b0, rng_out[16:11]};" in text
    assert "localparam DRAIN = 288;" in text  # drain_cycles: 2 * 16 + 256
    assert "output wire [31:0] tuples,\n    output wire [31:0] drops,\n" in text
    main = native.main_cpp(SIDECAR)
    assert "${" not in main and "20 * 288ULL" in main
    assert "for (int w = 0; w < 3; ++w) {" in main  # 70 bits: three 32-bit words
    assert {p.name for p in TEMPLATES.iterdir()} == {
        "harness.v",
        "native_main.cpp",
        "rtl_board.cpp",
    }


def test_drain_cycles_grow_with_the_partitions():
    assert harness.drain_cycles(SIDECAR) == 2 * 16 + 256
    assert harness.drain_cycles({}) == 2 * 256 + 256


def test_verilator_models_at_o0_build_as_one_file_unless_the_user_says_otherwise(monkeypatch):
    """``make_flags``: at -O0 a model is one C++ file without precompiled headers
    (``VM_PARALLEL_BUILDS=0``); at other levels Verilator's own split stays, and a value the
    user already put in ``MAKEFLAGS`` wins."""
    from nfacep.sim.build import make_flags

    def flags(opt, before=None):
        if before is None:
            monkeypatch.delenv("MAKEFLAGS", raising=False)
        else:
            monkeypatch.setenv("MAKEFLAGS", before)
        with make_flags("verilator", opt=opt):
            return os.environ["MAKEFLAGS"].split()

    assert "VM_PARALLEL_BUILDS=0" in flags("-O0")
    assert not any(f.startswith("VM_PARALLEL_BUILDS") for f in flags("-O2"))
    kept = flags("-O0", "VM_PARALLEL_BUILDS=1")
    assert "VM_PARALLEL_BUILDS=1" in kept and "VM_PARALLEL_BUILDS=0" not in kept
    assert "OPT_FAST=-O0" in flags("-O0")
