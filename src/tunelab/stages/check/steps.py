"""`tunelab check`: the preflight. Its purpose is wiring, not quality.

On a slice of the current data version (16 train and 16 validation rows by default) it runs
the run's own code (`model.trainable_model`, `render.make_renderer`,
`train.train`, `evaluate.evaluate_rows`, `model.save_trained` / `load_trained`) and ends with a
pass/fail checklist saved as `.tunelab/checks/<data version>-<spec hash>.json`. The items:

- versions: installed packages satisfy tunelab's declared requirements.
- backend: the device runs float32, and bf16 / fp16 when the spec asks for them (a tiny matmul
  and autocast); working but emulated or slow (bf16 without native units, fp16 on a CPU) warns.
- render: the train slice renders for training with the lab's renderer.
- targets: every LoRA target and module to save matches a module, else the names that exist.
- trainable_set: requires_grad is set on exactly what the method trains (LoRA adapter weights
  and modules_to_save copies, or everything for full fine-tuning); a new head is not frozen.
- train_loop: two optimizer steps of `train.train`, with accumulation; the losses are finite.
- update: by parameter name over those two steps, every tensor the method trains received a
  nonzero gradient AND changed; every other tensor is bit-identical. The gradient condition
  stops weight decay from passing off a tensor whose gradient is cut (AdamW decays a tensor
  whose gradient is all zeros). Two steps because LoRA's B starts at zero, so A gets no
  gradient at step 1; the item lists the tensors that first changed at step 2.
- loss: finite, and lower (eval mode, before and after) once one microbatch is overfit.
- evaluation: the shared protocol predicts every row of the validation slice.
- reload: the checkpoint, reloaded in a fresh Python process, gives the same predictions,
  logits and next-step loss (see `preflight_reload`).

The training items use the spec's optimizer, lr, weight decay, clipping and precision with a
constant schedule and no warmup (a warmup step scales the lr towards 0: quality, not wiring);
the batch is the spec's microbatch with at most 2 accumulation steps.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
import traceback
from contextlib import contextmanager

import torch
from rich.console import Console
from torch.optim.optimizer import register_optimizer_step_post_hook

from tunelab.core.env import fingerprint
from tunelab.core.lab import Lab
from tunelab.core.spec import Budget, FullMethod
from tunelab.core.store import atomic_write_json, now
from tunelab.modeling import model as model_lib
from tunelab.modeling.render import make_renderer
from tunelab.stages.check.record import check_path, platform_of, spec_hash
from tunelab.stages.check.reload import (
    check_backend,
    check_versions,
    evaluation_step,
    item,
    probe_backend,
    reload_step,
)
from tunelab.training.loop import train
from tunelab.training.step import autocast, loss_weight, make_batch, summed_loss

SLICE_ROWS = 16
UPDATE_STEPS = 2
OVERFIT_STEPS = 6
# --- the check -------------------------------------------------------------------------------


def run_check(lab: Lab, console: Console | None = None, rows: int = SLICE_ROWS) -> dict:
    """Run the preflight on `rows` train and validation rows; save and return the checklist."""
    start = time.perf_counter()
    spec, store = lab.spec, lab.store
    version, key = store.current_data(), spec_hash(spec)
    path = check_path(store, spec, version)
    ctx: dict = {
        "lab": lab,
        "labels": store.data_manifest(version)["labels"],
        "train_rows": store.read_split(version, "train")[:rows],
        "val_rows": store.read_split(version, "validation")[:rows],
    }
    backend = probe_backend(lab.device)
    items = [check_versions(), check_backend(spec, lab.device, backend)]
    status = console.status("check") if console else None
    if status:
        status.start()
    try:
        for i, (names, step) in enumerate(STEPS):
            if status:
                status.update(f"check: {names[0]}")
            items += _guard(names, step, ctx)
            if names[0] in PREREQUISITES and not items[-1]["passed"]:
                skip = f"not run: `{names[0]}` failed"
                later = [n for group, _ in STEPS[i + 1 :] for n in group]
                items += [item(n, False, skip, skipped=True) for n in later]
                break
    finally:
        if status:
            status.stop()
    failed = [
        i["name"]
        for i in items
        if not i["passed"] and not i.get("skipped") and not i.get("not_checked")
    ]
    skipped = [i["name"] for i in items if i.get("skipped")]
    not_checked = [i for i in items if i.get("not_checked")]
    backend["warnings"] += [f"{i['name']} {i['detail']}" for i in not_checked]
    result = {
        "passed": not failed and not skipped,
        "failed": failed,
        "skipped": skipped,
        "not_checked": [i["name"] for i in not_checked],
        "items": items,
        "data_version": version,
        "spec_hash": key,
        "file": str(path.relative_to(store.lab)),
        "slice": {"train": len(ctx["train_rows"]), "validation": len(ctx["val_rows"])},
        "training": ctx.get("cfg"),
        "trainable": ctx.get("trainable"),
        "warnings": backend.pop("warnings"),
        "env": fingerprint(lab.device) | {"backend": backend},
        "platform": platform_of(lab.device),
        "created": now(),
        "seconds": round(time.perf_counter() - start, 2),
    }
    atomic_write_json(path, result)
    store.log_event(
        "check",
        data_version=version,
        spec_hash=key,
        passed=result["passed"],
        failed=failed,
        file=result["file"],
    )
    return result


def _guard(names: tuple[str, ...], step, ctx: dict) -> list[dict]:
    """A step that raises fails its items with the error: a wiring error is a finding."""
    t0 = time.perf_counter()
    try:
        out = step(ctx)
    except Exception as err:
        tail = "".join(traceback.format_exception(err)[-3:])
        out = [item(names[0], False, f"{type(err).__name__}: {err}", traceback=tail)]
        out += [item(n, False, f"not run: `{names[0]}` raised", skipped=True) for n in names[1:]]
    seconds = round(time.perf_counter() - t0, 2)
    return [i | {"seconds": seconds} for i in (out if isinstance(out, list) else [out])]


# --- the steps: each takes the shared context and returns its item(s) -------------------------


def _render(ctx: dict) -> dict:
    lab = ctx["lab"]
    tokenizer = model_lib.load_tokenizer(lab.spec.model, lab.path)
    ctx["renderer"] = make_renderer(lab.spec, tokenizer, ctx["labels"], lab.path)
    ctx["examples"], rejected = ctx["renderer"].training(ctx["train_rows"])
    detail = f"{len(ctx['examples'])} of {len(ctx['train_rows'])} train rows render for training"
    if rejected:
        detail += f"; {len(rejected)} cannot ({rejected[0]['reason']})"
    return item("render", len(ctx["examples"]) > 0, detail, rejected=len(rejected))


def _targets(ctx: dict) -> dict:
    lab, spec = ctx["lab"], ctx["lab"].spec
    method = spec.method
    try:
        ctx["model"], report = model_lib.trainable_model(
            spec.model,
            method,
            spec.model_kind,
            lab.path,
            ctx["labels"],
            lab.device,
            spec.training.seed,
            spec.training.activation_checkpointing,
        )
    except model_lib.ModelError as err:
        return item("targets", False, str(err), modules=err.modules)
    names = {n: p.numel() for n, p in ctx["model"].named_parameters() if p.requires_grad}
    ctx["trainable"] = report | {"names": names}
    if isinstance(method, FullMethod):
        return item("targets", True, "full fine-tuning: no target modules to match")
    found = ", ".join(f"{p} {n}" for p, n in report["target_modules"].items())
    detail = f"modules matched per target: {found}; modules to save: {report['modules_to_save']}"
    return item("targets", True, detail, matched=report["target_modules"])


def intended_trainable(name: str, method) -> bool:
    """What the method trains: everything (full), else LoRA weights and modules_to_save copies."""
    return isinstance(method, FullMethod) or ".lora_" in name or ".modules_to_save." in name


def _trainable(ctx: dict) -> dict:
    model, spec = ctx["model"], ctx["lab"].spec
    names = [n for n, _ in model.named_parameters()]
    grad = {n for n, p in model.named_parameters() if p.requires_grad}
    intended = {n for n in names if intended_trainable(n, spec.method)}
    extra, missing = sorted(grad - intended), sorted(intended - grad)
    problems = []
    if extra:
        problems.append(f"trainable but the method freezes them: {extra}")
    if missing:
        problems.append(f"frozen but the method trains them: {missing}")
    head = {n for n in names if re.search(r"(^|\.)(classifier|score)\.", n)}
    if spec.model_kind == "encoder" and head and not grad & head:
        problems.append(f"the new classification head is random but frozen: {sorted(head)}")
    if not grad:
        problems.append("no parameter trains")
    t = ctx["trainable"]
    detail = "; ".join(problems) or (
        f"{t['trainable_params']:,} of {t['total_params']:,} parameters in {len(grad)} tensors "
        f"train ({100 * t['trainable_fraction']:.2f}%)"
    )
    return item("trainable_set", not problems, detail, unexpected=extra, missing=missing)


def _cfg(ctx: dict, examples: int, steps: int, global_batch: int | None = None):
    cfg = ctx["lab"].spec.training
    micro = min(cfg.microbatch, examples)
    return cfg.model_copy(
        update={
            "budget": Budget(steps=steps),
            "schedule": "constant",
            "warmup_steps": 0,
            "microbatch": micro,
            "global_batch": global_batch or micro * min(cfg.accumulation, 2),
        }
    )


def _digests(model: torch.nn.Module) -> dict[str, str]:
    """Every parameter's bytes, hashed on the host: exact, and light on memory."""
    out = {}
    for name, p in model.named_parameters():
        raw = p.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy()
        out[name] = hashlib.blake2b(raw.tobytes(), digest_size=16).hexdigest()
    return out


