"""`tunelab size`: a full training step measured beside the estimate from the model's shape.

For the spec's model, method, precision, a representative length (the 95th percentile of the
rendered train split) and microbatch, each configuration runs in a fresh process
(`tunelab.stages.size.probe`) so no measurement sees another's memory: the plain step, gradient
accumulation alone, activation checkpointing alone, then both. Beside them: the estimate
(`tunelab.stages.size.estimate`) with its error, a check that accumulated microbatches give the
gradient of one large batch under train.py's loss normalisation, the largest microbatch that
fits a memory budget, and the advice (microbatch x accumulation x processes) for the spec's
global batch. The result is saved as `.tunelab/sizing/<data version>-<spec hash>.json`.

With ``nproc`` > 1 (``--nproc N --strategy ddp|fsdp``) the step is measured per rank in N real
processes under torchrun instead, beside a per-rank estimate (`tunelab.stages.size.processes`,
`tunelab.stages.size.ranks`), and the advice splits the global batch over the N processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from tunelab.core.digest import sha256_json
from tunelab.core.env import run_child
from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.layout import SIZING, SIZING_SCRATCH
from tunelab.core.store import now
from tunelab.modeling.model import apply_method, load_tokenizer
from tunelab.modeling.render import make_renderer
from tunelab.stages.size import estimate as est
from tunelab.stages.size.during import During
from tunelab.stages.size.launch import SizingError, probe_folder
from tunelab.stages.size.lengths import measured_lengths
from tunelab.stages.size.model_folder import model_folder
from tunelab.stages.size.one_process import MIB, Probing, mb_of, measure_one_process
from tunelab.stages.size.processes import measure_processes, processes_record, run_rank_probes
from tunelab.stages.size.ranks import fsdp_units, per_rank_split
from tunelab.stages.size.shape import Shape, Trainables, describe, shape_dict
from tunelab.training.precision import resolve as resolve_precision
from tunelab.training.step import LOSS_NORMALISATION

PROBE_TIMEOUT_S = 3600
SCRATCH = Path(SIZING_SCRATCH)
"""Where, under the lab's store, each probe process keeps its files while it runs."""


# --- the pieces -----------------------------------------------------------------------------------


def model_facts(
    model_dir: Path, kind: str, dtype: str, method, labels: list[str], trust_remote_code=False
) -> tuple[Shape, Trainables]:
    """The shape and what trains, from the model built on the meta device (no memory)."""
    model = meta_model(model_dir, kind, dtype, method, labels, trust_remote_code)
    return describe(model, kind, len(labels))


def meta_model(
    model_dir: Path, kind: str, dtype: str, method, labels: list[str], trust_remote_code=False
):
    """The model as training builds it (method applied), on the meta device (no memory)."""
    from peft import TaskType
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    from tunelab.modeling.model import DTYPES

    config = AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    if kind == "encoder":
        config.num_labels = len(labels)
        auto, task = AutoModelForSequenceClassification, TaskType.SEQ_CLS
    else:
        auto, task = AutoModelForCausalLM, TaskType.CAUSAL_LM
    with torch.device("meta"):
        model = auto.from_config(config, dtype=DTYPES[dtype], trust_remote_code=trust_remote_code)
    model, _ = apply_method(model, method, task)
    return model


def run_probe(
    args: dict[str, Any], timeout: float = PROBE_TIMEOUT_S, scratch: Path | None = None
) -> dict[str, Any]:
    """Run one configuration in a fresh `python -m tunelab.stages.size.probe` and read its result.
    A process the kernel killed (out of memory) comes back as {"oom": True, "error": ...}.

    The probe's files (its arguments, its result, and the copies transformers makes of a
    model's remote code) go into a folder under `scratch`, removed when the probe ends; `tunelab
    size` passes the lab's `.tunelab/sizing/scratch` (SCRATCH), so nothing is written outside
    the lab. Without `scratch` (a benchmark outside any lab) the folder is a system temporary
    one."""
    with probe_folder(args, scratch, "probe-") as folder:
        cmd = [sys.executable, "-m", "tunelab.stages.size.probe", folder.payload]
        proc = run_child(cmd, capture_output=True, text=True, timeout=timeout, env=folder.env)
        if folder.out.exists():
            result = json.loads(folder.out.read_text())
        elif proc.returncode < 0:
            result = {"error": f"killed by signal {-proc.returncode}", "oom": True}
        else:
            result = {"error": proc.stderr.strip()[-2000:] or f"exit {proc.returncode}"}
    if "error" in result and not result.get("oom"):
        raise SizingError(f"the sizing probe failed: {result['error']}")
    return result


