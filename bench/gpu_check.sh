#!/usr/bin/env bash
# bench/gpu_check.sh: tunelab on a CUDA machine, one command: check, size, and short runs of a
# ~1B Llama-style model (random weights, built from its config) on 1 GPU at microbatch 2 and at
# the largest microbatch `tunelab size` finds, then on all GPUs with ddp and with fsdp, LoRA and
# full fine-tuning, bf16 autocast, printed as ONE markdown table; then every wait for the device
# in a tiny causal LM's step, by the line that made it (bench/loop_overhead.py --model causal).
#
#   bash bench/gpu_check.sh            # the ~1B model (hidden 2048, 16 layers, 32 heads, 8 kv
#                                      # heads, intermediate 8192, vocabulary 32000), 2048 tokens
#   bash bench/gpu_check.sh --quick    # a small model (hidden 256, 4 layers), 512 tokens, 6 steps
#   bash bench/gpu_check.sh --cpu      # the same commands on this CPU: a smoke test of the script
#   bash bench/gpu_check.sh --help
#
# Expected output format (the last lines it prints; every value in <angle brackets> is a
# PLACEHOLDER for what the run measures, not a number anyone measured):
#
#   | config | processes | strategy | method | microbatch | tokens/s total | tokens/s per rank | MFU | peak memory per rank (GiB, rank 0) | estimate (GiB, from size) |
#   |---|---|---|---|---|---|---|---|---|---|
#   | 1b | 1 | — | lora | 2 | <tok/s> | <tok/s> | <MFU %> | <GiB> | <GiB> |
#   | 1b | 1 | — | lora | <B> (largest) | <tok/s> | <tok/s> | <MFU %> | <GiB> | <GiB> |
#   | 1b | <N GPUs> | ddp | lora | 2 | <tok/s> | <tok/s / N> | <MFU %> | <GiB> | <GiB> |
#   | 1b | <N GPUs> | fsdp | full | 2 | <tok/s> | <tok/s / N> | <MFU %> | <GiB> | <GiB> (unsharded) |
#   | 1b | <N GPUs> | fsdp | lora | <not available, refused or failed>: <its error> | | | | | |
#
#   - GPU: <N> × <name>, <memory> MiB; peak dense bf16 <TFLOP/s> TFLOP/s (datasheet)
#   - check lora: <passed | FAILED> (failed items: <names | none>)
#   - size lora: estimate <GiB> GiB, measured <GiB> GiB (1 process, microbatch <B>, <L> tokens); ...
#   - MFU counts 6·N FLOPs per token for full fine-tuning and ≈4·N for LoRA ...
#
# Rows: 1 GPU (strategy —) for lora and full, at microbatch 2 and at the largest microbatch
# `tunelab size` finds (it tries microbatches until CUDA runs out of memory, holding AdamW's
# state and 5% of the free memory back, one microbatch per optimizer step, and gives its
# estimate at the microbatch found; that run does the same); with
# several GPUs also N GPUs × {ddp, fsdp} (`torchrun --standalone --nproc_per_node N`); one GPU
# skips those rows and says so. The microbatch-2 rows share one global batch: 2 microbatches
# per rank on N GPUs (2·N on one).
# MFU = FLOPs per token × tokens/s per rank / the GPU's peak dense bf16 FLOP/s: 6·N per token
# for full fine-tuning, ≈4·N for LoRA (frozen weights get no weight gradient), N without the
# input embedding; attention's own FLOPs left out (bench/gpu_table.py says how much they add).
#
# Exit codes: 0 the table was printed (a row that failed says why in it); 2 no CUDA GPU, or a
# wrong argument; 1 the set-up failed (the Python environment, building the model or the labs).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bash bench/gpu_check.sh [--quick] [--cpu] [--steps N] [--seq-len L] [--results DIR]
                               [--keep DIR] [--methods "lora full"]

