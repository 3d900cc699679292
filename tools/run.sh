#!/usr/bin/env bash
# Set up the project virtual environment (if needed) and run one job.
#   bash tools/run.sh demo   parse, explain and match the bundled marathon query
#   bash tools/run.sh test   lint and run the whole test suite
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.nfacep-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[test,bench,boards]"
    touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"

case "${1:-demo}" in
demo)
    mkdir -p out
    set -x
    nfacep check queries/marathon.sql
    nfacep explain queries/marathon.sql --dot out/marathon.dot
    nfacep match queries/marathon.sql --input queries/marathon.csv --output out/marathon.matches.csv
    { set +x; } 2>/dev/null
    echo "--- out/marathon.matches.csv"
    cat out/marathon.matches.csv
    ;;
test)
    bash tools/install-simulators.sh
    ruff check .
    HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci} python -m pytest -W error -q "${@:2}"
    ;;
*)
    echo "usage: bash tools/run.sh demo|test [pytest args]" >&2
    exit 2
    ;;
esac
