"""A multilabel lab through the CLI on the tiny BERT: data (label sets, per-label counts, the
quarantine), baseline (majority set, one-vs-rest probe), check, run (LoRA, and full fine-tuning
from the probe), compare (micro F1, per-label guardrails, McNemar on exact sets) and final, which
applies the threshold recorded on validation and never chooses one on the test split."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from conftest import tl
from tunelab.core.store import Store, read_jsonl
from tunelab.tasks import multilabel

TOPICS = {
    "business": "market shares profits bank interest rates economy forecasts grew",
    "sport": "team match goal fans striker scored club cup final won",
    "tech": "phone chip screen software update security browser network faster",
}
SETS = [["business"], ["sport"], ["tech"], ["business", "tech"], ["sport", "tech"], []]
LABELS = ["business", "sport", "tech"]


def tagged_rows(n: int = 90) -> list[dict]:
    """Texts made of their topics' words (none: the weather), a set of labels each."""
    rng = random.Random(0)
    rows = []
    for i in range(n):
        labels = SETS[i % len(SETS)]
        vocab = " ".join(TOPICS[t] for t in labels).split() or ["weather", "rain", "sun", "cloud"]
        rows.append(
            {
                "text": " ".join(rng.choice(vocab) for _ in range(8)) + f" story {i}",
                "topics": labels,
            }
        )
    return rows


