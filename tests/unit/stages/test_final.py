"""The sealed test split: opened only by `final`, checked against its hash, every access
recorded, and every access after the first one needing a reason."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from final_labs import FOR_REPORT, cli, lab_with_baselines  # noqa: F401 (pytest finds the fixture here)

from conftest import topic_rows
from tunelab.cli import main
from tunelab.core.digest import sha256_file
from tunelab.core.lab import open_lab
from tunelab.core.seal import SealBrokenError, final_accesses
from tunelab.core.store import SPLITS, SealedError, Store
from tunelab.modeling.model import load_encoder, load_tokenizer
from tunelab.modeling.probe import features, load_head
from tunelab.stages.final.sealed import FinalError, run_final
from tunelab.stages.fsck import fsck

# --- a process-wide watch on reads of any `test.jsonl` ----------------------------------------
# An audit hook sees every open (builtins.open, io.open, Path.read_*, os.open) whatever the
# module that does it; hooks cannot be removed, so this one only records while a phase is set.
_PHASE: list[str] = []
_READS: list[tuple[str, str]] = []


def _audit(event: str, args: tuple) -> None:
    if event != "open" or not _PHASE:
        return
    path, _, flags = args
    if isinstance(path, int) or Path(os.fsdecode(path)).name != "test.jsonl":
        return
    if isinstance(flags, int) and flags & os.O_ACCMODE in (os.O_RDONLY, os.O_RDWR):
        _READS.append((_PHASE[-1], os.fsdecode(path)))


sys.addaudithook(_audit)


@pytest.fixture
def watch():
    """`with_phase(name)` labels reads of test.jsonl; the fixture returns the list of reads."""
    _READS.clear()

    class Phase:
        def __init__(self, name: str):
            self.name = name

        def __enter__(self):
            _PHASE.append(self.name)

        def __exit__(self, *exc):
            _PHASE.pop()

    yield Phase, _READS
    _PHASE.clear()


def test_no_command_but_final_reads_the_test_split(make_lab, capsys, watch):
    phase, reads = watch
    lab = str(make_lab())
    report = cli(capsys, "data", "--lab", lab)  # data writes the seal (and hashes it)
    for command in (
        ["baseline"],
        ["inspect", "--split", "validation"],
        ["run", "--name", "lora"],
        ["compare"],
        ["runs"],
        ["data"],  # the version exists: reused, not reread
    ):
        with phase(command[0]):
            cli(capsys, command[0], "--lab", lab, *command[1:])
    assert reads == []

    with phase("final"):
        result = run_final(open_lab(Path(lab)), "r003-lora", "the seal's own test")
    assert reads and {p for p, _ in reads} == {"final"}  # the watch does see the read
    assert result["examples"] == result["metrics"]["n"] == report["splits"]["test"]["n"]
    assert result["split"] == "test" and not result["repeated"]
    assert result["validation_metrics"]["n"] == report["splits"]["validation"]["n"]
    assert set(result["metrics"]) >= {"accuracy", "macro_f1", "per_class"}


def test_the_store_refuses_to_read_the_test_split(tmp_path):
    with pytest.raises(SealedError, match="only `tunelab final RUN`"):
        Store(tmp_path).read_split("v1", "test")


def test_final_is_recorded_and_a_second_look_needs_a_reason(lab_with_baselines):
    lab_path, report = lab_with_baselines
    lab = open_lab(lab_path)
    first = run_final(lab, "r001-majority", FOR_REPORT)
    n_test = report["splits"]["test"]["n"]
    assert first["metrics"]["n"] == n_test and first["n"] == 1
    assert first["file"] == ".tunelab/finals/1-r001-majority.json"
    stored = json.loads((lab_path / first["file"]).read_text())
    assert stored["metrics"] == first["metrics"] and stored["test_sha256"] == first["test_sha256"]
    label = lab.store.read_record("r001-majority")["baseline"]["label"]
    share = report["splits"]["test"]["labels"][label] / n_test
    assert first["metrics"]["accuracy"] == pytest.approx(share)
    interval = first["interval"]  # no hypothesis: the task's default metric, over the examples
    assert interval["metric"] == "macro_f1" and interval["n"] == n_test
    assert interval["low"] <= first["metrics"]["macro_f1"] <= interval["high"]
    assert stored["interval"] == interval

    for reason in (None, "  "):
        with pytest.raises(FinalError, match=r"already opened .* for r001-majority") as err:
            run_final(lab, "r001-majority", reason)
        assert '--reason "..."' in str(err.value)
    assert len(final_accesses(lab.store)) == 1  # a refusal is not an access

    again = run_final(lab, "r001-majority", "checking the majority figure for the report")
    assert again["repeated"] and again["n"] == 2
    assert again["earlier"] == [
        {"time": first["time"], "run": "r001-majority", "reason": FOR_REPORT}
    ]
    assert again["metrics"] == first["metrics"]
    accesses = final_accesses(lab.store)
    assert [(a["run"], a["reason"], a["repeated"]) for a in accesses] == [
        ("r001-majority", FOR_REPORT, False),
        ("r001-majority", "checking the majority figure for the report", True),
    ]
    assert all(a["time"] and a["test_sha256"] == first["test_sha256"] for a in accesses)


def test_a_changed_test_file_is_refused_naming_the_file_and_both_hashes(lab_with_baselines):
    lab_path, report = lab_with_baselines
    lab = open_lab(lab_path)
    version = report["version"]
    path = lab.store.data_dir(version) / "test.jsonl"
    sealed = lab.store.data_manifest(version)["test_sha256"]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[1:]))  # one example quietly dropped
    with pytest.raises(SealBrokenError) as err:
        run_final(lab, "r001-majority", FOR_REPORT)
    message = str(err.value)
    assert str(path) in message and sealed in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() in message
    assert final_accesses(lab.store) == []
    assert not (lab.store.root / "finals").exists()


def test_runs_that_cannot_be_finalised_are_refused_before_the_seal(lab_with_baselines, watch):
    phase, reads = watch
    lab = open_lab(lab_with_baselines[0])
    probe = lab.store.read_record("r002-probe")
    head = lab.store.run_dir("r002-probe") / probe["baseline"]["head"]["file"]
    head.write_bytes(head.read_bytes() + b" ")  # the stored head changed after it was fitted
    with phase("final"), pytest.raises(FinalError, match="the probe's head changed"):
        run_final(lab, "r002-probe", FOR_REPORT)
    old = {**probe, "baseline": {k: v for k, v in probe["baseline"].items() if k != "head"}}
    lab.store.write_record("r002-probe", old)  # a probe recorded before heads were stored
    with phase("final"), pytest.raises(FinalError, match="recorded before tunelab stored"):
        run_final(lab, "r002-probe", FOR_REPORT)
    record = lab.store.read_record("r001-majority")
    lab.store.write_record("r001-majority", {**record, "status": "invalid"})
    with phase("final"), pytest.raises(FinalError, match="is invalid"):
        run_final(lab, "r001-majority", None)
    ghost, _ = lab.store.new_run("ghost")
    lab.store.write_record(ghost, {**record, "id": ghost, "kind": "variant", "method": "lora"})
    with phase("final"), pytest.raises(FinalError, match="no saved weights"):
        run_final(lab, ghost, None)
    assert reads == [] and final_accesses(lab.store) == []


def test_the_probe_baseline_is_scored_on_test_with_its_stored_head(lab_with_baselines):
    lab_path, report = lab_with_baselines
    lab = open_lab(lab_path)
    result = run_final(lab, "r002-probe", FOR_REPORT)
    assert result["metrics"]["n"] == report["splits"]["test"]["n"]

    # the same figure by hand: the stored head on the frozen encoder's embeddings of test
    record = lab.store.read_record("r002-probe")
    head = load_head(lab.store.run_dir("r002-probe") / record["baseline"]["head"]["file"])
    test = lab.store.data_dir(record["data_version"]) / "test.jsonl"
    rows = [json.loads(line) for line in test.read_text().splitlines()]
    spec = lab.spec
    encoder = load_encoder(spec.model, lab.path, lab.device)
    tokenizer = load_tokenizer(spec.model, lab.path)
    x = features(encoder, tokenizer, rows, head.classes, spec.model.max_length, 4, lab.device)
    right = [p["predicted"] == p["gold"] for p in head.predictions(rows, x)]
    assert result["metrics"]["accuracy"] == pytest.approx(sum(right) / len(rows))

    # each test example's prediction is kept beside the record: the score can be audited
    kept = lab.path / result["predictions"]["file"]
    assert kept.name == "1-r002-probe.predictions.jsonl"
    scored = [json.loads(line) for line in kept.read_text().splitlines()]
    assert len(scored) == len(rows) and sha256_file(kept) == result["predictions"]["sha256"]
    assert sum(p["predicted"] == p["gold"] for p in scored) == sum(right)
    assert fsck(lab.path)["problems"] == []
    kept.write_text(kept.read_text().replace(scored[0]["predicted"], "edited", 1))
    (problem,) = fsck(lab.path)["problems"]
    assert problem["check"] == "final" and problem["path"].endswith(kept.name)


def test_a_generative_lab_finalises_its_zero_shot_baseline(make_extraction_lab, capsys):
    lab_path = make_extraction_lab()
    report = cli(capsys, "data", "--lab", str(lab_path))
    (zero_shot,) = cli(capsys, "baseline", "--lab", str(lab_path))["runs"]
    result = run_final(open_lab(lab_path), zero_shot["id"], FOR_REPORT)
    assert result["metrics"]["n"] == report["splits"]["test"]["n"]
    assert set(result["metrics"]) >= {"json_valid", "exact_match", "per_field"}
    assert result["primary_metric"] == "exact_match"


def test_a_run_not_judged_improved_needs_a_reason_which_is_recorded(lab_with_baselines, watch):
    phase, reads = watch
    lab = open_lab(lab_with_baselines[0])
    with phase("final"), pytest.raises(FinalError, match="no comparison has judged it"):
        run_final(lab, "r001-majority", None)
    assert reads == [] and final_accesses(lab.store) == []
    result = run_final(lab, "r001-majority", FOR_REPORT)
    (access,) = final_accesses(lab.store)
    assert access["reason"] == FOR_REPORT and (access["verdict"], access["comparison"]) == (
        None,
        None,
    )
    assert result["reason"] == FOR_REPORT


def test_the_final_counts_the_test_rows_that_have_a_copy_in_validation(make_lab, capsys):
    """`tunelab data` removes train copies only: a test row copied in validation stays, and a
    run chosen on validation was chosen partly on it. The final counts those rows and says so."""
    from tunelab.core.store import read_jsonl
    from tunelab.data.content import normalise
    from tunelab.views.final import final as final_view
    from tunelab.views.style import console

    rows = topic_rows()
    rows += [dict(r) for r in rows[::3]]  # a third of the rows twice, wherever they land
    data = {
        "sources": [{"type": "jsonl", "path": "docs.jsonl"}],
        "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        "dedup": {"near": False},  # exact copies only: the count below is of those
    }
    lab_path = make_lab(rows, data=data)
    report = cli(capsys, "data", "--lab", str(lab_path))
    cli(capsys, "baseline", "--lab", str(lab_path))
    from sklearn.metrics import f1_score

    folder = lab_path / ".tunelab" / "data" / report["version"]
    split = {s: read_jsonl(folder / f"{s}.jsonl") for s in SPLITS}
    in_validation = {normalise(r["text"]) for r in split["validation"]}
    copied = [r for r in split["test"] if normalise(r["text"]) in in_validation]
    kept = [r["label"] for r in split["test"] if normalise(r["text"]) not in in_validation]
    assert copied and kept  # the seeded split puts some copies on both sides

    result = run_final(open_lab(lab_path), "r001-majority", FOR_REPORT)
    label = Store(lab_path).read_record("r001-majority")["baseline"]["label"]
    labels = report["labels"]
    assert result["copied_in_validation"] == {
        "rows": len(copied),
        "pairs": report["duplicates"]["counts"]["validation-test"],
        "file": f".tunelab/data/{report['version']}/duplicates.jsonl",
        "without": {  # the primary metric on the test rows the choice did not see
            "n": len(kept),
            "metric": "macro_f1",
            "value": pytest.approx(
                f1_score(kept, [label] * len(kept), labels=labels, average="macro", zero_division=0)
            ),
        },
    }
    final_view(result, console())
    shown = " ".join(capsys.readouterr().out.split())
    value = 100 * result["copied_in_validation"]["without"]["value"]
    n = result["metrics"]["n"]
    assert f"{len(copied)} of the {n} test rows have an exact or near copy" in shown
    assert f"without them ({len(kept)} rows): macro f1 {value:.1f}%" in shown


def test_the_final_view_shows_bits_per_byte_as_it_is():
    """A pretrain lab's final read "bits per byte: validation 255.1% -> test 258.7% (+3.7
    points)": not a share, so no percent and no points."""
    import io

    from rich.console import Console

    from tunelab.views.final import final as final_view

    result = {
        "run": "r002-full",
        "data_version": "65052606dfa4",
        "test_sha256": "243dd6b5c87c" * 4,
        "primary_metric": "bits_per_byte",
        "metrics": {"n": 21, "bits_per_byte": 2.5873, "loss": 6.73, "perplexity": 838.4},
        "validation_metrics": {"bits_per_byte": 2.5506},
        "interval": {
            "metric": "bits_per_byte",
            "low": 2.41,
            "high": 2.7702,
            "level": 0.95,
            "n": 21,
        },
        "n": 1,
        "file": ".tunelab/finals/1-r002-full.json",
        "repeated": False,
        "earlier": [],
    }
    out = io.StringIO()
    final_view(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "bits per byte: validation 2.5506 -> test 2.5873 (+0.0367, lower is better)" in text
    assert "bits per byte 95% interval 2.4100 to 2.7702 over the 21 test examples" in text
    assert "%" not in text.replace("95% interval", "") and "points" not in text


def test_test_targets_scoring_cannot_read_stop_final_before_the_opening_is_logged():
    from types import SimpleNamespace

    from tunelab.core.errors import TunelabError
    from tunelab.stages.final.sealed import _check_targets

    task = SimpleNamespace(type="extraction", required=["name", "section"], json_schema={})
    spec = SimpleNamespace(task=task)
    rows = [{"id": "p1", "origin": "pages.jsonl:4", "target": {"name": "ls"}}]
    with pytest.raises(TunelabError) as err:
        _check_targets(spec, rows, "0123456789abcdef")
    said = str(err.value)
    assert said.startswith("1 test row(s) have a target that scoring cannot read: p1 (pages")
    assert said.endswith("Nothing was scored and no opening was recorded.")
    _check_targets(spec, [{"id": "p2", "target": {"name": "ls", "section": "1"}}], "0123")


def test_only_a_verdict_against_the_strongest_baseline_opens_the_seal(tmp_path):
    """`compare --against r001-majority` read "improved" where the probe's comparison read
    "worse", and `final` opened the test split on it without a reason."""
    from tunelab.core.files import atomic_write_json
    from tunelab.stages.final.sealed import latest_verdict

    folder = tmp_path / ".tunelab" / "comparisons"

    def judged(cid: str, reference: str, rule: str | None, verdict: str) -> None:
        row = {"id": "r003-s0", "verdict": verdict}
        record = {"id": cid, "created": "t", "file": f".tunelab/comparisons/{cid}.json"}
        record |= {"inputs": [], "runs": [row], "reference": reference}
        atomic_write_json(
            folder / f"{cid}.json", record | ({"reference_rule": rule} if rule else {})
        )

    judged("c001", "r002-probe", "strongest baseline", "worse")
    judged("c002", "r001-majority", "--against", "improved")
    assert latest_verdict(Store(tmp_path), "r003-s0") == ("worse", "c001")
    assert Store(tmp_path).judgement("r003-s0")[0]["id"] == "c002"  # the newest, for the rest
    judged("c003", "r002-probe", None, "improved")  # a record from before the rule was kept
    assert latest_verdict(Store(tmp_path), "r003-s0") == ("improved", "c003")


@pytest.mark.parametrize(
    "verdict",
    ["improved on one seed", "within seed noise", "no evidence", "worse", "guardrail broken", None],
)
def test_every_verdict_but_improved_needs_a_reason_to_open_the_seal(verdict):
    """The gate was tested on a run no comparison had judged only: letting any judged verdict
    through, or a one-seed gain, went unnoticed."""
    from tunelab.stages.final.sealed import _check_verdict

    with pytest.raises(FinalError, match=f"its verdict in comparison c004 is {verdict or 'none'}"):
        _check_verdict("r003-lora", verdict, "c004", None)
    _check_verdict("r003-lora", verdict, "c004", FOR_REPORT)  # said why: recorded, and opened
    _check_verdict("r003-lora", "improved", "c004", None)


def test_a_second_seed_of_an_arm_is_judged_by_its_arms_row(tmp_path):
    """compare judges an arm in its first run's row; final and the report read that verdict for
    every seed of it."""
    from tunelab.core.files import atomic_write_json
    from tunelab.stages.final.sealed import latest_verdict

    rows = [{"id": "r003-lr", "verdict": "improved"}, {"id": "r004-lr-s1", "arm": "r003-lr"}]
    record = {"id": "c001", "created": "t", "file": ".tunelab/comparisons/c001.json"}
    record |= {"inputs": [], "runs": rows, "reference": "r002-probe"}
    atomic_write_json(tmp_path / ".tunelab" / "comparisons" / "c001.json", record)
    assert latest_verdict(Store(tmp_path), "r004-lr-s1") == ("improved", "c001")
    assert latest_verdict(Store(tmp_path), "r009-other") == (None, None)


@pytest.mark.parametrize("run", ["r001-majority", "r002-probe"])
def test_an_empty_test_split_is_refused_before_the_opening_is_logged(make_lab, capsys, run):
    """A lab split by ratios with no test share: the probe's final was an IndexError (exit 1),
    the majority's "no examples to score", and each try logged an opening with no result."""
    rows = [
        {**r, "part": "validation" if i % 3 == 0 else "train"} for i, r in enumerate(topic_rows())
    ]
    lab = make_lab(rows)
    by_column = ["data.fields.split=part"]  # no row says test
    report = cli(capsys, "data", "--lab", str(lab), *by_column)
    assert report["splits"]["test"]["n"] == 0
    cli(capsys, "baseline", "--lab", str(lab), *by_column)
    code = main(["final", "--lab", str(lab), run, "--reason", "empty", "--json"])
    said = json.loads(capsys.readouterr().out)
    assert code == 2, said
    assert "is empty: nothing to score, and no opening was recorded" in said["error"]
    assert final_accesses(Store(lab)) == [] and not (lab / ".tunelab" / "finals").exists()
