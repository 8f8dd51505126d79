"""How `tunelab final` scores the sealed test rows: each kind of run's scorer, its model loaded
before the split is opened (`sealed` holds the rules of the opening itself)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tunelab.core.lab import Lab
from tunelab.core.spec import Spec
from tunelab.core.store import Store
from tunelab.tasks import score
from tunelab.tasks.multilabel import recorded_threshold

Scorer = Callable[[list[dict]], tuple[list[dict], dict]]
"""What scores the test rows: their predictions and metrics."""


def scorer_of(lab: Lab, record: dict, spec: Spec) -> Scorer:
    """The run's scorer under its spec's shared protocol, its model already loaded: it is built
    before the split is opened, so a base that is gone or does not load stops `final` with no
    opening logged (an image probe loads its model when it reads the images)."""
    from tunelab.modeling.model import load_causal, load_trained
    from tunelab.modeling.render import lab_renderer
    from tunelab.training.evaluate import evaluate_rows

    labels = lab.store.data_manifest(record["data_version"])["labels"]
    multilabel = spec.task.type == "multilabel"  # the threshold recorded on validation
    if record.get("method") == "majority":  # a constant: one label, or a set with no threshold
        key, chosen = ("labels", "label_set") if multilabel else ("label", "label")
        constant = record["baseline"][chosen]

        def majority(rows: list[dict]) -> tuple[list[dict], dict]:
            predictions = [{"id": r["id"], "gold": r[key], "predicted": constant} for r in rows]
            return predictions, score(spec.task.type, predictions, labels)

        return majority
    if record["kind"] == "baseline" and record.get("method") == "probe":
        return _probe_scorer(lab, record, spec, labels)
    version = record["data_version"]  # a scratch model's tokenizer is its version's
    renderer = lab_renderer(spec, lab.path, labels, version)
    if record["kind"] == "baseline":  # zero-shot: the base model itself (scratch: as drawn)
        model = load_causal(spec.model, lab.path, lab.device, spec.training.seed, version)
    else:
        weights = lab.store.run_dir(record["id"]) / record.get("weights", {}).get("dir", "weights")
        model = load_trained(spec.model, lab.path, weights, lab.device, labels, spec.model_kind)
    e = spec.evaluation
    threshold = recorded_threshold(record) if multilabel else None  # applied, never chosen
    return lambda rows: evaluate_rows(
        model, renderer, rows, e.batch_size, e.max_new_tokens, lab.device, threshold
    )


def _probe_scorer(lab: Lab, record: dict, spec: Spec, labels: list[str]) -> Scorer:
    """The probe baseline: its stored head on the frozen encoder's embeddings, made as the
    baseline made them for validation (one-vs-rest at its validation threshold, multilabel)."""
    from tunelab.modeling.model import load_encoder, load_tokenizer
    from tunelab.modeling.probe import features, load_head

    head_file = head_path(lab.store, record)
    if spec.images and spec.task.type != "multilabel":
        from tunelab.modeling.head_init import image_base_features

        head = load_head(head_file)
        version = record["data_version"]  # its folder holds the test images too

        def images(rows: list[dict]) -> tuple[list[dict], dict]:
            (x,), _ = image_base_features(spec, lab.path, labels, version, lab.device, rows)
            predictions = head.predictions(rows, x)
            return predictions, score(spec.task.type, predictions, labels)

        return images
    tokenizer = load_tokenizer(spec.model, lab.path)
    encoder = load_encoder(spec.model, lab.path, lab.device)
    e, length = spec.evaluation, spec.model.max_length

    def embedded(rows: list[dict]):
        return features(encoder, tokenizer, rows, labels, length, e.batch_size, lab.device)

    if spec.task.type == "multilabel":
        from tunelab.modeling.multilabel_head import load_multilabel_head
        from tunelab.tasks.multilabel import score_probabilities

        ovr, threshold = load_multilabel_head(head_file), recorded_threshold(record)
        return lambda rows: score_probabilities(
            [r["id"] for r in rows],
            [r["labels"] for r in rows],
            ovr.predict_proba(embedded(rows)),
            labels,
            threshold,
        )
    head = load_head(head_file)

    def probe(rows: list[dict]) -> tuple[list[dict], dict]:
        predictions = head.predictions(rows, embedded(rows))
        return predictions, score(spec.task.type, predictions, labels)

    return probe


def head_path(store: Store, record: dict) -> Path:
    """The probe's head file, in the run's own folder (only the file name is taken)."""
    return store.run_dir(record["id"]) / Path(record["baseline"]["head"]["file"]).name