def spec_hash(spec) -> str:
    return sha256_json(spec.to_dict())[:12]


# --- the stage ------------------------------------------------------------------------------------


def run_size(
    lab: Lab,
    seq_len: int | None = None,
    microbatch: int | None = None,
    memory_limit_mb: float | None = None,
    console=None,
    nproc: int = 1,
    strategy: str | None = None,
) -> dict:
    """Measure and estimate one training step of this lab; save and return the record.
    `nproc` > 1: one rank's step among `nproc` processes under `strategy` (default: the spec's
    training.strategy), refused unless nproc × microbatch divides the global batch."""
    spec, device = lab.spec, lab.device.type
    mb = microbatch or spec.training.microbatch
    strategy = strategy or spec.training.strategy
    if nproc < 1:
        raise TunelabError(f"--nproc must be at least 1, not {nproc}")
    if nproc > 1:  # refused before any model loads
        per_rank_split(spec.training.global_batch, nproc, mb)
        if device == "cuda" and nproc > torch.cuda.device_count():
            raise TunelabError(
                f"--nproc {nproc} needs a GPU per process; this machine has "
                f"{torch.cuda.device_count()}"
            )
    with model_folder(lab, lab.data_version, lab.store.root / SCRATCH) as model_dir:
        return _measured(lab, model_dir, seq_len, mb, memory_limit_mb, console, nproc, strategy)


def _measured(
    lab: Lab, model_dir: Path, seq_len, mb: int, memory_limit_mb, console, nproc, strategy
) -> dict:
    """`run_size` on the model in `model_dir`, once its arguments are accepted."""
    spec, store, device = lab.spec, lab.store, lab.device.type
    precision, precision_choice = resolve_precision(spec.training.precision, lab.device)
    version = lab.data_version
    labels = store.data_manifest(version)["labels"]
    renderer = make_renderer(spec, load_tokenizer(spec.model, lab.path, version), labels, lab.path)
    train_set, _ = renderer.training(store.read_split(version, "train"))
    lengths = measured_lengths(train_set, seq_len, spec.model.max_length)
    seq = lengths["seq_len"]["value"]
    targets = (lengths["target_tokens"] or {}).get("value")
    meta = meta_model(
        model_dir,
        spec.model_kind,
        spec.model.dtype,
        spec.method,
        labels,
        spec.model.trust_remote_code,
    )
    shape, tr = describe(meta, spec.model_kind, len(labels))
    during = During.of(spec)  # keep best's copy and the validation pass, measured with the step
    base = _probe_args(lab, model_dir, len(labels), precision, seq, targets, mb, during)

    def say(text: str) -> None:
        if console is not None:
            console.print(f"[dim]size:[/] {text}")

    def probe(args: dict[str, Any]) -> dict[str, Any]:  # its files stay in the lab's store
        return run_probe(args, scratch=store.root / SCRATCH)

    def estimate_mb(b: int, acc: int = 1, ckpt: bool = False, overhead: float = 0.0) -> dict:
        e = est.estimate(
            shape, tr, b, seq, ckpt, acc, int(overhead * MIB), device, precision, targets, during
        )
        return e | {"peak_mb": mb_of(e["peak_bytes"])}

    common = {
        "data_version": version,
        "spec_hash": spec_hash(spec),
        "device": device,
        "model": {
            "path": None if spec.model.scratch else str(model_dir),  # a scratch model: model.arch
            "init": spec.model.init,
            "dtype": spec.model.dtype,
            "model_kind": spec.model_kind,
        },
        "method": spec.method.type,
        "precision": precision,
        "precision_choice": precision_choice,
        **lengths,  # seq_len, target_tokens
        "microbatch": mb,
        "what_if": _what_if(spec, seq_len, mb),
        "allocator": _allocator(device),
        "loss_normalisation": LOSS_NORMALISATION,
        "model_shape": shape_dict(est.under_autocast(shape, precision), tr),  # as counted
    }
    if nproc > 1:

        def probe_ranks(args: dict[str, Any], n: int) -> dict[str, Any]:
            return run_rank_probes(args, n, PROBE_TIMEOUT_S, store.root / SCRATCH)

        facts = (shape, tr, fsdp_units(meta))
        batch = spec.training.global_batch
        ranks = measure_processes(
            base, facts, nproc, strategy, batch, memory_limit_mb, say, probe_ranks
        )
        result = common | processes_record(ranks, batch, seq)
        largest = ranks["largest_microbatch"]["value"]
        return _save(store, result, seq, mb, ranks["estimate"]["peak_mb"], largest)

    k = min(4, max(2, spec.training.accumulation))  # 2 shows the effect; time grows with k
    probing = Probing(base, probe, estimate_mb, device, mb, seq, k, say)
    result = common | measure_one_process(
        probing,
        train_set,
        during,
        precision,
        spec.model.dtype,
        spec.training.global_batch,
        memory_limit_mb,
    )
    return _save(
        store, result, seq, mb, result["estimate"]["peak_mb"], result["largest_microbatch"]["value"]
    )


