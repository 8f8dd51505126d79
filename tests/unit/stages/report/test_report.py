"""`tunelab report` on a small hand-built lab: every section, real content, escaped text, no
external URL, the same bytes twice, and no torch."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tunelab.core.lab import Lab
from tunelab.core.ledger import invalidate
from tunelab.core.spec import SPEC_FILE, load_spec, validate_spec
from tunelab.core.store import Store, atomic_write_json, write_jsonl
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.report.html import REPORT_FILE, SECTIONS, gather, render, write_report
from tunelab.tasks.classification import metrics

LABELS = ["a", "b", "c"]
SPEC = {
    "compass": {"kind": "production", "why": "Route support tickets to the right desk."},
    "hypothesis": {
        "behaviour": "LoRA sorts tickets better",
        "metric": "accuracy",
        "min_effect": 0.02,
    },
    "guardrails": [
        {"metric": "f1", "scope": "every_class", "max_drop": 0.05},
        {"metric": "accuracy", "scope": "overall", "max_drop": 0.05},
    ],
    "data": {"sources": [{"type": "jsonl", "path": "d"}]},
    "model": {"path": "m"},
}
FIRE = "RuntimeError: the GPU caught fire <script>alert(1)</script>"
BEFORE = "2026-11-30T09:00:00+00:00"


def predictions(rate: float, n: int = 40) -> list[dict]:
    """`n` examples per label, the first `rate` of each predicted right."""
    rows = []
    for label in LABELS:
        wrong = LABELS[(LABELS.index(label) + 1) % 3]
        for i in range(n):
            right = i < round(n * rate)
            rows.append(
                {"id": f"{label}{i:02d}", "gold": label, "predicted": label if right else wrong}
            )
    return rows


def add_run(lab: Lab, name: str, kind: str, status: str = "completed", **extra) -> str:
    run_id, run_dir = lab.store.new_run(name)
    record = {
        "id": run_id,
        "name": name,
        "kind": kind,
        "status": status,
        "data_version": "v1",
        "task": "classification",
        "method": name,
        "created": BEFORE,
        "spec": lab.spec.to_dict(),
        **extra,
    }
    if status == "completed":
        preds = predictions(0.6 if kind == "baseline" else 0.95)
        write_jsonl(run_dir / "predictions.jsonl", preds)
        record["metrics"] = metrics(
            [p["gold"] for p in preds], [p["predicted"] for p in preds], LABELS
        )
    lab.store.write_record(run_id, record)
    return run_id


def history(steps: int, lr: float) -> list[dict]:
    return [
        {"step": s, "loss": 1.1 / s, "lr": lr * (1 - s / (steps + 1))} for s in range(1, steps + 1)
    ]


def write_data_version(store: Store) -> None:
    store.set_current_data("v1")
    folder = store.data_dir("v1")
    splits = {s: {"n": 120, "labels": {k: 40 for k in LABELS}} for s in ("train", "validation")}
    atomic_write_json(folder / "manifest.json", {"labels": LABELS, "created": BEFORE})
    atomic_write_json(
        folder / "report.json",
        {
            "version": "v1",
            "rows_read": 400,
            "kept": 360,
            "quarantined": 25,
            "duplicates_removed": 15,
            "labels": LABELS,
            "splits": splits,
            "cleaning": {"whitespace": 12},
            "quarantine": {"reasons": {"bad_encoding": 3, "label_conflict": 22}},
            "duplicates": {
                "policy": "drop_from_train",
                "counts": {"train-test": 9, "near:train-validation": 6},
                "pairs_total": 15,
            },
            "conflicts": {
                "policy": "quarantine",
                "groups": 11,
                "rows": 22,
                "examples": [{"answers": ["a", "b"], "ids": ["t1.txt", "t7.txt"]}],
            },
            "warnings": ["tech is rare in train"],
        },
    )


def write_other_records(lab: Lab, chosen: str) -> None:
    """What `size`, `plan`, `final` and `export` write, by hand."""
    root = lab.store.root
    atomic_write_json(
        root / "sizing" / "v1-abc.json",
        {
            "device": "cpu",
            "method": "lora",
            "precision": "fp32",
            "seq_len": {"value": 128},
            "microbatch": 8,
            "estimate": {
                "components_mb": {"weights": 90.0, "gradients": 1.5, "optimizer_state": 3.0},
                "peak_mb": 410.0,
                "peak_phase": "loss_backward",
            },
            "measured_peak_mb": 432.5,
            "error_pct": -5.2,
            "variants": [
                {"name": "plain", "microbatch": 8, "accumulation": 1, "checkpointing": False}
                | {"estimated_peak_mb": 410.0, "measured_peak_mb": 432.5, "error_pct": -5.2},
                {"name": "checkpointing", "accumulation": 1, "checkpointing": True, "oom": True}
                | {"error": "out of memory at microbatch 8"},
            ],
            "largest_microbatch": {"value": 32},
            "advice": {"fits": True, "microbatch": 8, "accumulation": 2, "global_batch": 16},
        },
    )
    phases = [
        {"name": "initial checks", "hours": 1.25, "what": "`tunelab check` there"},
        {"name": "experiments", "hours": 60.0, "what": "variants, one change each"},
        {"name": "export and verify", "hours": 0.5, "what": "`tunelab export RUN`"},
    ]
    atomic_write_json(
        root / "plans" / "p001.json",
        {"days": 3, "hours_total": 72.0, "phases": phases, "cost": 123.4, "warnings": ["tight"]},
    )
    interval = {"metric": "accuracy", "low": 0.874, "high": 0.941, "level": 0.95, "n": 300}
    final = {
        "run": chosen,
        "primary_metric": "accuracy",
        "metrics": {"accuracy": 0.91},
        "interval": interval,
    }
    atomic_write_json(root / "finals" / f"1-{chosen}.json", final)
    lab.store.log_event(
        "final",
        run=chosen,
        reason="chosen on validation",
        repeated=False,
        verdict="improved",
        file=f".tunelab/finals/1-{chosen}.json",
    )
    export = {"run": chosen, "bundle": "bundles/tickets-lora", "created": BEFORE}
    atomic_write_json(root / "exports" / f"1-{chosen}.json", export | {"verified": None})


def build_lab(path: Path) -> Lab:
    path.mkdir(parents=True, exist_ok=True)
    (path / SPEC_FILE).write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    lab = Lab(path.resolve(), validate_spec(SPEC), Store(path), None)
    write_data_version(lab.store)
    add_run(lab, "probe", "baseline")
    lora = add_run(
        lab, "lora", "variant", parent="r001-probe", training={"history": history(8, 1e-3)}
    )
    add_run(
        lab,
        "stopped",
        "variant",
        "interrupted",
        checkpoint="checkpoint",
        error="Traceback\nTrainingInterrupted: SIGTERM",
    )
    add_run(
        lab, "crash", "variant", "failed", error=f"Traceback (most recent call last):\n{FIRE}\n"
    )
    gone = add_run(lab, "gone", "variant", "running", process={"pid": 1, "host": "elsewhere"})
    atomic_write_json(lab.store.runs_dir / gone / "heartbeat.json", {"time": BEFORE})
    leaky = add_run(lab, "leaky", "variant", training={"history": history(8, 5e-4)})
    invalidate(lab.store, leaky, "trained on a leaked validation file")
    compare(lab)
    write_other_records(lab, lora)
    return lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return build_lab(tmp_path_factory.mktemp("report") / "tickets")


@pytest.fixture(scope="module")
def page(lab) -> str:
    return (lab.path / write_report(lab)["file"]).read_text(encoding="utf-8")


def section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}">')
    return page[start : page.index("</section>", start)]


def test_every_section_has_its_heading_and_real_content(page):
    for anchor, title in SECTIONS:
        assert f"<h2>{title}</h2>" in section(page, anchor)
    assert "Route support tickets to the right desk." in section(page, "compass")
    data = section(page, "data")
    assert "label_conflict" in data and "train-test" in data and "11 text(s)" in data
    runs = section(page, "runs")
    for state in ("completed", "interrupted", "failed", "invalid", "lost"):
        assert f">{state}</span>" in runs
    assert "r002-lora" in runs and "TrainingInterrupted: SIGTERM" in runs
    assert "RuntimeError: the GPU caught fire" in runs
    assert "trained on a leaked validation file" in runs and "elsewhere" in runs
    assert section(page, "curves").count("<svg") == 1
    comparison = section(page, "comparison")
    assert "c001" in comparison and ">improved on one seed</span>" in comparison
    assert comparison.count("<svg") == 3  # the primary metric and one per guardrail
    assert "<svg" in section(page, "groups") and "<svg" in section(page, "memory")
    assert section(page, "confusion").count('class="confusion"') == 2
    assert "out of memory" in section(page, "memory")
    plan = section(page, "plan")
    assert "<svg" in plan and "initial checks" in plan and "<code>tunelab check</code>" in plan
    assert "chosen on validation" in section(page, "finals")
    assert "(95%: 87.4% to 94.1%)" in section(page, "finals")
    exports = section(page, "exports")
    assert "bundles/tickets-lora" in exports and "not yet" in exports


def test_editing_the_spec_after_the_runs_changes_nothing_on_the_page(tmp_path):
    """The compass section, like the rest, shows what the runs recorded: the reference's
    hypothesis and guardrails, which the verdicts beside them were judged by."""
    lab = build_lab(tmp_path / "tickets")
    before = render(gather(lab))
    compass = section(before, "compass")
    assert "As recorded with run <code>r001-probe</code>" in compass
    assert "the reference of comparison <code>c001</code>" in compass
    edited = SPEC | {
        "compass": {"kind": "research", "why": "A sentence written after the runs."},
        "hypothesis": {"behaviour": "something else", "metric": "macro_f1", "min_effect": 0.1},
        "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 0.2}],
        "model": {"path": "another-model"},
    }
    (lab.path / SPEC_FILE).write_text(yaml.safe_dump(edited), encoding="utf-8")
    reopened = Lab(lab.path, load_spec(lab.path / SPEC_FILE), Store(lab.path), None)
    after = render(gather(reopened))
    assert section(after, "compass") == compass
    assert "written after the runs" not in after and "another-model" not in after
    assert after == before  # the whole page is read from the records


def test_text_is_escaped_and_nothing_is_fetched(page):
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page)
    assert "url(http" not in page and "@import" not in page


def test_an_empty_lab_says_none_yet_in_every_section(tmp_path):
    empty = Lab(tmp_path, validate_spec(SPEC), Store(tmp_path), None)
    page = render(gather(empty))
    assert "From the current <code>tunelab.yaml</code>" in section(page, "compass")
    for anchor, title in SECTIONS[1:]:
        assert f"<h2>{title}</h2>" in section(page, anchor)
        assert "none yet" in section(page, anchor), anchor


def test_the_same_lab_gives_the_same_bytes(lab, page):
    first, second = write_report(lab), write_report(lab)
    assert first == second and first["file"] == str(lab.path / REPORT_FILE)
    assert first["bytes"] == len(page.encode("utf-8")) and first["sections"][0] == "compass"
    events = [e for e in lab.store.events() if e["event"] == "report"]
    assert events[-1]["file"] == REPORT_FILE and events[-1]["sha256"] == first["sha256"]


def test_out_writes_where_asked_and_only_there(lab, tmp_path):
    before = sorted(p.name for p in lab.path.iterdir())
    result = write_report(lab, tmp_path / "elsewhere" / "page.html")
    assert Path(result["file"]).is_file() and sorted(p.name for p in lab.path.iterdir()) == before
    into_folder = write_report(lab, tmp_path / "elsewhere")
    assert into_folder["file"] == str(tmp_path / "elsewhere" / REPORT_FILE)
    new = write_report(lab, f"{tmp_path}/pages/new/")  # `--out pages/new/` wrote a file `new`
    assert new["file"] == str(tmp_path / "pages" / "new" / REPORT_FILE)


def test_a_read_only_lab_s_page_is_written_where_asked_and_said_not_logged(
    lab, tmp_path, monkeypatch
):
    """`report --out ELSEWHERE` on a read-only lab wrote the page, then failed (exit 2) on the
    event log, saying nothing was left."""

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(lab.store.log_path))

    monkeypatch.setattr(lab.store, "log_event", read_only)
    result = write_report(lab, tmp_path / "page.html")
    assert Path(result["file"]).is_file()
    assert result["not_logged"] == f"{lab.store.log_path} may not be written"


def test_the_report_never_imports_torch(lab):
    script = (
        "import sys, json; from pathlib import Path\n"
        "from tunelab.core.lab import Lab; from tunelab.core.spec import load_spec\n"
        "from tunelab.core.store import Store\n"
        "from tunelab.stages.report.html import write_report\n"
        "p = Path(sys.argv[1]); out = Path(sys.argv[2])\n"
        "r = write_report(Lab(p, load_spec(p / 'tunelab.yaml'), Store(p), None), out)\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'sha': r['sha256']}))\n"
    )
    out = lab.path.parent / "fresh.html"
    done = subprocess.run(
        [sys.executable, "-c", script, str(lab.path), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"torch": False, "sha": write_report(lab)["sha256"]}


def test_a_run_invalidated_after_its_final_or_export_is_marked_there(lab, tmp_path):
    """The bundle and test-access sections kept showing an invalid run's old "improved"."""
    from tunelab.stages.report import handover

    runs = {r["name"]: r["id"] for r in lab.store.runs()}
    assert handover.invalidated(lab.store, runs["leaky"]) == "trained on a leaked validation file"
    assert handover.invalidated(lab.store, runs["lora"]) is None
    exported = tmp_path / "1-leaky.json"
    atomic_write_json(exported, {"run": runs["leaky"], "limitations": {"verdict": "improved"}})
    shown = handover.export(exported, lab.store)
    assert (
        shown["verdict"] == "improved" and shown["invalid"] == "trained on a leaked validation file"
    )


def test_a_run_s_note_names_its_overfitting_and_the_step_it_kept():
    """The page drew the validation curve, but its text never said the run overfitted, and
    its runs table gave 40 steps for weights that were step 8's."""
    from tunelab.stages.report.sections import _note

    record = {
        "reason": "a planted overfit",
        "training": {
            "steps": 40,
            "validation": {"overfitting": {"step": 20, "message": "validation loss rose"}},
            "kept": {"rule": "best validation loss", "step": 8, "validation_loss": 1.1},
        },
    }
    assert _note(record, "completed") == (
        "made because: a planted overfit; while it trained, validation loss rose; its weights "
        "are step 8's (`training.keep: best`)"
    )
    assert _note({"training": {"steps": 40, "kept": {"rule": "last"}}}, "completed") == ""