@contextmanager
def watch_updates(model: torch.nn.Module):
    """While the block runs, record which parameters receive a non-zero gradient and a digest
    of every parameter after each optimizer step. The check's only hooks: a per-parameter
    gradient hook, and torch's global optimizer-step hook (the optimizer is made inside
    `train`, which has no hooks of its own), both removed when the block ends."""
    grads: dict[str, bool] = {}
    snapshots = [_digests(model)]

    def observe(name):
        def hook(p):
            grads[name] = grads.get(name, False) or bool(p.grad.ne(0).any())

        return hook

    handles = [
        p.register_post_accumulate_grad_hook(observe(n))
        for n, p in model.named_parameters()
        if p.requires_grad
    ]
    handles.append(register_optimizer_step_post_hook(lambda *_: snapshots.append(_digests(model))))
    try:
        yield grads, snapshots
    finally:
        for h in handles:
            h.remove()


def _update(ctx: dict) -> list[dict]:
    """Snapshot, train UPDATE_STEPS steps with `train.train`, compare by name. An optimizer
    step hook takes the digests after each step, so one real loop runs."""
    lab, model = ctx["lab"], ctx["model"]
    cfg = _cfg(ctx, len(ctx["examples"]), UPDATE_STEPS)
    ctx["cfg"] = cfg.model_dump(mode="json")
    with watch_updates(model) as (grads, snapshots):
        record = train(model, ctx["examples"], cfg, lab.device, ctx["renderer"].pad_id)
    first_change, no_grad, stuck, moved = {}, [], [], []
    for name, p in model.named_parameters():
        steps = [k for k in range(1, len(snapshots)) if snapshots[k][name] != snapshots[0][name]]
        if not intended_trainable(name, lab.spec.method):
            moved += [name] if steps else []
        elif not grads.get(name):
            no_grad.append(name + ("" if p.requires_grad else " (requires_grad is False)"))
        elif steps:
            first_change[name] = steps[0]
        else:
            stuck.append(name)
    problems = [
        f"{what}: {names}"
        for what, names in (
            ("trainable but no gradient reached them", no_grad),
            (
                "trainable, with a gradient, but unchanged (update below the dtype's resolution?)",
                stuck,
            ),
            ("frozen but changed", moved),
        )
        if names
    ]
    late = sorted(n for n, k in first_change.items() if k > 1)
    frozen = len(snapshots[0]) - len(first_change)
    detail = "; ".join(problems) or (
        f"all {len(first_change)} trainable tensors changed, {frozen} frozen ones are "
        "bit-identical"
        + (f"; {len(late)} first changed at step 2 (LoRA A: B starts at zero)" if late else "")
    )
    ok = not problems and len(snapshots) == UPDATE_STEPS + 1
    losses = [h["loss"] for h in record["history"]]
    loop = (
        f"{record['steps']} steps of {record['global_batch']} examples = {record['microbatch']} "
        f"× {record['accumulation']} accumulation, {record['tokens']} tokens, losses "
        + ", ".join(f"{x:.4f}" for x in losses)
    )
    return [
        item(
            "train_loop",
            len(losses) == UPDATE_STEPS and all(map(math.isfinite, losses)),
            loop,
            losses=losses,
        ),
        item(
            "update",
            ok,
            detail,
            no_gradient=no_grad,
            unchanged=stuck,
            frozen_changed=moved,
            changed_at_step_2=late,
        ),
    ]


