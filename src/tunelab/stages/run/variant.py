"""`tunelab run`: train one variant, evaluate it with the baseline's protocol, record everything.

The record is opened before training starts, so an interrupted or crashed run stays in the
ledger with its status and error. Every run has a parent (`--parent`, by default the newest
completed baseline on the data version) and the diff against it by parameter group; changing
more than one group is refused unless `--reason` says why (see `tunelab.stages.run.diff`).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import torch
from rich.console import Console

from tunelab.core import ledger
from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.layout import PREDICTIONS, WEIGHTS
from tunelab.core.run_files import trained_to_end
from tunelab.core.run_names import check_run_name
from tunelab.core.stopping import graceful_stop, held
from tunelab.core.store import atomic_dir, write_jsonl
from tunelab.data.behind import behind, behind_words
from tunelab.data.guard_sets import guard_paths
from tunelab.data.mixture import MixtureSampler, sampler_for
from tunelab.data.same_eval import SameEval
from tunelab.modeling.checkpoint_files import CHECKPOINT_DIR, find_checkpoint
from tunelab.modeling.feature_cache import run_cache
from tunelab.modeling.head_init import init_from_probe
from tunelab.modeling.identity import identity
from tunelab.modeling.model import resolve_path, trainable_model
from tunelab.modeling.packing import packing_record
from tunelab.modeling.pooling import pooling_note
from tunelab.modeling.render import lab_renderer
from tunelab.modeling.saved import save_trained
from tunelab.stages.check.record import check_status
from tunelab.stages.inspect.lab import blocking, training_findings
from tunelab.stages.inspect.windows import scored_past_training
from tunelab.stages.run.diff import (
    base_of,
    check_one_change,
    derived_changes,
    diff_runs,
    diff_warnings,
    no_baseline,
    resolve_parent,
)
from tunelab.stages.run.lines import head_line, start_line
from tunelab.tasks.targets import row_name
from tunelab.training.distributed import World, check_batch, device_for, world_from_env
from tunelab.training.divergence import start_lost, training_changes
from tunelab.training.evaluate import evaluate_rows
from tunelab.training.forgetting import score_guard_sets
from tunelab.training.loop import sequence_length_of, total_steps, train
from tunelab.training.precision import resolve as resolve_precision
from tunelab.training.process_group import join, joined
from tunelab.training.protocol import protocol
from tunelab.training.sharding import full_trainable, load_trainable
from tunelab.training.validate import validation_for


class BlockedError(TunelabError):
    """Blocking inspect findings and no recorded reason to train anyway."""


def prepare(lab: Lab, version: str, allow_warnings: str | None = None):
    """Renderer, training examples (with the rows that cannot be rendered) and findings."""
    labels = lab.store.data_manifest(version)["labels"]
    renderer = lab_renderer(lab.spec, lab.path, labels, version)  # a scratch BPE: version's
    train_rows = lab.store.read_split(version, "train")
    train_set, rejected = renderer.training(train_rows)
    if lab.spec.data.fields.conversations:  # only a chat template can refuse a turn
        renderer.require_prompts(lab.store.read_split(version, "validation"), "validation")
    findings = training_findings(renderer, train_rows, rejected, lab.spec.evaluation.max_new_tokens)
    findings += scored_past_training(lab, version, renderer)
    if blocking(findings) and not allow_warnings:
        named = {r["id"]: row_name(r) for r in train_rows}  # where each row came from
        raise BlockedError(
            "training refuses to start: "
            + "; ".join(
                f"{f['code']} ({f['count']} row(s), e.g. {named.get(f['example'], f['example'])})"
                for f in blocking(findings)
            )
            + '. See `tunelab inspect`; to train anyway pass --allow-warnings "why".'
        )
    return renderer, train_set, rejected, findings


def mixture_sampler(lab: Lab, version: str, train_set: list) -> MixtureSampler | None:
    """The spec's data mixture over this training set, checked against the run's steps."""
    rows = lab.store.read_split(version, "train")
    sampler = sampler_for(lab.spec.data.mixture, train_set, rows)
    if sampler is not None:
        sampler.check(total_steps(lab.spec.training, len(train_set), sequence_length_of(train_set)))
    return sampler


def build_model(
    lab: Lab, labels: list[str], version: str | None = None
) -> tuple[torch.nn.Module, dict]:
    """The model the run trains (a scratch one sized for `version`'s tokenizer)."""
    spec = lab.spec
    model, trainable = trainable_model(
        spec.model,
        spec.method,
        spec.model_kind,
        lab.path,
        labels,
        lab.device,
        spec.training.seed,
        spec.training.activation_checkpointing,
        version,
    )
    if spec.task.type == "multilabel":  # its logits are sigmoids: the saved config says so
        from tunelab.modeling.multilabel_head import mark_multilabel

        mark_multilabel(model)
    return model, trainable


def run_variant(
    lab: Lab,
    name: str | None = None,
    console: Console | None = None,
    allow_warnings: str | None = None,
    parent: str | None = None,
    reason: str | None = None,
    replicate: dict | None = None,
) -> dict:
    """Train one variant on the lab's data version (`Lab.data_version`). A replicate (`replicate`:
    its group, index, seed and the group's `base_seed`) is diffed against its parent as the
    group's first seed would be: its seed is the group's draw, not a change."""
    spec, store = lab.spec, lab.store
    spec.require_plan()
    name = check_run_name(name or spec.method.type)  # refused before anything loads
    lab, world = on_world(lab)
    version = lab.data_version
    parent_record = resolve_parent(store, version, parent)
    as_diffed = spec.to_dict()
    if replicate is not None:
        as_diffed["training"]["seed"] = replicate["base_seed"]
    base = base_of(spec.model, lab.path) if parent_record else None  # recorded below too
    diff = diff_runs(parent_record, as_diffed, version, base) if parent_record else None
    if diff is not None:
        check_one_change(diff, reason, parent_record["id"])
    renderer, train_set, rejected, findings = prepare(lab, version, allow_warnings)
    sampler = mixture_sampler(lab, version, train_set)  # one that cannot be followed stops here
    preflight = check_status(lab, version)
    if parent_record is None:  # nothing to judge the run against until a baseline is measured
        preflight["no_baseline"] = no_baseline(version)
    if world.main and (differ := behind(spec, lab.path, store.data_manifest(version))):
        preflight["data_behind"] = behind_words(version, differ)
    for warning in (
        preflight.get("data_behind"),
        preflight["warning"],
        preflight.get("no_baseline"),
        *(f"(inspect) {f['message']}" for f in findings if not f["blocking"]),
    ):
        if console and warning:
            console.print(f"[yellow]warning[/] {warning}")
    model, trainable = build_model(lab, renderer.labels, version)
    if spec.model_kind == "encoder":  # recorded once, not on a resume's or a rebuild's
        note = pooling_note(resolve_path(spec.model, lab.path))
        if note:
            trainable["pooling_note"] = note
    if spec.method.head_init == "probe":  # LP-FT: every rank fits the same probe
        base = identity(spec.model, lab.path, renderer.pack_length, version)
        trainable["head_init"] = init_from_probe(
            model,
            train_set,
            renderer.labels,
            spec.evaluation.batch_size,
            renderer.pad_id,
            lab.device,
            run_cache(store.root, spec, base),
        )
        if console:
            console.print(head_line(trainable["head_init"]))
    if console and trainable.get("pooling_note") and world.main:
        console.print(f"[yellow]note[/] {trainable['pooling_note']}")
    if console and trainable.get("drawn_at_random") and world.main:
        console.print(
            f"[yellow]note[/] the base has no weights for {', '.join(trainable['drawn_at_random'])}"
            " (a masked-LM checkpoint has no pooler, say): drawn at random, trained and saved "
            "with the head"
        )
    if not world.main:  # the run is rank 0's: this rank trains its share and writes nothing
        return follow(lab, world, model, renderer, train_set, sampler, version=version)
    record, run_dir = ledger.open_run(
        lab,
        name,
        "variant",
        version,
        method=spec.method.type,
        base_model=base or identity(spec.model, lab.path, renderer.pack_length, version),
        trainable=trainable,
        protocol=protocol(lab.spec),
        rejected_train=rejected,
        findings=[{k: v for k, v in f.items() if k != "rows"} for f in findings],  # inspect's
        warnings_allowed=allow_warnings,
        parent=parent_record["id"] if parent_record else None,
        parent_kind=parent_record["kind"] if parent_record else None,
        parent_method=parent_record.get("method") if parent_record else None,
        diff=diff,
        diff_warnings=diff_warnings(diff, _same_validation(store, version, parent_record))
        + derived_changes(parent_record.get("spec"), as_diffed, diff)
        if diff
        else [],
        reason=reason.strip() if reason and reason.strip() else None,
        preflight=preflight,
        **({"replicate": replicate} if replicate else {}),
        **_inputs(renderer, train_set, spec),
    )
    if console:
        console.print(start_line(record, spec, train_set, world))
    return train_and_finish(
        lab, record, run_dir, model, renderer, train_set, sampler, console, world=world
    )


def _inputs(renderer, train_set, spec) -> dict:
    """What the record says of the inputs as trained: what the processor does to every image,
    how a pretrain lab's documents were packed. Made before the run's record is opened: a
    Ctrl-C while packing a large train split, after the record said `running`, left the run
    `lost` where it was `interrupted`."""
    out = {}
    if renderer.kind == "image":
        out["preprocessing"] = renderer.settings
    if renderer.pack_length is not None:
        out["packing"] = packing_record(train_set, renderer.pack_length, spec.task.boundaries)
    return out


def train_and_finish(
    lab,
    record,
    run_dir,
    model,
    renderer,
    train_set,
    sampler,
    console,
    resume: bool = False,
    world: World | None = None,
) -> dict:
    """Train, save the weights, evaluate, inside the run's record (`ledger.recording`); on a
    resume of a run that had trained to its end, evaluate its saved weights alone.

    Ctrl-C or SIGTERM during training finishes the step and checkpoints; anywhere else it
    stops at once. Either way the run is recorded as interrupted, resumable when a checkpoint
    or its saved weights exist. The weights are written whole or not at all. Under several
    processes this is rank 0: it trains its share with the others, then evaluates alone."""
    with ledger.recording(lab, record, lambda: _checkpoint(run_dir)):
        if resume and trained_to_end(record, run_dir):  # stopped while evaluating: evaluate again
            model = _load_trained(lab, record, run_dir, renderer)
        else:
            record["training"], model, late = _train(
                lab,
                world or World(),
                model,
                renderer,
                train_set,
                sampler,
                console,
                run_dir,
                resume,
                record["data_version"],
            )
            head = record["trainable"].get("head_init")
            changes = training_changes(model)
            history = record["training"]["history"]
            record["training"]["start_lost"] = start_lost(history, head, changes=changes)
            # saved before the evaluation, so a stop while evaluating loses no training; a
            # stop while they are written waits for them (no checkpoint may exist to go back to)
            with held():
                with atomic_dir(run_dir / WEIGHTS, replace=True) as weights:
                    files = save_trained(model, weights)
                hashes = {f: sha256_file(run_dir / WEIGHTS / f) for f in files}  # `fsck` reads
                record["weights"] = {"dir": WEIGHTS, "files": files, "sha256": hashes}
            if late:  # asked for during the last step's validation, after the loop's last look
                raise KeyboardInterrupt(late)
        e = lab.spec.evaluation
        val_rows = lab.store.read_split(record["data_version"], "validation")
        lab.store.log_event("run_evaluating", run=record["id"], rows=len(val_rows))
        if console:
            console.print(f"[dim]evaluating on {len(val_rows)} validation rows…[/]")
        primary = lab.spec.hypothesis.metric if lab.spec.hypothesis else None
        began = time.perf_counter()  # `plan` times a final's evaluation from it
        predictions, record["metrics"] = evaluate_rows(  # multilabel: threshold chosen here
            model, renderer, val_rows, e.batch_size, e.max_new_tokens, lab.device, None, primary
        )
        record["evaluation_seconds"] = round(time.perf_counter() - began, 3)
        write_jsonl(run_dir / PREDICTIONS, predictions)
        record["predictions_sha256"] = sha256_file(run_dir / PREDICTIONS)
        if forgetting := guard_paths(lab.spec):
            if console:
                console.print(f"[dim]scoring the forgetting set {', '.join(forgetting)}…[/]")
            record["guard"] = score_guard_sets(
                model, renderer, lab.spec, lab.store, record["data_version"], run_dir, lab.device
            )
    # completed: `resume` refuses it, so its checkpoint (the trained tensors and AdamW's two
    # moments, three times a full fine-tune's weights) serves nothing; its weights are kept
    shutil.rmtree(run_dir / CHECKPOINT_DIR, ignore_errors=True)
    return record


def _load_trained(lab: Lab, record: dict, run_dir: Path, renderer):
    """The run's saved weights on its base, as `final` and `export` load them."""
    from tunelab.modeling.model import load_trained

    weights = run_dir / record["weights"]["dir"]
    kind = lab.spec.model_kind
    return load_trained(lab.spec.model, lab.path, weights, lab.device, renderer.labels, kind)


def _same_validation(store, version: str, parent: dict | None) -> bool:
    """The parent evaluated on this version's validation examples (maybe on another version)."""
    return parent is not None and SameEval(store, version)(parent["data_version"])


def _precisions(store) -> list[tuple[str, dict]]:
    """Each earlier run's id and recorded precision choice, newest first (`precision.resolve`
    keeps an auto choice made on this machine)."""
    out = []
    for record in reversed(store.runs()):
        chosen = (record.get("training") or {}).get("precision")
        if isinstance(chosen, dict):
            out.append((record["id"], chosen))
    return out


def on_world(lab: Lab, resumed: bool = False) -> tuple[Lab, World]:
    """This process's world (torchrun's variables), its device, the batch check and the
    process group joined, before any record exists."""
    world = world_from_env(lab.spec.training.strategy)
    check_batch(world, lab.spec.training.global_batch, lab.spec.training.microbatch, resumed)
    lab = dataclasses.replace(lab, device=device_for(world, lab.device))
    join(world, lab.device)  # every rank there before a record is opened
    return lab, world


def _train(lab, world, model, renderer, train_set, sampler, console, run_dir, resume, version=None):
    """The training of the run on every rank (graceful on Ctrl-C and SIGTERM), with what the
    record keeps of the processes; returns it, the trained model as one unsharded module
    (under FSDP, rank 0 gathers the trained tensors into a fresh copy of the model), and the
    signal of a stop that came after the loop's last look (None if none did)."""
    cfg = lab.spec.training
    with joined(world, lab.device) as world, graceful_stop(console) as stop:
        run_dir = world.broadcast(run_dir)  # rank 0 opened the run; its shards go there too
        # precision auto: rank 0 measures (or keeps the lab's choice on this machine) and
        # every rank trains in its choice
        earlier = _precisions(lab.store) if cfg.precision == "auto" else ()
        precision, chosen = world.broadcast(resolve_precision(cfg.precision, lab.device, earlier))
        cfg = cfg.model_copy(update={"precision": precision})
        trained, fsdp = world.wrap(model, lab.device, cfg.precision)
        training = train(
            trained,
            train_set,
            cfg,
            lab.device,
            renderer.pad_id,
            console,
            run_dir,
            stop,
            resume,
            sampler,
            world,
            validation_for(lab, cfg, renderer, version),
        )
        training["precision"] = chosen
        training["processes"] = world.record(lab.device, cfg.microbatch, cfg.global_batch, fsdp)
        gathered = full_trainable(trained) if world.sharded else None
        del trained  # DDP's reducer goes before its process group (else its exit can hang)
    if gathered is not None:
        model = None  # the shards go before the whole copy comes
        if world.main:
            model, _ = build_model(lab, renderer.labels, version)
            load_trainable(model, gathered)
    return training, model, stop.cause if stop.is_set() else None


def follow(lab, world, model, renderer, train_set, sampler, run_dir=None, version=None) -> dict:
    """A rank other than 0: trains its share of every step (writing its shards of a
    checkpoint, and reading them on resume) and measures the validation loss with the others
    (`training.validate_every`), evaluates nothing else; the CLI prints nothing."""
    training, _, _ = _train(
        lab, world, model, renderer, train_set, sampler, None, run_dir, bool(run_dir), version
    )
    return {"rank": world.rank, "training": {k: training[k] for k in ("steps", "tokens")}}


def _checkpoint(run_dir: Path) -> str | None:
    """The run's checkpoint folder (relative to the run) when a whole one exists."""
    return CHECKPOINT_DIR if find_checkpoint(run_dir / CHECKPOINT_DIR) else None