def _probe_args(
    lab: Lab, model_dir: Path, num_labels: int, precision: str, seq: int, targets, mb: int, during
) -> dict[str, Any]:
    """The arguments every probe process starts from: the model as the run builds it, the
    optimizer's settings, the device, the length and microbatch, two steps; each probe adds its
    own (accumulation, checkpointing, a mode)."""
    spec = lab.spec
    base = {
        "model_dir": str(model_dir),
        "model_type": _model_type(model_dir),
        "kind": spec.model_kind,
        "task": spec.task.type,
        "num_labels": num_labels,
        "dtype": spec.model.dtype,
        "trust_remote_code": spec.model.trust_remote_code,
        "method": spec.method.model_dump(),
        "precision": precision,
        "lr": spec.training.lr,
        "weight_decay": spec.training.weight_decay,
        "max_grad_norm": spec.training.max_grad_norm,
        "seed": spec.training.seed,
        "device": str(lab.device),  # the GPU asked for (`cuda:1`), not the first one
        "seq_len": seq,
        "targets": targets,
        "microbatch": mb,
        "steps": 2,
        "packed": spec.task.boundaries if spec.task.type == "pretrain" else None,
    }
    return base | (during.as_dict() if during else {})


def _what_if(spec, seq_len: int | None, mb: int) -> dict | None:
    """What `--seq-len` and `--microbatch` set apart from the spec's own step (a length given,
    a microbatch not the spec's), or None: a what-if is kept beside the spec's measurement,
    never in its place, and `plan` builds on the spec's own where there is one."""
    what_if = {"seq_len": seq_len} if seq_len else {}
    if mb != spec.training.microbatch:
        what_if["microbatch"] = mb
    return what_if or None


def _save(store, result: dict, seq: int, mb: int, estimated_mb: float, largest: int) -> dict:
    """Write the record under `.tunelab/sizing/` (one file per data version and spec, per
    strategy × processes with --nproc, and per what-if length and microbatch) and log the
    event."""
    p, what_if = result.get("processes"), result.get("what_if") or {}
    tail = f"-{p['strategy']}{p['nproc']}" if p else ""
    tail += "".join(f"-{key.replace('_', '')}{value}" for key, value in what_if.items())
    name = f"{result['data_version']}-{result['spec_hash']}{tail}.json"
    path = store.path(SIZING, name)
    result |= {"created": now(), "file": str(path.relative_to(store.lab))}
    store.save(
        path,
        result,
        "size",
        seq_len=seq,
        microbatch=mb,
        measured_peak_mb=result["measured_peak_mb"],
        estimated_peak_mb=estimated_mb,
        largest_microbatch=largest,
        processes=result.get("processes", {}).get("nproc", 1),
    )
    return result


def _model_type(model_dir: Path) -> str | None:
    try:
        return json.loads((Path(model_dir) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None


def _allocator(device: str) -> str:
    """The allocator the probes measured: the one `tunelab run` uses."""
    if device == "cuda":
        return "torch CUDA caching allocator (peak allocated)"
    return (
        "glibc defaults, as in runs (its heap holds more than the live tensors the estimate "
        "counts, so the largest-microbatch search scales the estimate by what the measured step "
        "showed: bench/README.md)"
    )
