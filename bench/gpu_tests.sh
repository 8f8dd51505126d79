#!/usr/bin/env bash
# bench/gpu_tests.sh: tunelab's own end-to-end tests on a CUDA GPU, the paths that only a GPU
# takes and that CI (CPU only) never runs: each command of these tests trains, checks, resumes,
# exports and verifies on `cuda` (TUNELAB_DEVICE=cuda), one test at a time.
#
#   bash bench/gpu_tests.sh          # on one GPU, a few minutes
#   bash bench/gpu_tests.sh --cpu    # the same tests on this CPU: a smoke test of the script
#   bash bench/gpu_tests.sh --help
#
# What they prove there (none of it has run on a GPU before 2026-12-05):
#   - a run stopped by SIGTERM and resumed ends with an uninterrupted run's losses, predictions
#     and metrics (the checkpoint's per-device RNG state, modeling/checkpoint.py);
#   - `tunelab check`'s reload in a fresh process gives the trained model's outputs;
#   - a generative lab end to end (the loss at the targets' host-found positions,
#     modeling/loss_positions.py; batches copied from page-locked memory, modeling/transfer.py);
#   - validation during training and keep-best;
#   - export and verify, a GGUF base included.
# A test that compares two runs to the bit may fail on a GPU for the GPU's own reasons (cuBLAS
# and atomics are not bit-reproducible by default); its message says by how much, and that is
# the measurement. Exit codes: 0 every test passed; 1 one or more failed (listed); 2 no CUDA GPU
# or a wrong argument.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bash bench/gpu_tests.sh [--cpu] [--results DIR]

Runs tunelab's end-to-end tests of the GPU-only paths on CUDA (TUNELAB_DEVICE=cuda), one at a
time, and prints which passed and which failed, with each failure's message.

  --cpu          the same tests on this CPU (TUNELAB_DEVICE=cpu): a smoke test of the script
  --results DIR  where pytest's JUnit XML and log go (default bench/.cache/gpu-tests-TIME)
  -h, --help     this text

Python: as bench/gpu_check.sh finds it (bench/gpu_env.sh). pytest must import there (a lent
machine's image has it); elsewhere without a package index carry its wheels in .whl/ too.
EOF
}

CPU=0 RESULTS=""
while (($#)); do
    case "$1" in
    --cpu) CPU=1 ;;
    --results) RESULTS="${2:?--results needs a folder}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_tests.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "${BASH_SOURCE[0]}")/.." # the repository root

no_gpu() {
    echo "no CUDA GPU: these tests need one ($1)" >&2
    exit 2
}

if ((CPU)); then
    DEVICE=cpu
    echo "--cpu: the tests run on this CPU (a smoke test of the script)"
else
    DEVICE=cuda
    command -v nvidia-smi >/dev/null 2>&1 || no_gpu "nvidia-smi not found"
    nvidia-smi --query-gpu=name,memory.total --format=csv || no_gpu "nvidia-smi failed"
fi

GPU_SCRIPT=gpu_tests.sh
# shellcheck source=bench/gpu_env.sh
source bench/gpu_env.sh
if ! "$PY" -c 'import pytest' >/dev/null 2>&1; then
    echo "gpu_tests.sh: pytest does not import in $PY; without a package index carry its" \
        "wheels in .whl/ too (bench/gpu_env.sh installs what it holds) and run again" >&2
    exit 1
fi
echo "python: $PY ($("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'))"

TESTS=(
    tests/e2e/test_run_states.py::test_sigterm_then_resume_ends_like_an_uninterrupted_run
    tests/e2e/test_cli_check.py::test_check_fails_then_passes_and_run_knows
    tests/e2e/test_cli_generative.py::test_the_whole_extraction_lab
    tests/e2e/test_cli_validation.py::test_a_planted_overfit_is_warned_about_and_its_best_step_kept
    tests/e2e/test_cli_export.py::test_verify_passes_on_the_bundle_in_a_fresh_process
    tests/e2e/test_cli_export_gguf.py::test_a_generative_lora_on_a_gguf_base_exports_and_verifies
)
RESULTS="${RESULTS:-bench/.cache/gpu-tests-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RESULTS"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TUNELAB_DEVICE="$DEVICE"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

# a node id pytest cannot find makes it run nothing at all (exit 4): said first, by name
if ! "$PY" -m pytest --collect-only -q -p no:randomly -p no:cacheprovider -o addopts="" \
    "${TESTS[@]}" >"$RESULTS/collect.log" 2>&1; then
    echo "$GPU_SCRIPT: a test this script lists is not where it says (see $RESULTS/collect.log);" \
        "fix TESTS in bench/gpu_tests.sh" >&2
    exit 1
fi

start=$SECONDS
set +e
"$PY" -m pytest -q -p no:randomly -p no:cacheprovider -o addopts="" -rfE \
    --junitxml "$RESULTS/junit.xml" "${TESTS[@]}" 2>&1 | tee "$RESULTS/pytest.log"
code=${PIPESTATUS[0]}
set -e
echo
echo "${#TESTS[@]} tests on $DEVICE in $((SECONDS - start)) s (pytest exit $code); JUnit XML and" \
    "log in $RESULTS"
exit $((code == 0 ? 0 : 1))
