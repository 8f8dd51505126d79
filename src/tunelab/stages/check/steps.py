"""`tunelab check`: the preflight. Its purpose is wiring, not quality.

On a slice of the current data version (16 train and 4 validation rows by default) it runs
the run's own code (`model.trainable_model`, `render.lab_renderer`,
`train.train`, `evaluate.evaluate_rows`, `saved.save_trained` / `load_trained`) and ends with a
pass/fail checklist saved as `.tunelab/checks/<data version>-<spec hash>.json` (the hash of
the spec's wiring, `record.wiring`, which the record keeps). The items:

- versions: installed packages satisfy tunelab's declared requirements.
- backend: the device runs float32, and bf16 / fp16 when the spec asks for them (a tiny matmul
  and autocast); working but emulated or slow (bf16 without native units, fp16 on a CPU) warns.
- render: the train slice renders for training with the lab's renderer.
- targets: every LoRA target and module to save matches a module, else the names that exist.
- trainable_set: requires_grad is set on exactly what the method trains (LoRA adapter weights
  and modules_to_save copies, or everything for full fine-tuning); a new head is not frozen.
- head_init (only for `method.head_init: probe`): the head fitted from a probe on the slice is
  the model's output (`head.py`); the training items then start from it, as the run does.
- padding: the slice's shortest example gives the same loss alone as padded in a batch beside
  its longest (`padding.py`): padding masked, never pooled.
- train_loop: two optimizer steps of `train.train` on one global batch of the slice, with
  accumulation; the losses are finite.
- update: by parameter name over those two steps, every tensor the method trains received a
  nonzero gradient AND changed; every other tensor is bit-identical. The gradient condition
  stops weight decay from passing off a tensor whose gradient is cut (AdamW decays a tensor
  whose gradient is all zeros). Two steps because LoRA's B starts at zero, so A gets no
  gradient at step 1; the item lists the tensors that first changed at step 2.
- loss: finite, and lower (eval mode, before and after) once one microbatch is overfit: the
  first of that global batch, over those two steps. One loop serves the three items.
- evaluation: the shared protocol predicts every row of the validation slice.
- reload: the checkpoint, reloaded in a fresh Python process, gives the same predictions,
  logits and next-step loss (see `the reload step (reload.py)`).

The training items (`update.py`) use the spec's optimizer, lr, weight decay, clipping and
precision with a constant schedule and no warmup (a warmup step scales the lr towards 0:
quality, not wiring); the batch is the spec's microbatch with at most 2 accumulation steps.

Every item carries the `seconds` of the step that produced it (the items of one step share
them), and the record's `timing` gives each step's seconds once, in order.
"""

from __future__ import annotations

import re
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from tunelab.core.env import fingerprint
from tunelab.core.errors import TunelabError
from tunelab.core.files import DamagedFile
from tunelab.core.lab import Lab
from tunelab.core.spec import FullMethod
from tunelab.core.store import now
from tunelab.modeling import model as model_lib
from tunelab.modeling.render import lab_renderer
from tunelab.stages.check.environment import check_backend, check_versions, probe_backend
from tunelab.stages.check.head import head_init_step
from tunelab.stages.check.padding import padding_step
from tunelab.stages.check.record import (
    LR_ITEMS,
    check_path,
    check_status,
    item,
    latest_check,
    platform_of,
    wiring,
    wiring_hash,
)
from tunelab.stages.check.reload import evaluation_step, reload_step
from tunelab.stages.check.update import (
    intended_trainable,
    reported_untrainable,
    training_step,
)

SLICE_ROWS = 16

# --- the check -------------------------------------------------------------------------------


