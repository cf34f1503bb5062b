#!/usr/bin/env bash
# The README's two commands, on a machine with nothing but Python 3.11+:
#   ./run.sh main [flags]   train the main job into runs/numbers (extra flags go to scripts/train_translation.py)
#   ./run.sh test [args]    run the tests in 2 processes (TEST_WORKERS=...; extra arguments go to pytest)
# Both first make the environment if it is missing: a virtual environment in .venv (VENV=... for another place),
# torch (TORCH="..." for another build, with pip's options: "torch --index-url URL"; default torch==2.13.0, the
# CPU build where pip is configured for one, as on the CI machine) unless it already has one, and this
# package with its dev extra (again whenever pyproject.toml changes).
set -euo pipefail
cd "$(dirname "$0")"
VENV="${VENV:-.venv}"
TORCH="${TORCH:-torch==2.13.0}"

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            echo "run.sh: needs Python 3.11 or newer as python3 (transformers 5.23 does)" >&2
            exit 2
        fi
        python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install --upgrade pip
    fi
    . "$VENV/bin/activate"
    # torch first (the project must not pull its own); TORCH is a requirement and pip's options, split at spaces
    read -r -a torch_args <<< "$TORCH"
    python -c 'import torch' 2>/dev/null || pip install "${torch_args[@]}"
    local stamp="$VENV/.hf-vanilla-transformer-installed"
    if [ ! -e "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        pip install -e ".[dev]"
        touch "$stamp"
    fi
}

case "${1:-}" in
    main) shift; setup; python scripts/train_translation.py --output_dir runs/numbers "$@" ;;
    test) shift; setup; python -m pytest -q -n "${TEST_WORKERS:-2}" --dist loadfile "$@" ;;
    *) echo "usage: ./run.sh main [train_translation.py flags] | ./run.sh test [pytest arguments]" >&2; exit 2 ;;
esac
