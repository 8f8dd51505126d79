"""`tunelab baseline`: the honest starting points, each saved as a run record with per-example
predictions on validation.

- **majority** (a classifier whose head is new): always the most common train label, what
  "better than nothing" means;
- **probe** (the same): a logistic regression on the frozen encoder's mean-pooled embeddings,
  what the encoder already knows without fine-tuning. Its fitted head is stored beside the run
  as safetensors (`modeling.probe`), so `tunelab final` can score it on the sealed test split;
- **zero-shot** (a causal LM): the base model itself, with the lab's template and decoding.

Each record is opened before its work starts and closed however the work ends (`completed`,
`failed` with the error, `interrupted` on Ctrl-C or SIGTERM: `ledger.recording`), so no
baseline is left `running`, to be shown as `lost`.

A baseline is measured once (`once`): one already completed under the same conditions
is not measured again, and when every baseline the lab has is there the command is refused.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tunelab.core import ledger
from tunelab.core.digest import sha256_file
from tunelab.core.lab import Lab
from tunelab.core.layout import PREDICTIONS
from tunelab.core.store import write_jsonl
from tunelab.data.guard_sets import guard_paths
from tunelab.modeling.model import load_causal, load_encoder, load_tokenizer
from tunelab.modeling.probe import HEAD_FILE, HEAD_MODEL, features, fit_head, save_head
from tunelab.modeling.render import make_renderer
from tunelab.stages.baseline.once import BASELINES, not_measured_yet, run_name
from tunelab.tasks import score
from tunelab.training.evaluate import evaluate_rows
from tunelab.training.forgetting import score_guard_sets
from tunelab.training.protocol import protocol


@dataclass(frozen=True)
class Conditions:
    """What a baseline measures on: the data version and its rows, the base model, the name."""

    version: str
    labels: list[str]
    train: list[dict]
    validation: list[dict]
    base: dict
    name: str | None

    def run_name(self, method: str) -> str:
        return run_name(method, self.name)


def run_baseline(lab: Lab, console: Console | None = None, name: str | None = None) -> dict:
    """Measure the lab's baselines not yet recorded under these conditions; `already` lists the
    ones that were (and so were not measured again). Refused (DuplicateBaselineError) when
    every one was."""
    store, spec = lab.store, lab.spec
    version = lab.data_version
    labels = store.data_manifest(version)["labels"]
    base, found = not_measured_yet(lab, name)
    methods = BASELINES[spec.model_kind]
    already = [found[m] for m in methods if m in found]
    train, validation = store.read_split(version, "train"), store.read_split(version, "validation")
    at = Conditions(version, labels, train, validation, base, name)
    runs = [MEASURES[m](lab, at, console) for m in methods if m not in found]
    return {"data_version": version, "runs": runs, "already": already}


# --- the measurements, each inside its own record ------------------------------------------------


def _open(lab: Lab, at: Conditions, method: str, info: dict) -> tuple[dict, Path]:
    return ledger.open_run(
        lab,
        at.run_name(method),
        "baseline",
        at.version,
        method=method,
        base_model=at.base,
        baseline=info,
        protocol=protocol(lab.spec),
    )


def _finish(lab: Lab, record: dict, run_dir: Path, predictions: list[dict], at: Conditions):
    """Write the predictions and score them (unless the measurement scored them itself)."""
    write_jsonl(run_dir / PREDICTIONS, predictions)
    record["predictions_sha256"] = sha256_file(run_dir / PREDICTIONS)
    record["metrics"] = record.get("metrics") or score(lab.spec.task.type, predictions, at.labels)


def measure_majority(lab: Lab, at: Conditions, console: Console | None = None) -> dict:
    """Always the most common train label (task multilabel: label set)."""
    if lab.spec.task.type == "multilabel":
        return _majority_set(lab, at)
    label = Counter(e["label"] for e in at.train).most_common(1)[0][0]
    return _constant(lab, at, {"label": label}, "label", label)


def _majority_set(lab: Lab, at: Conditions) -> dict:
    """Task multilabel: always the most frequent train label set (`multilabel.majority_set`:
    the constant answer most often exactly right); a constant needs no threshold."""
    from tunelab.tasks.multilabel import majority_set

    chosen = majority_set([e["labels"] for e in at.train])
    return _constant(lab, at, {"label_set": chosen}, "labels", chosen)


def _constant(lab: Lab, at: Conditions, settings: dict, gold: str, answer) -> dict:
    """The majority baseline's run: `answer` for every validation row (its `gold` key read)."""
    record, run_dir = _open(lab, at, "majority", settings)
    with ledger.recording(lab, record):
        predictions = [{"id": e["id"], "gold": e[gold], "predicted": answer} for e in at.validation]
        _finish(lab, record, run_dir, predictions, at)
    return record


def measure_probe(lab: Lab, at: Conditions, console: Console | None = None) -> dict:
    """A linear head fitted on the frozen encoder's embeddings of train, applied to validation;
    the head is saved as safetensors beside the record."""
    spec = lab.spec
    info = {"model": HEAD_MODEL, "features": PROBE_FEATURES[spec.model_kind]}
    record, run_dir = _open(lab, at, "probe", info)
    with ledger.recording(lab, record):
        if spec.images:
            x_train, x_val, record["preprocessing"] = image_probe_features(lab, at, console)
            _fit_probe(lab, record, run_dir, at, x_train, x_val)
            return record
        tokenizer = load_tokenizer(spec.model, lab.path)
        encoder = load_encoder(spec.model, lab.path, lab.device)
        if console:
            n, m = len(at.train), len(at.validation)
            console.print(f"[dim]embedding {n} train and {m} validation examples…[/]")
        e, length = spec.evaluation, spec.model.max_length
        x_train, x_val = (
            features(
                encoder,
                tokenizer,
                rows,
                at.labels,
                length,
                e.batch_size,
                lab.device,
                every_few_seconds(console, f"embedding {split}") if console else None,
                every_few_seconds(console, f"tokenising {split}") if console else None,
            )
            for rows, split in ((at.train, "train"), (at.validation, "validation"))
        )
        _fit_probe(lab, record, run_dir, at, x_train, x_val)
    return record


