# bench/gpu_env.sh: the Python environment of the GPU scripts (bench/gpu_check.sh,
# bench/gpu_tests.sh), sourced by each after `cd` to the repository root. It sets PY: the first of
# $VENV, .venv and $TMPDIR/tunelab-venv-cuda whose torch sees CUDA (any torch with CPU=1) and
# imports tunelab; else a new venv that reuses the machine's own CUDA torch
# (--system-site-packages) and installs tunelab into it (pip install -e .; from wheels in .whl/
# when that folder holds some); else the Makefile's set-up (make .venv/.base). The caller
# defines no_gpu() and sets CPU (1: a smoke test on this CPU) and GPU_SCRIPT (its name, for
# messages).

usable() { # a python which imports tunelab and its dependencies, and whose torch sees CUDA
    [ -x "$1" ] && CPU="$CPU" "$1" -c '
import os, sys, torch
import datasketch, jsonschema, peft, pydantic, transformers, yaml, tunelab.cli
sys.exit(0 if os.environ["CPU"] == "1" or torch.cuda.is_available() else 1)' >/dev/null 2>&1
}

PY=""
FALLBACK="${TMPDIR:-/tmp}/tunelab-venv-cuda"
for v in ${VENV:+"$VENV"} .venv "$FALLBACK"; do
    if usable "$v/bin/python"; then PY="$v/bin/python"; break; fi
done
if [ -z "$PY" ] && ((CPU)); then
    echo "$GPU_SCRIPT --cpu: no .venv that imports tunelab; run make first" >&2
    exit 1
fi
if [ -z "$PY" ]; then
    NEW="${VENV:-.venv}"
    [ -e "$NEW" ] && NEW="$FALLBACK" # never rebuild someone's existing venv
    if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
        echo "creating $NEW with the machine's own CUDA torch (--system-site-packages)"
        python3 -m venv --system-site-packages "$NEW"
        PIP=("$NEW/bin/python" -m pip install -q --no-build-isolation -e .)
        if compgen -G ".whl/*.whl" >/dev/null; then # offline first, from the carried wheels
            PIP+=(--find-links .whl)
            "${PIP[@]}" --no-index || "${PIP[@]}" || PIP_FAILED=1
        else
            "${PIP[@]}" || PIP_FAILED=1
        fi
        if ((${PIP_FAILED:-0})); then
            echo "$GPU_SCRIPT: could not install tunelab's dependencies into $NEW; without" \
                "a package index put their wheels in .whl/ (pip download NAME -d .whl) and" \
                "run again" >&2
            exit 1
        fi
    else
        echo "no CUDA torch found: the Makefile's set-up into $NEW (make $NEW/.base)"
        make VENV="$NEW" "$NEW/.base"
    fi
    PY="$NEW/bin/python"
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
        no_gpu "the torch in $NEW cannot use CUDA"
    usable "$PY" || { echo "$GPU_SCRIPT: $PY cannot import tunelab" >&2; exit 1; }
fi