tunelab on this machine's CUDA GPUs: builds a Llama-style model from its config (random
weights) and two generative labs (LoRA, full; bf16 autocast) with synthetic documents, runs
`tunelab check`, `tunelab size` and short `tunelab run`s on 1 GPU (microbatch 2, and the
largest microbatch size finds), then on all GPUs with ddp and with fsdp (torchrun), and prints
one markdown table: tokens/s (total, per rank), MFU, rank 0's peak memory, size's estimate.

  --quick        a small model (hidden 256, 4 layers, vocabulary 32000), 512 tokens, 6 steps
  --cpu          the same commands on this machine's CPU with .venv's torch: a smoke test of
                 the script (implies --quick, 3 steps; the largest microbatch is sought under
                 a 4096 MiB --memory-limit; MFU unknown)
  --steps N      optimizer steps per run (default 20; 6 with --quick)
  --seq-len L    tokens per example (default 2048; 512 with --quick)
  --results DIR  where the commands' JSON and logs go (default bench/.cache/gpu-check-TIME)
  --keep DIR     build the model and labs in DIR and keep them (default: a temporary folder,
                 removed at the end)
  --methods M    the methods to run, in order (default "lora full"; "full" alone when a
                 short lease must reach the full fine-tune's rows)
  -h, --help     this text

Python (bench/gpu_env.sh): tunelab from this tree (PYTHONPATH=src); the wheels in .whl/
installed first, with no index, where the device tool carried them (bench/gpu_wheels.sh
downloads what a lent machine's image lacks); then the first of $VENV, .venv,
$TMPDIR/tunelab-venv-cuda and python3 whose torch sees CUDA and which imports tunelab's needs;
else the Makefile's set-up (make .venv/.base: torch from the package index, a CUDA build on
Linux x86-64).

Exits 2 with "no CUDA GPU: this check needs one" where nvidia-smi or CUDA is missing.
EOF
}

QUICK=0 CPU=0 STEPS="" SEQ="" RESULTS="" KEEP="" METHODS="lora full"
while (($#)); do
    case "$1" in
    --quick) QUICK=1 ;;
    --cpu) CPU=1 QUICK=1 ;;
    --steps) STEPS="${2:?--steps needs a number}"; shift ;;
    --seq-len) SEQ="${2:?--seq-len needs a number}"; shift ;;
    --results) RESULTS="${2:?--results needs a folder}"; shift ;;
    --keep) KEEP="${2:?--keep needs a folder}"; shift ;;
    --methods) METHODS="${2:?--methods needs a list such as \"lora full\"}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

for METHOD in $METHODS; do
    case "$METHOD" in
    lora | full) ;;
    *) echo "gpu_check.sh: unknown method '$METHOD' in --methods (lora, full)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.." # the repository root

no_gpu() {
    echo "no CUDA GPU: this check needs one ($1)" >&2
    exit 2
}

# --- the GPUs -----------------------------------------------------------------------------------
if ((CPU)); then
    DEVICE=cpu NGPU=1 LIMIT=(--memory-limit 4096)
    GPUS="CPU ($(nproc) cores), $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) MiB"
    echo "--cpu: the commands run on this CPU (a smoke test of the script, not a benchmark)"
else
    DEVICE=cuda LIMIT=()
    command -v nvidia-smi >/dev/null 2>&1 || no_gpu "nvidia-smi not found"
    GPUS=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null) ||
        no_gpu "nvidia-smi failed"
    [ -n "$GPUS" ] || no_gpu "nvidia-smi lists no GPU"
    NGPU=$(printf '%s\n' "$GPUS" | grep -c .)
    echo "GPUs: $NGPU"
    nvidia-smi --query-gpu=name,memory.total --format=csv
fi

# --- the Python environment ---------------------------------------------------------------------
GPU_SCRIPT=gpu_check.sh
# shellcheck source=bench/gpu_env.sh
source bench/gpu_env.sh
echo "python: $PY ($("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'))"

# --- the model, the labs, the runs --------------------------------------------------------------
if ((CPU)); then
    CONFIG=quick SEQ="${SEQ:-512}" STEPS="${STEPS:-3}"
elif ((QUICK)); then
    CONFIG=quick SEQ="${SEQ:-512}" STEPS="${STEPS:-6}"
else
    CONFIG=1b SEQ="${SEQ:-2048}" STEPS="${STEPS:-20}"
fi
MB=2
GB=$((MB * NGPU * 2)) # 2 microbatches per rank on all GPUs; 2·N on one
RESULTS="${RESULTS:-bench/.cache/gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RESULTS"
if [ -n "$KEEP" ]; then
    WORK="$KEEP"
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/tunelab-gpu-check-XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
fi
printf '%s\n' "$GPUS" >"$RESULTS/gpus.csv"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

