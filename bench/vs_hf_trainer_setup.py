"""bench/vs_hf_trainer.py's settings and data, which both tools read: the equal settings, the
BBC News articles as tunelab's folder loader reads them, distinct, split with scikit-learn and
written once to two JSONL files, and the tunelab lab over those files (checked to hold exactly
the chosen rows). Importing it sets the offline environment (`OFFLINE`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from importlib import resources
from pathlib import Path

OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TUNELAB_DEVICE": "cpu",
}
os.environ.update(OFFLINE)

TOOLS = ("trainer", "tunelab")
LR = {"lora": 5e-4, "full": 5e-5}
EQUAL_LORA = {
    "type": "lora",
    "r": 8,
    "alpha": 16,
    "dropout": 0.1,
    "target_modules": ["query", "value"],
    "modules_to_save": ["classifier"],
}
EQUAL = {
    "model": {"dtype": "float32", "max_length": 256},
    "method": EQUAL_LORA,
    "training": {
        "optimizer": "adamw",
        "lr": LR["lora"],
        "weight_decay": 0.0,
        "schedule": "linear",
        "warmup_steps": 0,
        "global_batch": 16,
        "microbatch": 16,
        "budget": {"epochs": 1},
        "seed": 0,
        "max_grad_norm": 1.0,
        "precision": "fp32",
    },
    "evaluation": {"batch_size": 64},
}
FULL = {"method": {"type": "full"}, "training.lr": LR["full"]}
"""A full run's overrides of the lab's LoRA spec (as in the demo)."""
MAX_LENGTH = EQUAL["model"]["max_length"]
BATCH = EQUAL["training"]["global_batch"]

# --- the data ------------------------------------------------------------------------------


def read_corpus(folder: Path) -> tuple[list[dict], int]:
    """Every article as tunelab's folder loader reads it (one sub-folder per label, sorted),
    and how many files are not UTF-8 (tunelab quarantines those as `bad_encoding`)."""
    rows, not_utf8 = [], 0
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder)
        if len(rel.parts) < 2 or any(part.startswith(".") for part in rel.parts):
            continue
        try:
            text = file.read_bytes().decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            not_utf8 += 1
            continue
        rows.append({"id": rel.as_posix(), "text": text, "label": rel.parts[0]})
    return rows, not_utf8


def distinct(rows: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """The rows without empty texts, without exact duplicates (tunelab's normalisation; the
    first by natural id order stays) and without texts under two labels (every copy goes)."""
    from tunelab.data.dedup import normalise
    from tunelab.data.loaders import Example

    groups: dict[str, list[dict]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: Example.sort_key_of(r["id"])):
        if row["text"].strip():
            groups[normalise(row["text"])].append(row)
    agreed = [g for g in groups.values() if len({r["label"] for r in g}) == 1]
    dropped = {
        "empty": sum(1 for r in rows if not r["text"].strip()),
        "duplicates": sum(len(g) - 1 for g in agreed),
        "label conflicts": sum(len(g) for g in groups.values()) - sum(len(g) for g in agreed),
    }
    return [g[0] for g in agreed], dropped


def choose_split(pool: list[dict], n_train: int, n_val: int, seed: int) -> dict[str, list]:
    """A stratified split of `n_train` and `n_val` rows (scikit-learn, seeded), in id order."""
    from sklearn.model_selection import train_test_split

    train, validation = train_test_split(
        pool,
        train_size=n_train,
        test_size=n_val,
        stratify=[r["label"] for r in pool],
        random_state=seed,
    )
    by_id = lambda r: r["id"]  # noqa: E731
    return {"train": sorted(train, key=by_id), "validation": sorted(validation, key=by_id)}


def write_data(splits: dict[str, list[dict]], folder: Path) -> dict[str, dict]:
    """One JSONL file per split; each file's path and sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, rows in splits.items():
        path = folder / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
        files[split] = {"path": str(path), "sha256": sha256(path)}
    return files


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- the tunelab labs ----------------------------------------------------------------------


def lab_spec(files: dict[str, dict], model: Path, sections: dict) -> dict:
    """A lab over the two files as a user's split that keeps every row (no cleaning, dedup
    reporting only); `sections` holds the model settings, method, training and evaluation."""
    return {
        "compass": {"kind": "benchmark", "why": "bench/vs_hf_trainer.py: tunelab and Trainer"},
        "hypothesis": {
            "behaviour": "Fine-tuning MiniLM sorts BBC News articles into their desks.",
            "metric": "macro_f1",
            "min_effect": 0.01,
        },
        "guardrails": [{"metric": "accuracy", "scope": "overall", "max_drop": 1.0}],
        "task": {"type": "classification"},
        "data": {
            "sources": [
                {"type": "jsonl", "path": files[s]["path"], "split": s}
                for s in ("train", "validation")
            ],
            "fields": {"text": "text", "label": "label", "id": "id"},
            "cleaning": [],
            "dedup": {"exact": True, "near": False, "policy": "report", "conflicts": "report"},
            "allow_outside_lab": True,
        },
        "model": {**sections["model"], "path": str(model)},
        **{k: sections[k] for k in ("method", "training", "evaluation")},
    }


def template_sections() -> dict:
    """tunelab's defaults: its classification template's model settings (not the path),
    method, training and evaluation."""
    import yaml

    text = resources.files("tunelab").joinpath("templates/classification.yaml").read_text()
    template = yaml.safe_load(text)
    model = {k: v for k, v in template["model"].items() if k != "path"}
    return {"model": model, **{k: template[k] for k in ("method", "training", "evaluation")}}


def build_lab(lab: Path, spec: dict, splits: dict[str, list[dict]]) -> str:
    """Write the spec, build the data version, check that it holds exactly the chosen rows
    (ids, texts, labels); its version id."""
    import yaml

    from tunelab.core.lab import open_records_lab
    from tunelab.data import build_data

    lab.mkdir(parents=True, exist_ok=True)
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    handle = open_records_lab(lab)
    report = build_data(handle.spec, handle.path, handle.store)
    for split, rows in splits.items():
        want = {r["id"]: (r["text"], r["label"]) for r in rows}
        got = {
            r["id"]: (r["text"], r["label"])
            for r in handle.store.read_split(report["version"], split)
        }
        if got != want:
            lost, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
            raise SystemExit(
                f"tunelab's {split} split in {lab} is not the chosen rows: missing {lost[:5]} "
                f"({len(lost)}), extra {extra[:5]} ({len(extra)}), changed {changed[:5]} "
                f"({len(changed)}); quarantine {report['quarantine']}"
            )
    return report["version"]
