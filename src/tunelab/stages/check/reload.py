"""What `tunelab check` runs after the training loop: the evaluation pass, and the
fresh-process reload of the saved checkpoint (the environment probes: `environment.py`).

    python -m tunelab.stages.check.reload REQUEST.json     (the child; see `main`)

The model is saved with `saved.save_trained` and loaded with `model.load_trained` in a new
Python interpreter. Both sides run `reference_outputs`: the loss the next training step would
compute on the first microbatch of the train slice (`train.summed_loss`, in eval mode so dropout
cannot differ), compact tensors of that forward pass (a classifier's logits; a causal LM's
log-probability of the gold token and its argmax at every target position), and the predictions
of `evaluate.evaluate_rows` on the validation slice. On a CPU with float32 weights and fp32
precision everything must be identical. Elsewhere (GPU kernels, half precision) the loss and the
float tensors must agree within `tolerance()` (rtol = atol), and predictions that differ (a
greedy near-tie can flip) are reported, not failed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tunelab.core.env import child_env, run_child
from tunelab.core.spec import Spec, validate_spec
from tunelab.core.store import atomic_write_json, read_json
from tunelab.modeling.loss_positions import IGNORE, target_logits
from tunelab.modeling.model import load_trained
from tunelab.modeling.render import Renderer, lab_renderer
from tunelab.modeling.saved import save_trained
from tunelab.stages.check.record import item
from tunelab.training.evaluate import evaluate_rows
from tunelab.training.step import autocast, keeps_logits, loss_weight, make_batch, summed_loss

RELOAD_TIMEOUT_S = 900
OUTPUTS, TENSORS = "outputs.json", "tensors.safetensors"
MAX_NEW_TOKENS = 16
"""Generation limit of the check's evaluation pass (the spec's, if lower): wiring, not quality."""


# --- evaluation and reload ------------------------------------------------------------------


def tolerance(spec: Spec, device: torch.device) -> float:
    """0.0 (bit-identical) on a CPU in float32; 1e-4 for float32 on a GPU; 2e-2 in half
    precision (bf16 keeps 8 bits of mantissa)."""
    fp32 = spec.model.dtype == "float32" and spec.training.precision == "fp32"
    if fp32:
        return 0.0 if device.type == "cpu" else 1e-4
    return 2e-2


@torch.no_grad()
def reference_outputs(
    model: torch.nn.Module,
    renderer: Renderer,
    train_rows: list[dict],
    val_rows: list[dict],
    protocol: dict,
    spec: Spec,
    device: torch.device,
    forward: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[dict, dict[str, torch.Tensor]]:
    """What the in-process model and the reloaded one must agree on (see the module doc).
    `forward`: the summed loss and logits of this very pass, when the caller has just made it
    on the same model (the check's loss after training)."""
    examples, _ = renderer.training(train_rows)
    micro = examples[: spec.training.microbatch]
    batch = make_batch(micro, renderer.pad_id, device)
    denominator = sum(loss_weight(e) for e in micro)
    model.eval()
    if forward is None:
        with autocast(device, spec.training.precision):
            forward = loss_and_logits(model, batch)
    summed, logits = forward
    loss = float(summed / denominator)
    logits = logits.float()
    labels = batch["labels"]
    if labels.dim() == 1 or labels.is_floating_point():  # a class, or multilabel's 0/1s
        tensors = {"logits": logits}
    else:  # the logits at t predict the token at t + 1; only target positions are kept
        if keeps_logits(model):  # at the targets' positions (see `summed_loss`)
            kept = target_logits(logits, batch)
        else:
            kept = logits[:, :-1][labels[:, 1:] != IGNORE]
        logp = torch.log_softmax(kept, dim=-1)
        gold = batch["targets"]
        tensors = {
            "target_logprob": logp.gather(1, gold[:, None])[:, 0],
            "target_argmax": logp.argmax(dim=-1),
        }
    predictions, metrics = evaluate_rows(
        model, renderer, val_rows, protocol["batch_size"], protocol["max_new_tokens"], device
    )
    summary = {"loss": loss, "predictions": predictions, "metrics": metrics}
    return summary, {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


def loss_and_logits(
    model: torch.nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`summed_loss`, the training step's own loss, and the logits of that same forward pass
    (kept by a forward hook, removed at once): one forward instead of two."""
    kept: list[torch.Tensor] = []
    handle = model.register_forward_hook(lambda _module, _args, out: kept.append(out.logits))
    try:
        loss = summed_loss(model, batch)
    finally:
        handle.remove()
    if len(kept) != 1:
        raise RuntimeError(f"summed_loss ran {len(kept)} forward passes of the model, not 1")
    return loss, kept[0]


def evaluation_step(ctx: dict) -> dict:
    """The shared protocol on the validation slice; its outputs are the reload's reference."""
    lab = ctx["lab"]
    e = lab.spec.evaluation
    ctx["protocol"] = {
        "batch_size": e.batch_size,
        "max_new_tokens": min(e.max_new_tokens, MAX_NEW_TOKENS),
    }
    ctx["reference"] = reference_outputs(
        ctx["model"],
        ctx["renderer"],
        ctx["train_rows"],
        ctx["val_rows"],
        ctx["protocol"],
        lab.spec,
        lab.device,
        ctx.pop("trained_forward", None),
    )
    n, total = len(ctx["reference"][0]["predictions"]), len(ctx["val_rows"])
    detail = f"{n} of {total} validation rows predicted (quality is not judged here)"
    return item("evaluation", n == total > 0, detail)


def reload_step(ctx: dict) -> dict:
    """Save, load with `model.load_trained` in a fresh interpreter, compare the outputs."""
    if "reference" not in ctx:
        return item("reload", False, "not run: the evaluation pass gave nothing to compare")
    lab = ctx["lab"]
    request = {
        "lab": str(lab.path),
        "data_version": lab.data_version,
        "spec": lab.spec.to_dict(),
        "labels": ctx["labels"],
        "device": str(lab.device),
        "threads": torch.get_num_threads(),
        "train_rows": ctx["train_rows"],
        "val_rows": ctx["val_rows"],
        "protocol": ctx["protocol"],
    }
    # the last step: the model is not used again, so the child may have its memory
    ran, theirs_t, theirs = reload_in_fresh_process(ctx.pop("model"), request, lab.store.root)
    if theirs_t is None:
        return item("reload", False, f"the fresh process failed: {ran['stderr']}", process=ran)
    tol = tolerance(lab.spec, lab.device)
    ok, diff = compare_outputs(*ctx["reference"], theirs, theirs_t, tol)
    detail = (
        f"reloaded in a fresh process (pid {ran['pid']}): predictions, "
        f"{'/'.join(diff['max_abs_diff'])} and next-step loss {'' if ok else 'NOT '}"
        + ("identical" if tol == 0 else f"within {tol:g}")
    )
    if diff["predictions_differ"]:
        detail += f"; predictions differ for {diff['predictions_differ']}"
    if not ok:
        detail += f" (max abs diff {diff['max_abs_diff']}, loss {diff['loss']})"
        detail += blas_hint() if tol == 0 else ""
    return item("reload", ok, detail, process=ran, comparison=diff)


def blas_hint() -> str:
    """What to try when a CPU's exact reload differs while MKL's reproducibility is not strict
    (`core.env.REPRODUCIBLE_BLAS`, which the user's own `MKL_CBWR` replaces)."""
    mode = os.environ.get("MKL_CBWR")
    if mode is None or "STRICT" in mode.upper():
        return ""
    return (
        f"; MKL_CBWR={mode} is set without STRICT, and MKL's results can then differ between "
        "processes: unset it (tunelab then sets AUTO,STRICT) and check again"
    )


def reload_in_fresh_process(
    model: torch.nn.Module, request: dict, store_root: Path
) -> tuple[dict, dict[str, torch.Tensor] | None, dict]:
    """Save `model`, run this module in a new interpreter on `request`, return its outputs
    (None when it failed) and what ran: command, pid, exit code, stderr tail, saved files and
    `seconds` (the save, the child's whole life, and its load and compute as it timed them).
    On an accelerator `model` is released once saved (moved to `meta`), so that a large model
    and its reloaded copy need not fit on the device together."""
    store_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store_root, prefix="check-") as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        files = save_trained(model, tmp / "weights")
        seconds = {"save": time.perf_counter() - start}
        if next(model.parameters()).device.type not in ("cpu", "meta"):
            model.to("meta")
            torch.cuda.empty_cache()
        request = request | {"weights": str(tmp / "weights"), "out": str(tmp / "out")}
        atomic_write_json(tmp / "request.json", request)
        command = [sys.executable, "-m", "tunelab.stages.check.reload", str(tmp / "request.json")]
        start = time.perf_counter()
        proc = run_child(
            command,
            capture_output=True,
            text=True,
            timeout=RELOAD_TIMEOUT_S,
            env=child_env(),
            cwd=request["lab"],
        )
        seconds["process"] = time.perf_counter() - start
        ran = {
            "command": [Path(command[0]).name, *command[1:3]],
            "returncode": proc.returncode,
            "parent_pid": os.getpid(),
            "saved_files": files,
        }
        if proc.returncode != 0:
            return ran | {"stderr": proc.stderr[-2000:], "seconds": _rounded(seconds)}, None, {}
        theirs = read_json(tmp / "out" / OUTPUTS)
        tensors = load_file(tmp / "out" / TENSORS)
    seconds |= theirs.pop("seconds")
    return ran | {"pid": theirs.pop("pid"), "seconds": _rounded(seconds)}, tensors, theirs


def _rounded(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in seconds.items()}


def compare_outputs(
    mine: dict, mine_t: dict, theirs: dict, theirs_t: dict, tol: float
) -> tuple[bool, dict]:
    """Agreement of two `reference_outputs`: exact when tol is 0, else within rtol = atol."""
    out: dict = {"tolerance": tol, "max_abs_diff": {}}
    ok = set(mine_t) == set(theirs_t)
    for key in sorted(set(mine_t) & set(theirs_t)):
        a, b = mine_t[key], theirs_t[key]
        if a.shape != b.shape:
            out["max_abs_diff"][key] = f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
            ok = False
        elif a.is_floating_point():
            diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
            out["max_abs_diff"][key] = diff
            ok &= torch.equal(a, b) if tol == 0 else torch.allclose(a, b, rtol=tol, atol=tol)
        else:  # token ids: exact required only in exact mode
            out["max_abs_diff"][key] = int((a != b).sum())
            ok &= tol > 0 or torch.equal(a, b)
    out["loss"] = [mine["loss"], theirs["loss"]]
    loss_diff = abs(mine["loss"] - theirs["loss"])
    ok &= loss_diff == 0 if tol == 0 else loss_diff <= tol * (1 + abs(mine["loss"]))
    differ = [
        a["id"] for a, b in zip(mine["predictions"], theirs["predictions"], strict=False) if a != b
    ]
    if len(mine["predictions"]) != len(theirs["predictions"]):
        differ.append("(a different number of predictions)")
        ok = False
    out["predictions_differ"] = differ
    ok &= tol > 0 or not differ
    return ok, out


def main(argv: list[str] | None = None) -> int:
    """The child: load the saved checkpoint the way a later command would, and compute."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    argv = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    torch.set_num_threads(request["threads"])
    start = time.perf_counter()
    spec = validate_spec(request["spec"])
    lab, device = Path(request["lab"]), torch.device(request["device"])
    renderer = lab_renderer(spec, lab, request["labels"], request["data_version"])
    weights, labels = Path(request["weights"]), request["labels"]
    model = load_trained(spec.model, lab, weights, device, labels, spec.model_kind)
    loaded = time.perf_counter()
    summary, tensors = reference_outputs(
        model,
        renderer,
        request["train_rows"],
        request["val_rows"],
        request["protocol"],
        spec,
        device,
    )
    out = Path(request["out"])
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out / TENSORS)
    seconds = {"load": loaded - start, "outputs": time.perf_counter() - loaded}
    atomic_write_json(out / OUTPUTS, summary | {"pid": os.getpid(), "seconds": seconds})
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # its outputs are written and closed: skip the ~1 s teardown of torch & co.