echo "building the $CONFIG model and labs in $WORK: $SEQ tokens, global batch $GB, microbatch" \
    "$MB, $STEPS steps; results in $RESULTS"
"$PY" bench/gpu_table.py prepare --config "$CONFIG" --out "$WORK" --seq-len "$SEQ" \
    --microbatch "$MB" --global-batch "$GB" --steps "$STEPS" >"$RESULTS/model-build.json"
cp "$WORK/model.json" "$RESULTS/model.json"

step() { # step NAME COMMAND...: stdout to NAME.json, stderr to NAME.log; a failure does not stop
    local name="$1" rc=0 start=$SECONDS
    shift
    "$@" >"$RESULTS/$name.json" 2>"$RESULTS/$name.log" || rc=$?
    echo "  $name: exit $rc, $((SECONDS - start)) s"
    return 0
}

largest() { # the largest microbatch in a `tunelab size --json` output, else 0
    "$PY" -c 'import json, sys
try:
    print(int(json.load(open(sys.argv[1]))["largest_microbatch"]["value"] or 0))
except Exception:
    print(0)' "$1"
}

TUNELAB=("$PY" -m tunelab.cli)
TORCHRUN=("$PY" -m torch.distributed.run --standalone --nproc_per_node "$NGPU")
for METHOD in $METHODS; do
    LAB="$WORK/lab-$METHOD"
    echo "$METHOD:"
    if ! "${TUNELAB[@]}" data --lab "$LAB" --json >"$RESULTS/data-$METHOD.json" \
        2>"$RESULTS/data-$METHOD.log"; then
        echo "gpu_check.sh: tunelab data failed: $(tail -n 3 "$RESULTS/data-$METHOD.json")" >&2
        exit 1
    fi
    step "check-$METHOD" "${TUNELAB[@]}" check --lab "$LAB" --device "$DEVICE" --json
    step "size-$METHOD" "${TUNELAB[@]}" size --lab "$LAB" --device "$DEVICE" --json \
        --seq-len "$SEQ" --microbatch "$MB" "${LIMIT[@]}"
    step "run-1-single-$METHOD" "${TUNELAB[@]}" run --lab "$LAB" --device "$DEVICE" --json \
        --name "gpu1-$METHOD"
    BIG=$(largest "$RESULTS/size-$METHOD.json")
    if ((BIG > MB)); then # a run at the largest microbatch size found (one per step, as tried)
        step "run-1-largest-$METHOD" "${TUNELAB[@]}" run --lab "$LAB" --device "$DEVICE" \
            --json --name "gpu1-largest-$METHOD" "training.microbatch=$BIG" \
            "training.global_batch=$BIG"
    else
        echo "  the largest microbatch size found is ${BIG:-unknown}: no run beyond microbatch $MB"
    fi
    if ((NGPU > 1)); then
        for STRATEGY in ddp fsdp; do
            step "run-$NGPU-$STRATEGY-$METHOD" "${TORCHRUN[@]}" -m tunelab.cli run --lab "$LAB" \
                --json --name "gpu$NGPU-$STRATEGY-$METHOD" "training.strategy=$STRATEGY"
        done
    fi
done
if ((NGPU == 1)); then
    echo "one GPU: the ddp and fsdp rows need several GPUs and were not run"
fi

# every wait for the device in a causal LM's step, by the line that made it (bench/README.md,
# "Every wait for the device"): CUDA's own count beside the dispatcher's (`--ops`, the count a
# CPU can make), so the one is checked against the other; under a minute
# (and the loop as it was beside it, where .before/src holds a copy: `git archive REV src | tar
# -x -C .before` before the machine is lent, so the folder travels with the working tree)
start=$SECONDS
BEFORE=()
[ -d .before/src/tunelab ] && BEFORE=(--before-src .before/src)
"$PY" bench/loop_overhead.py --device "$DEVICE" --model causal --repeats 1 --steps 30 --ops \
    "${BEFORE[@]}" >"$RESULTS/syncs.md" 2>"$RESULTS/syncs.log" ||
    echo "  syncs: failed, see $RESULTS/syncs.log"
echo "  syncs: $((SECONDS - start)) s"

echo
"$PY" bench/gpu_table.py table --results "$RESULTS"
echo
echo "Waits for the device in a tiny causal LM's step (bench/loop_overhead.py --model causal):"
sed -n '/^| tree/,$p' "$RESULTS/syncs.md"
