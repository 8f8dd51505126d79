"""`tunelab final RUN`: open the sealed test split, once, on purpose, and record that it was.

The test split is the one measurement that was not used to choose anything. This module is
the only one that evaluates on it: `Store.read_split` refuses "test", and
`tunelab.core.seal.open_sealed` reads the file's bytes once, checks them against the sha256
that `tunelab data` recorded in the version's manifest (`test_sha256`), and parses those same
bytes, so what is evaluated is what was sealed.

Rules:
- The chosen run is evaluated once on the test split of *its own* data version, with the
  spec it was trained with (`record["spec"]`) and the shared protocol (`evaluate_rows`).
- The first access of a run whose newest comparison says `improved` needs no reason. Any
  other run (another verdict, or none), and any later access (another run, or the same
  again), needs a reason; a later one is marked `repeated: true` and names the earlier
  accesses. The verdict and its comparison are recorded with the access; all accesses are
  listed by `final_accesses` for the handover, read strictly (a damaged event line is an
  error naming it) and cross-checked against the results in `finals/`.
- Before the seal is touched, the checks `run` makes before a model loads are made on the
  run's recorded spec and the run's model is loaded (`scorers.scorer_of`): a base moved
  or changed since the run trained is refused with no opening logged. A test split with no
  rows is refused as it is read, before the opening is logged.
- The access is logged (`final` event) as soon as the test rows have been read, before the
  evaluation: a crash during evaluation still counts as having looked (a Ctrl-C or SIGTERM
  then logs `final_interrupted` too). The result is then written atomically to
  `.tunelab/finals/<n>-<run>.json`.
- A trained variant and each baseline can be finalised: `majority` (its label), `zero-shot`
  (the base model) and `probe` (its stored head, `probe_head.safetensors`, applied to the
  frozen encoder's embeddings of the test rows). A probe recorded before tunelab stored its
  head, or whose head no longer has the sha256 its record holds, is refused before the seal
  is touched.
- No per-example test predictions are stored: only the metrics leave the seal, with the primary
  metric's 95% percentile bootstrap interval over the test examples (`interval`: the examples'
  noise, not the seeds').
- Test rows with an exact or near copy in validation (`tunelab data` keeps both, whatever the
  policy: it removes train copies only) are counted from the version's duplicates.jsonl and
  shown beside the score: a run chosen on validation was chosen partly on those rows, so the
  test score is not wholly independent of the choice.
- Task multilabel: a run (and the probe) is scored at the decision threshold it chose on
  validation, read from its record (`tasks.multilabel.recorded_threshold`); none is chosen on
  the test split. The majority baseline's constant set needs none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.errors import Interrupted, TunelabError, stop_cause
from tunelab.core.files import locked, read_jsonl, write_jsonl
from tunelab.core.lab import Check, Lab, recorded_lab, recorded_spec
from tunelab.core.layout import FINAL_PREDICTIONS, FINALS, FINALS_LOCK
from tunelab.core.ledger import effective_status
from tunelab.core.run_files import require_intact_run
from tunelab.core.seal import final_accesses, open_sealed
from tunelab.core.spec import Spec
from tunelab.core.store import Store
from tunelab.modeling.identity import require_recorded_base
from tunelab.stages.final.scorers import head_path, scorer_of
from tunelab.tasks import get_task, metrics_of
from tunelab.tasks.resampled import score_interval
from tunelab.training.protocol import protocol


class FinalError(TunelabError):
    """`final` refuses: a second access without a reason, or a run it cannot evaluate."""


def latest_verdict(store: Store, run_id: str) -> tuple[str | None, str | None]:
    """The run's verdict in the newest comparison that judged it against the strongest
    baseline (`compare --against` a weaker one does not open the seal), and that comparison's
    id; (None, None) when no such comparison did."""
    found = store.judgement(run_id, strongest=True)
    return (found[1]["verdict"], found[0]["id"]) if found else (None, None)


def _check_run(store: Store, record: dict) -> None:
    """Refuse, before the seal is touched, a run that cannot be evaluated."""
    if record["status"] != "completed":
        status = effective_status(record, store.run_dir(record["id"]))  # lost, not running
        raise FinalError(f"{record['id']} is {status}: only a completed run can be finalised.")
    if record["kind"] == "baseline" and record.get("method") not in BASELINES:
        raise FinalError(
            f"{record['id']} is a {record.get('method')!r} baseline, which final cannot "
            f"evaluate; it evaluates the {', '.join(BASELINES)} baselines and trained variants."
        )
    if record["kind"] == "baseline" and record.get("method") == "probe":
        _check_head(store, record)
    if record["kind"] != "baseline":
        weights = store.run_dir(record["id"]) / record.get("weights", {}).get("dir", "weights")
        if not weights.is_dir():
            raise FinalError(f"{record['id']} has no saved weights at {weights}.")


BASELINES = ("majority", "zero-shot", "probe")
"""The baselines final can evaluate on the test split."""


def _check_head(store: Store, record: dict) -> None:
    """The probe's stored head must be there, as its record hashed it (checked without
    importing torch, so a refusal stays quick)."""
    head = (record.get("baseline") or {}).get("head")
    if not head:
        raise FinalError(
            f"{record['id']} is a probe baseline recorded before tunelab stored the probe's "
            "fitted head, so there is nothing to score on the test split. Measure it again "
            "with `tunelab baseline --name NAME` and finalise the new probe run."
        )
    path = head_path(store, record)
    if not path.is_file():
        raise FinalError(f"{path}: the probe's stored head is missing; measure it again.")
    actual = sha256_file(path)
    if actual != head.get("sha256"):
        raise FinalError(
            f"{path}: the probe's head changed since it was fitted: its record holds sha256 "
            f"{head.get('sha256')}, the file has {actual}. Restore the file or measure the "
            "probe again with `tunelab baseline --name NAME`."
        )


def _check_verdict(run_id: str, verdict: str | None, comparison: str | None, reason) -> None:
    """Only a run whose comparison said `improved` opens the seal without a reason."""
    if verdict == "improved" or (reason and reason.strip()):
        return
    said = (
        f"its verdict in comparison {comparison} is {verdict or 'none (no hypothesis)'}"
        if comparison
        else "no comparison has judged it against the lab's strongest baseline (run `tunelab "
        "compare` first; a comparison `--against` another reference does not count here)"
    )
    raise FinalError(
        f"{run_id}: {said}. The test split is for a run the validation evidence chose; to "
        'open it for this one anyway, say why with --reason "..." (it is recorded and listed '
        "in the handover)."
    )


def _check_reason(earlier: list[dict], reason: str | None) -> None:
    if earlier and not (reason and reason.strip()):
        seen = "; ".join(f"{e['time']} for {e['run']}" for e in earlier)
        raise FinalError(
            f"the test split was already opened ({seen}). Every later look weakens it as an "
            'unbiased estimate; to open it again, say why with --reason "..." (it is recorded '
            "and listed in the handover)."
        )


def _check_targets(spec: Spec, rows: list[dict], version: str) -> None:
    """No test rows, or test targets that scoring cannot read, stop `final` before the opening
    is recorded."""
    from tunelab.tasks.targets import has_targets, refuse_unscorable

    if not rows:
        raise FinalError(
            f"the test split of data version {version[:12]} is empty: nothing to score, and no "
            "opening was recorded. `tunelab data` warned of it; a test split needs rows (a "
            "data.split.test share, or rows marked test), then runs trained on that new version."
        )
    if has_targets(spec.task):
        try:
            refuse_unscorable(spec.task, rows, "test")
        except TunelabError as err:
            raise TunelabError(f"{err} Nothing was scored and no opening was recorded.") from None


def _opening(store: Store, n: int, run_id: str, event: str = "final") -> dict | None:
    """The log's line for opening `n` of the test split, for `run_id`, or None: a `final`
    beside this one may have logged the next one since, so the newest is not always it.
    `event="final_result"`: the line of its result instead."""
    found = (
        e
        for e in store.events()
        if e.get("event") == event and e.get("n") == n and e.get("run") == run_id
    )
    return next(found, None)


def copied_in_validation(store: Store, version: str) -> tuple[set[str], dict] | None:
    """The ids of the test rows of data `version` that have an exact or near copy in its
    validation split, and how many rows and pairs, with the file listing them; None when the
    version lists no pairs (a version written before duplicates.jsonl)."""
    path = store.data_dir(version) / "duplicates.jsonl"
    if not path.exists():
        return None
    rows, pairs = set(), 0
    for pair in read_jsonl(path):
        sides = (pair["a"], pair["b"])
        if sorted(side["split"] for side in sides) == ["test", "validation"]:
            pairs += 1
            rows.update(side["id"] for side in sides if side["split"] == "test")
    return rows, {"rows": len(rows), "pairs": pairs, "file": str(path.relative_to(store.lab))}


def _copied(
    store: Store,
    version: str,
    spec: Spec,
    predictions: list[dict],
    labels: list[str],
    primary: str | None,
) -> dict | None:
    """`copied_in_validation`'s counts, and the primary metric on the test rows without such a
    copy (`without`: its rows and value), the score the choice on validation did not see."""
    found = copied_in_validation(store, version)
    if found is None:
        return None
    ids, copied = found
    kept = [p for p in predictions if p["id"] not in ids]
    if ids and kept and primary:
        value = metrics_of(spec.task, kept, labels).get(primary)
        copied["without"] = {"n": len(kept), "metric": primary, "value": value}
    return copied


def run_final(
    lab: Lab,
    run_id: str,
    reason: str | None = None,
    checks: Sequence[Check] = (),
    device: str | None = None,
    base: Path | None = None,
) -> dict:
    """Evaluate `run_id` once on the sealed test split and record the access. `checks` (the
    refusals `run` makes before a model loads) are made on the run's recorded spec, and its
    model is loaded, before the split is opened: a run that cannot be scored any more (its base
    moved or changed) costs no opening. `base`: where its base is now, when it moved (`--base`).
    A `lab` without a device gets `device` (`pick_device`) once every refusal from the records
    has passed: those take no torch."""
    from tunelab.core.env import fingerprint, pick_device

    store = lab.store
    chain = store.require_intact_log("final")
    record = store.read_record(run_id)
    _check_run(store, record)
    require_intact_run(store.run_dir(run_id), record, "final")
    if record.get("method") != "majority":  # a constant needs no model
        opened = recorded_lab(store, record, checks, base)
        require_recorded_base(opened.spec.model, opened.path, record)  # the very one it trained on
    _check_reason(final_accesses(store), reason)  # said at once; again under the lock below,
    _check_verdict(run_id, *latest_verdict(store, run_id), reason)  # where a final may have run
    lab.device = lab.device or pick_device(device)
    n = out = None
    try:
        with locked(store.path(FINALS_LOCK)):  # a second `final` at once sees this one
            earlier = final_accesses(store)
            _check_reason(earlier, reason)
            verdict, comparison = latest_verdict(store, run_id)
            _check_verdict(run_id, verdict, comparison, reason)
            spec = recorded_spec(record, base)
            version = record["data_version"]
            scorer = scorer_of(lab, record, spec)
            rows, digest = open_sealed(store, version)
            _check_targets(spec, rows, version)
            n = len(earlier) + 1
            out = store.root / FINALS / f"{n}-{run_id}.json"
            access = {
                "n": n,
                "run": run_id,
                "reason": reason,
                "repeated": bool(earlier),
                "verdict": verdict,
                "comparison": comparison,
                "data_version": version,
                "test_sha256": digest,
                "examples": len(rows),
                "file": str(out.relative_to(store.lab)),
            }
            store.log_event("final", **access)
        predictions, metrics = scorer(rows)
        scored = out.with_name(f"{out.stem}{FINAL_PREDICTIONS}")  # each test example, for audit
        write_jsonl(scored, predictions)
        result = {
            **access,
            "predictions": {
                "file": str(scored.relative_to(store.lab)),
                "sha256": sha256_file(scored),
            },
            "time": _opening(store, n, run_id)["time"],
            "kind": record["kind"],
            "split": "test",
            "metrics": metrics,
            **_scored(store, spec, version, predictions, record.get("metrics")),
            "protocol": protocol(spec),
            "env": fingerprint(lab.device),
            "earlier": [{k: e.get(k) for k in ("time", "run", "reason")} for e in earlier],
            "lab_log": {"lines": chain["lines"], "head": chain["head"]},
        }
        store.save(store.lab / result["file"], result, "final_result", n=n, run=run_id)
    except KeyboardInterrupt as err:  # once the look is logged: say so, and that no result exists
        # a stop can land as the line is written: only a logged opening was one
        if n is None or out is None or _opening(store, n, run_id) is None:
            raise  # nothing was opened: the generic message is the truth
        if _opening(store, n, run_id, "final_result"):
            raise  # its result is logged (the next command finishes a cut rename): whole
        # the test predictions of a result never recorded are no one's (fsck read them clean)
        out.with_name(f"{out.stem}{FINAL_PREDICTIONS}").unlink(missing_ok=True)
        store.log_event("final_interrupted", n=n, run=run_id)
        raise Interrupted(
            stop_cause(err),
            f"the test split was opened for {run_id} (access {n}, logged) but no result was "
            "written; opening it again needs --reason.",
            run=run_id,
        ) from err
    return result


def _scored(store: Store, spec: Spec, version: str, predictions: list[dict], validation) -> dict:
    """What a final's record says of its test predictions beside their metrics: the primary
    metric, its interval over the examples, the run's validation metrics (`validation`) and the
    test rows copied in validation."""
    primary = spec.hypothesis.metric if spec.hypothesis else None
    labels = store.data_manifest(version)["labels"]
    shown = primary or get_task(spec.task.type).default_metric  # the interval's metric
    return {
        "primary_metric": primary,
        "interval": score_interval(spec.task, predictions, labels, shown),
        "validation_metrics": validation,
        "copied_in_validation": _copied(store, version, spec, predictions, labels, primary),
    }