def validation_rows(rows: int) -> int:
    """The validation slice: a quarter of the train slice. Its rows are generated twice (the
    evaluation and the reload), the check's costliest rows after the training steps; 4 still
    make a batch of several lengths, so left padding is exercised."""
    return max(1, rows // 4)


def spread(rows: list[dict], n: int) -> list[dict]:
    """`n` rows taken in turn from each category (a row's label, or a pretrain row's source),
    each category's in id order. The first rows of a split in id order are mostly one
    category's (`business/001.txt`, ...; `data/code.jsonl` before `data/prose.jsonl`): a slice
    of them checked a classifier on one label and a mixture on one source."""
    by: dict[str, list[dict]] = {}
    for row in rows:
        by.setdefault(str(row.get("label") or row.get("source") or ""), []).append(row)
    taken: list[dict] = []
    for i in range(max(map(len, by.values()), default=0)):
        taken += [column[i] for column in by.values() if i < len(column)]
        if len(taken) >= n:
            break
    return taken[:n]


def run_check(lab: Lab, console: Console | None = None, rows: int = SLICE_ROWS) -> dict:
    """Run the preflight on `rows` train rows and a quarter as many validation rows; save and
    return the checklist."""
    start = time.perf_counter()
    spec, store = lab.spec, lab.store
    version, key = lab.data_version, wiring_hash(spec)
    path = check_path(store, spec, version)
    ctx: dict = {
        "lab": lab,
        "labels": store.data_manifest(version)["labels"],
        "train_rows": spread(store.read_split(version, "train"), rows),
        "val_rows": spread(store.read_split(version, "validation"), validation_rows(rows)),
    }
    backend: dict = {}  # the probe's findings, kept for the record's env

    def probe() -> dict:
        backend.update(probe_backend(lab.device))  # a first CUDA call can take seconds
        return check_backend(spec, lab.device, backend)

    items = _timed(check_versions) + _timed(probe)
    status = console.status("check") if console else None
    if status:
        status.start()
    steps = steps_for(spec)
    try:
        for i, (names, step) in enumerate(steps):
            if status:
                status.update(f"check: {names[0]}")
            items += _guard(names, step, ctx)
            if names[0] in PREREQUISITES and not items[-1]["passed"]:
                skip = f"not run: `{names[0]}` failed"
                later = [n for group, _ in steps[i + 1 :] for n in group]
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
    path = _beside_a_pass(store, spec, version, path, failed)
    not_checked = [i for i in items if i.get("not_checked")]
    backend["warnings"] += [f"{i['name']} {i['detail']}" for i in not_checked]
    backend["warnings"] += [f"{i['name']}: {i['warning']}" for i in items if i.get("warning")]
    result = {
        "passed": not failed and not skipped,
        "failed": failed,
        "skipped": skipped,
        "not_checked": [i["name"] for i in not_checked],
        "items": items,
        "data_version": version,
        "spec_hash": key,
        "wiring": wiring(spec),  # what the key hashes, so `run` can name a change
        "file": str(path.relative_to(store.lab)),
        "slice": {"train": len(ctx["train_rows"]), "validation": len(ctx["val_rows"])},
        "training": ctx.get("cfg"),
        "trainable": ctx.get("trainable"),
        "warnings": backend.pop("warnings"),
        "env": fingerprint(lab.device) | {"backend": backend},
        "platform": platform_of(lab.device),
        "created": now(),
        "timing": step_seconds(items),
        "seconds": round(time.perf_counter() - start, 2),
    }
    store.save(
        path,
        result,
        "check",
        data_version=version,
        spec_hash=key,
        passed=result["passed"],
        failed=failed,
        file=result["file"],
    )
    return result


def _beside_a_pass(store, spec, version: str, path: Path, failed: list[str]) -> Path:
    """Where a check is saved: its key's file; but a check that failed only the items the lr
    answers for (`LR_ITEMS`), at another lr than a passing check of the same key, goes beside
    it (`…-lr1e-30.json`): a what-if at lr 1e-30 had replaced the spec's passing record, and
    the run at the spec's own lr was told to check again."""
    if not failed or not set(failed) <= LR_ITEMS:
        return path
    try:
        kept = latest_check(store, spec, version)
    except DamagedFile:
        return path
    if kept and kept["passed"] and (kept.get("training") or {}).get("lr") != spec.training.lr:
        return path.with_name(f"{path.stem}-lr{spec.training.lr:g}.json")
    return path


def wiring_checked(lab: Lab, console: Console | None = None) -> dict:
    """The check that covers `lab`'s wiring and data version here: the passed one on record
    (`ran` False), else one run now (`ran` True, its whole record under `result`), said in one
    line on `console`. For `ablate --check` and the demos, before each value's run."""
    status = check_status(lab, lab.data_version)
    if status["warning"] is None:
        return {"file": status["file"], "passed": True, "ran": False}
    result = run_check(lab, console)
    if console is not None:
        failed = ", ".join(result["failed"] + result["skipped"])
        verdict = "[green]passed[/]" if result["passed"] else f"[red]FAILED[/] ({failed})"
        unchecked = [i["name"] for i in result["items"] if i.get("not_checked")]
        console.print(
            f"check of this wiring: {verdict} in {result['seconds']:.0f}s "
            f"({len(result['items'])} items"
            + (f", {len(unchecked)} not checked: {', '.join(unchecked)}" if unchecked else "")
            + f"; {result['file']})"
        )
        for warning in result.get("warnings") or []:  # what it found short of failing
            console.print(f"  [yellow]warning[/] {escape(warning)}")
    return {
        "file": result["file"],
        "passed": result["passed"],
        "ran": True,
        "failed": result["failed"],
        "seconds": result["seconds"],
        "result": result,
    }


def _guard(names: tuple[str, ...], step, ctx: dict) -> list[dict]:
    """A step that raises fails its items with the error: a wiring error is a finding."""

    def run():
        try:
            return step(ctx)
        except Exception as err:
            tail = "".join(traceback.format_exception(err)[-3:])
            said = f"{type(err).__name__}: {err}{_ours(err)}"
            out = [item(names[0], False, said, traceback=tail, internal=bool(_ours(err)))]
            skip = f"not run: `{names[0]}` raised"
            return out + [item(n, False, skip, skipped=True) for n in names[1:]]

    return _timed(run)


def _ours(err: Exception) -> str:
    """Where an error that is no TunelabError was raised in tunelab's own code, what that says:
    a bug of tunelab's, not the wiring (the libraries' errors, a shape or a dtype refused, are
    the wiring's); else nothing."""
    if isinstance(err, TunelabError) or err.__traceback__ is None:
        return ""
    frame = traceback.extract_tb(err.__traceback__)[-1]
    if not Path(frame.filename).resolve().is_relative_to(PACKAGE):
        return ""
    where = f"{Path(frame.filename).relative_to(PACKAGE.parent)}:{frame.lineno}"
    return (
        f" (raised in tunelab's own code, {where}: a bug of tunelab's, not the wiring; the "
        "traceback is in the check's record)"
    )


PACKAGE = Path(__file__).resolve().parents[2]
"""The tunelab package's folder."""


def _timed(step) -> list[dict]:
    """Run `step()`; its item(s), each with the step's `seconds` and the `step` it came from
    (the name of its first item)."""
    t0 = time.perf_counter()
    out = step()
    out = out if isinstance(out, list) else [out]
    seconds = round(time.perf_counter() - t0, 2)
    return [i | {"step": out[0]["name"], "seconds": seconds} for i in out]


def step_seconds(items: list[dict]) -> dict[str, float]:
    """Each step's seconds once, in order (the items of one step share them); steps that did
    not run are left out."""
    return {i["step"]: i["seconds"] for i in items if "step" in i and not i.get("skipped")}


# --- the steps: each takes the shared context and returns its item(s) -------------------------


def _render(ctx: dict) -> dict:
    lab = ctx["lab"]
    ctx["renderer"] = lab_renderer(lab.spec, lab.path, ctx["labels"], lab.data_version)
    ctx["examples"], rejected = ctx["renderer"].training(ctx["train_rows"])
    detail = f"{len(ctx['examples'])} of {len(ctx['train_rows'])} train rows render for training"
    if ctx["renderer"].pack_length is not None:  # task pretrain: documents packed
        detail = (
            f"{len(ctx['train_rows'])} train rows pack into {len(ctx['examples'])} sequences "
            f"of {ctx['renderer'].pack_length} tokens"
        )
    if rejected:
        detail += f"; {len(rejected)} cannot ({rejected[0]['reason']})"
    # a generated answer's row with no loss token teaches nothing (`Rendered.teaches`)
    empty = [e for e in ctx["examples"] if not getattr(e, "teaches", True)]
    if empty:
        detail += (
            f"; {len(empty)} carry no loss token (e.g. {empty[0].id}: `tunelab inspect` shows "
            "which tokens carry it)"
        )
    taught = len(ctx["examples"]) - len(empty)
    return item("render", taught > 0, detail, rejected=len(rejected), no_loss=len(empty))


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


def _trainable(ctx: dict) -> dict:
    model, spec = ctx["model"], ctx["lab"].spec
    names = [n for n, _ in model.named_parameters()]
    grad = {n for n, p in model.named_parameters() if p.requires_grad}
    t, dead = ctx["trainable"], reported_untrainable(ctx)  # frozen: no gradient can reach them
    intended = {n for n in names if intended_trainable(n, spec.method)} - dead
    extra, missing = sorted(grad - intended), sorted(intended - grad)
    problems = []
    if extra:
        problems.append(f"trainable but the method freezes them: {extra}")
    if missing:
        problems.append(f"frozen but the method trains them: {missing}")
    head = {n for n in names if re.search(r"(^|\.)(classifier|score)\.", n)}
    if spec.model_kind in ("encoder", "image") and head and not grad & head:
        problems.append(f"the new classification head is random but frozen: {sorted(head)}")
    if not grad:
        problems.append("no parameter trains")
    detail = "; ".join(problems) or (
        f"{t['trainable_params']:,} of {t['total_params']:,} parameters in {len(grad)} tensors "
        f"train ({100 * t['trainable_fraction']:.2f}%)"
    )
    if dead and not problems:
        why = "; ".join(t["untrainable"]["why"])
        detail += f"; {len(dead)} tensors frozen, no gradient can reach them ({why})"
    return item("trainable_set", not problems, detail, unexpected=extra, missing=missing)


STEPS = [
    (("render",), _render),
    (("targets",), _targets),
    (("trainable_set",), _trainable),
    (("padding",), padding_step),
    (("train_loop", "update", "loss"), training_step),
    (("evaluation",), evaluation_step),
    (("reload",), reload_step),
]
"""The steps in order, each with the items it yields."""
HEAD_INIT = (("head_init",), head_init_step)
"""After `trainable_set` where the head starts from a probe (`method.head_init: probe`): the
run fits it before its first step, so the check's training steps start from it too."""


def steps_for(spec) -> list:
    """`STEPS`, with `HEAD_INIT` where the spec's head starts from a probe, and without
    `padding` where nothing is padded (images, a pretrain lab's packed documents)."""
    steps = STEPS
    if spec.images or spec.task.type == "pretrain":
        steps = [s for s in steps if s[0] != ("padding",)]
    if getattr(spec.method, "head_init", "new") != "probe":
        return steps
    at = [names for names, _ in steps].index(("trainable_set",)) + 1
    return [*steps[:at], HEAD_INIT, *steps[at:]]


PREREQUISITES = {"render", "targets"}
"""Without a renderer or a model nothing after them can run."""
