# bench/gpu_env.sh: the Python environment of the GPU scripts (bench/gpu_check.sh,
# bench/gpu_tests.sh), sourced by each after `cd` to the repository root. tunelab is imported
# from this tree (PYTHONPATH=src: no install, no build). Wheels in .whl/ (bench/gpu_wheels.sh
# downloads them where pip works; the device tool carries the folder) are installed first,
# with no index and no build, into a folder put on PYTHONPATH: what a lent machine's image
# lacks (pydantic, jsonschema, datasketch, gguf) and the transformers and peft tunelab was
# tested on. PY is then the first of $VENV, .venv, $TMPDIR/tunelab-venv-cuda and the PATH's
# python3 whose torch sees CUDA (any torch with CPU=1) and which imports tunelab's needs;
# where none does but python3 has CUDA torch, the missing modules are named with the wheels
# command; with no CUDA torch at all, the Makefile's set-up (make .venv/.base: torch from the
# package index, a CUDA build on Linux x86-64). The caller defines no_gpu() and sets CPU (1: a
# smoke test on this CPU) and GPU_SCRIPT (its name, for messages).

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
NEEDS="torch datasketch jsonschema peft pydantic transformers yaml gguf tunelab.cli"

if compgen -G ".whl/*.whl" >/dev/null; then
    SITE="${TMPDIR:-/tmp}/tunelab-site"
    echo "installing the carried wheels (.whl/) into $SITE"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" .whl/*.whl || {
        echo "$GPU_SCRIPT: python3 could not install the wheels in .whl/" >&2
        exit 1
    }
    export PYTHONPATH="$SITE:$PYTHONPATH"
fi

missing() { # the modules of NEEDS that python $1 cannot import, space-separated
    "$1" -c '
import importlib, sys
gone = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        gone.append(name)
print(" ".join(gone))' $NEEDS 2>/dev/null
}

usable() { # a python which imports tunelab and its needs, and whose torch sees CUDA
    [ -x "$1" ] && [ -z "$(missing "$1")" ] && CPU="$CPU" "$1" -c '
import os, sys, torch
sys.exit(0 if os.environ["CPU"] == "1" or torch.cuda.is_available() else 1)' >/dev/null 2>&1
}

PY=""
FALLBACK="${TMPDIR:-/tmp}/tunelab-venv-cuda"
SYSTEM="$(command -v python3 || true)"
for candidate in ${VENV:+"$VENV/bin/python"} .venv/bin/python "$FALLBACK/bin/python" \
    ${SYSTEM:+"$SYSTEM"}; do
    if usable "$candidate"; then PY="$candidate"; break; fi
done
if [ -z "$PY" ] && ((CPU)); then
    echo "$GPU_SCRIPT --cpu: no .venv that imports tunelab; run make first" >&2
    exit 1
fi
if [ -z "$PY" ]; then
    if [ -n "$SYSTEM" ] && "$SYSTEM" -c 'import sys, torch
sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
        echo "$GPU_SCRIPT: $SYSTEM has CUDA torch but cannot import: $(missing "$SYSTEM");" \
            "carry them as wheels: run bash bench/gpu_wheels.sh where pip works, and name .whl" \
            "in what the call carries" >&2
        exit 1
    fi
    NEW="${VENV:-.venv}"
    [ -e "$NEW" ] && NEW="$FALLBACK" # never rebuild someone's existing venv
    echo "no CUDA torch found: the Makefile's set-up into $NEW (make $NEW/.base, from the" \
        "package index)"
    make VENV="$NEW" "$NEW/.base" || {
        echo "$GPU_SCRIPT: the set-up of $NEW failed (no package index here?)" >&2
        exit 1
    }
    PY="$NEW/bin/python"
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
        no_gpu "the torch in $NEW cannot use CUDA"
    usable "$PY" || {
        echo "$GPU_SCRIPT: $PY cannot import: $(missing "$PY")" >&2
        exit 1
    }
fi