PROGRESS_S = 10.0
"""How often a long embedding says how far it has come."""


def every_few_seconds(console: Console, what: str):
    """`progress(done, total)` that prints `embedding train: 30,720 of 69,142 (20 s)` once
    every `PROGRESS_S` from its first call (a 100,000-row split was tokenised and embedded for
    minutes without a word)."""
    began = last = None

    def progress(done: int, total: int) -> None:
        nonlocal began, last
        now = time.monotonic()
        if began is None:  # the clock starts with the work, not when the reporter is made
            began = last = now
        elif now - last >= PROGRESS_S:
            last = now
            console.print(f"[dim]{what}: {done:,} of {total:,} ({now - began:.0f} s)[/]")

    return progress


PROBE_FEATURES = {
    "encoder": "mean-pooled last hidden state of the frozen encoder",
    "image": "the input of the image classifier's head, on the frozen base",
}


def _fit_probe(lab: Lab, record: dict, run_dir: Path, at: Conditions, x_train, x_val) -> None:
    """Fit the probe's head on train, save it beside the record, predict validation."""
    if lab.spec.task.type == "multilabel":
        return _fit_multilabel_probe(lab, record, run_dir, at, x_train, x_val)
    head = fit_head(x_train, [row["label"] for row in at.train])
    save_head(head, run_dir / HEAD_FILE)
    record["baseline"]["head"] = {"file": HEAD_FILE, "sha256": sha256_file(run_dir / HEAD_FILE)}
    _finish(lab, record, run_dir, head.predictions(at.validation, x_val), at)


def _fit_multilabel_probe(lab: Lab, record: dict, run_dir: Path, at: Conditions, x_train, x_val):
    """Task multilabel: one logistic regression per label (one-vs-rest,
    `modeling.multilabel_head`), its threshold chosen on validation as a run's is."""
    from tunelab.modeling.multilabel_head import HEAD_MODEL as ONE_VS_REST
    from tunelab.modeling.multilabel_head import fit_multilabel_head, save_multilabel_head
    from tunelab.tasks.multilabel import score_probabilities

    head = fit_multilabel_head(x_train, [row["labels"] for row in at.train], at.labels)
    save_multilabel_head(head, run_dir / HEAD_FILE)
    record["baseline"]["model"] = ONE_VS_REST
    record["baseline"]["head"] = {"file": HEAD_FILE, "sha256": sha256_file(run_dir / HEAD_FILE)}
    primary = lab.spec.hypothesis.metric if lab.spec.hypothesis else None
    rows = at.validation
    predictions, record["metrics"] = score_probabilities(
        [r["id"] for r in rows],
        [r["labels"] for r in rows],
        head.predict_proba(x_val),
        at.labels,
        None,
        primary,
    )
    _finish(lab, record, run_dir, predictions, at)


def image_probe_features(lab: Lab, at: Conditions, console: Console | None = None):
    """Train and validation features of an image lab's frozen base
    (`head_init.image_base_features`) and the preprocessing that made them."""
    from tunelab.modeling.head_init import image_base_features

    if console:
        n, m = len(at.train), len(at.validation)
        console.print(f"[dim]embedding {n} train and {m} validation images…[/]")
    (x_train, x_val), settings = image_base_features(
        lab.spec, lab.path, at.labels, at.version, lab.device, at.train, at.validation
    )
    return x_train, x_val, settings


def measure_zero_shot(lab: Lab, at: Conditions, console: Console | None = None) -> dict:
    """The base causal LM, zero-shot, with the lab's template and decoding."""
    info = {"model": "the base model, zero-shot, with the lab's template and decoding"}
    tokenizer = load_tokenizer(lab.spec.model, lab.path, at.version)
    renderer = make_renderer(lab.spec, tokenizer, at.labels, lab.path)
    renderer.require_prompts(at.validation, "validation")  # before the record opens
    record, run_dir = _open(lab, at, "zero-shot", info)
    with ledger.recording(lab, record):
        # a scratch model's baseline: its untrained weights, drawn as the runs draw them
        seed = lab.spec.training.seed
        model = load_causal(lab.spec.model, lab.path, lab.device, seed, at.version)
        e = lab.spec.evaluation
        if console:  # generation is most of a baseline's minutes: say what it is doing
            console.print(f"[dim]zero-shot: answering {len(at.validation)} validation rows…[/]")
        predictions, record["metrics"] = evaluate_rows(
            model, renderer, at.validation, e.batch_size, e.max_new_tokens, lab.device
        )
        if guard_paths(lab.spec):  # the forgetting sets, measured on the base as it is
            if console:
                named = ", ".join(guard_paths(lab.spec))
                console.print(f"[dim]zero-shot: scoring the forgetting set {named}…[/]")
            record["guard"] = score_guard_sets(
                model, renderer, lab.spec, lab.store, at.version, run_dir, lab.device
            )
        _finish(lab, record, run_dir, predictions, at)
    return record


MEASURES = {"majority": measure_majority, "probe": measure_probe, "zero-shot": measure_zero_shot}