def multilabel_lab(root: Path, model: Path) -> Path:
    root.mkdir()
    rows = tagged_rows()
    rows[10]["topics"] = ["sport", "weather"]  # line 11: not among task.labels
    (root / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "hypothesis": {"behaviour": "topics", "metric": "micro_f1", "min_effect": 0.01},
        "guardrails": [
            {"metric": "f1", "scope": "every_class", "max_drop": 0.05},
            {"metric": "subset_accuracy", "scope": "overall", "max_drop": 0.05},
        ],
        "task": {"type": "multilabel", "labels": LABELS},
        "data": {
            "sources": [{"type": "jsonl", "path": "docs.jsonl"}],
            "fields": {"label": "topics"},
            "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        },
        "model": {"path": str(model), "max_length": 32},
        "method": {
            "type": "lora",
            "r": 4,
            "alpha": 8,
            "target_modules": ["query", "value"],
            "modules_to_save": ["classifier"],
        },
        "training": {"lr": 1e-2, "global_batch": 8, "microbatch": 4, "budget": {"steps": 12}},
        "evaluation": {"batch_size": 16},
    }
    (root / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    return root


def test_a_multilabel_lab_from_data_to_final(tmp_path, tiny_bert, capsys, monkeypatch):
    lab = str(multilabel_lab(tmp_path / "lab", tiny_bert))
    code, data = tl(capsys, "data", "--lab", lab)
    assert code == 0, data
    assert (data["rows_read"], data["kept"], data["quarantine"]["reasons"]) == (
        90,
        89,
        {"unknown_label": 1},
    )
    (bad,) = read_jsonl(Path(lab) / data["quarantine"]["file"])
    assert bad["line"] == 11 and "'weather'" in bad["reason"]
    assert data["labels"] == LABELS
    validation = data["splits"]["validation"]
    assert all(validation["labels"].values()) and validation["no_label"] > 0
    assert data["label_sets"]["train"]["distinct_sets"] == 6

    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0, base
    majority, probe = base["runs"]
    assert majority["baseline"]["label_set"] in SETS and "threshold" not in majority["metrics"]
    assert probe["baseline"]["model"].endswith("(one-vs-rest)")
    chosen = probe["metrics"]["threshold"]
    assert chosen["chosen_on"] == "validation" and chosen["value"] in multilabel.THRESHOLD_GRID
    assert set(probe["metrics"]) >= {"micro_f1", "macro_f1", "subset_accuracy", "per_class"}

    code, check = tl(capsys, "check", "--lab", lab)
    assert code == 0 and check["passed"], [i for i in check["items"] if not i["ok"]]
    # as `init --task multilabel` writes it: the tiny BERT's probe start does not survive
    # dropout, which the check says, leaving its loss item unjudged rather than failed
    code, lp_ft = tl(capsys, "check", "--lab", lab, "method.head_init=probe")
    items = {i["name"]: i for i in lp_ft["items"]}
    assert code == 0 and lp_ft["passed"], items["loss"]["detail"]
    assert items["head_init"]["warning"] and items["loss"]["not_checked"]
    assert (
        "whose start does not survive training mode (head_init's warning)"
        in items["loss"]["detail"]
    )

    code, lora = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and lora["status"] == "completed", lora
    threshold = lora["metrics"]["threshold"]
    assert threshold["chosen_on"] == "validation" and threshold["metric"] == "micro_f1"
    predictions = read_jsonl(Store(lab).run_dir(lora["id"]) / "predictions.jsonl")
    assert {p["threshold"] for p in predictions} == {threshold["value"]}
    assert all(
        p["predicted"] == [x for x in LABELS if p["probs"][x] >= threshold["value"]]
        for p in predictions
    )
    config = Store(lab).run_dir(lora["id"]) / "weights" / "adapter_config.json"
    assert config.exists()

    code, probe_ft = tl(
        capsys,
        "run",
        "--lab",
        lab,
        "--name",
        "full-probe",
        "method.type=full",
        "method.head_init=probe",
    )
    assert code == 0 and probe_ft["trainable"]["head_init"]["from"] == "probe (one-vs-rest)"
    saved = json.loads((Store(lab).run_dir(probe_ft["id"]) / "weights/config.json").read_text())
    assert saved["problem_type"] == "multi_label_classification"

    code, result = tl(capsys, "compare", "--lab", lab)
    assert code == 0, result
    assert result["task"] == "multilabel" and result["primary_metric"] == "micro_f1"
    assert result["metrics"] == ["macro_f1", "micro_f1", "subset_accuracy"]
    variants = [r for r in result["runs"] if r["kind"] == "variant"]
    assert [r["id"] for r in variants] == [lora["id"], probe_ft["id"]]
    for row in variants:
        per_label, overall = row["guardrails"]
        assert per_label["scope"] == "every_class" and set(per_label["checks"]) == set(LABELS)
        assert overall["metric"] == "subset_accuracy" and set(overall["checks"]) == {"overall"}
        assert "mcnemar" in row["vs_reference"] and row["verdict"] in {
            "improved on one seed",
            "guardrail unresolved",
            "no evidence",
            "worse on one seed",
            "worse",
            "guardrail broken",
        }
        assert set(row["per_class"]) == set(LABELS)

    def never_on_test(*_args, **_kw):
        raise AssertionError("final chose a threshold on the test split")

    monkeypatch.setattr(multilabel, "choose_threshold", never_on_test)
    for run in (lora, probe):  # a trained variant and the probe: each its own threshold
        recorded = run["metrics"]["threshold"]["value"]
        code, final = tl(capsys, "final", run["id"], "--lab", lab, "--reason", "the e2e test")
        assert code == 0, final
        assert final["metrics"]["threshold"]["value"] == recorded
        assert "applied" in final["metrics"]["threshold"]["rule"]
        assert final["metrics"]["n"] == data["splits"]["test"]["n"]
    code, final = tl(capsys, "final", majority["id"], "--lab", lab, "--reason", "a constant")
    assert code == 0 and "threshold" not in final["metrics"]  # a constant set has none
    assert final["metrics"]["empty"]["predicted"] in (0, final["metrics"]["n"])

    # the handover: its merged form names the class that loads it, and the threshold applied
    code, exported = tl(capsys, "export", lora["id"], "--lab", lab, "--merge")
    assert code == 0 and exported["merge_check"]["agree"], exported["merge_check"]
    card = (Path(exported["bundle"]) / "README.md").read_text()
    assert "`AutoModelForSequenceClassification.from_pretrained(merged/)`" in card
    assert f"at least {threshold['value']:g}, the decision threshold chosen on validation" in card
    code, verified = tl(capsys, "verify", exported["bundle"])
    assert code == 0 and verified["passed"], verified