def _eval_loss(ctx: dict, batch: dict, denominator: int) -> float:
    lab = ctx["lab"]
    ctx["model"].eval()
    with torch.no_grad(), autocast(lab.device, lab.spec.training.precision):
        return float(summed_loss(ctx["model"], batch) / denominator)


def _overfit(ctx: dict) -> dict:
    lab = ctx["lab"]
    micro = ctx["examples"][: lab.spec.training.microbatch]
    batch = make_batch(micro, ctx["renderer"].pad_id, lab.device)
    denominator = sum(loss_weight(e) for e in micro)
    before = _eval_loss(ctx, batch, denominator)
    cfg = _cfg(ctx, len(micro), OVERFIT_STEPS, global_batch=len(micro))
    record = train(ctx["model"], micro, cfg, lab.device, ctx["renderer"].pad_id)
    after = _eval_loss(ctx, batch, denominator)
    finite = all(map(math.isfinite, [before, after, *(h["loss"] for h in record["history"])]))
    detail = (
        f"one microbatch of {len(micro)} overfit for {OVERFIT_STEPS} steps: loss "
        f"{before:.4f} -> {after:.4f} (eval mode, before and after)"
    )
    if not finite:
        detail = "a loss is not finite: " + detail
    elif after >= before:
        detail = "the loss did not go down: " + detail + " (lr too high, or no gradient path?)"
    return item("loss", finite and after < before, detail, before=before, after=after)


STEPS = [
    (("render",), _render),
    (("targets",), _targets),
    (("trainable_set",), _trainable),
    (("train_loop", "update"), _update),
    (("loss",), _overfit),
    (("evaluation",), evaluation_step),
    (("reload",), reload_step),
]
"""The steps in order, each with the items it yields."""
PREREQUISITES = {"render", "targets"}
"""Without a renderer or a model nothing after them can run."""
