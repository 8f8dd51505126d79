"""Shared fixtures: a tiny BERT with a locally trained tokenizer, and a tiny lab on disk."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tunelab.core.env import reproducible_blas

sys.path.insert(0, str(Path(__file__).parent / "assets"))

from make_tiny import PAGE_SCHEMA, PAGES, build_tiny_bert, build_tiny_llama

reproducible_blas()  # as the CLI sets it: before this process runs a BLAS kernel (read then)

TOPICS = {
    "business": "market shares profits bank interest rates economy forecasts grew",
    "sport": "team match goal fans striker scored club cup final won",
    "tech": "phone chip screen software update security browser network faster",
}


LONGEST_FIRST = (
    "test_extraction_demo_shows_before_and_after",  # about 4.5 minutes in one thread
    "test_image_demo_inspects_each_group_as_the_model_sees_it_and_hands_over",  # 2
    "test_classification_demo_tells_the_whole_story",  # 2
)
"""The tests that take minutes, first, then the other slow tests, then the fast ones (in
pytest-randomly's order, which comes before this hook): `make test` runs both suites in one
session, one process per core each taking one test at a time, so the long tests start at
once, one in each process, and the short ones fill in after them: no long test is left to run
alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if item.name in LONGEST_FIRST:
            return LONGEST_FIRST.index(item.name)
        return len(LONGEST_FIRST) + (item.get_closest_marker("slow") is None)

    items.sort(key=rank)  # stable: every other test keeps its place


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="session")
def seam_tokenizer(tiny_llama, tmp_path_factory):
    """The tiny Llama's tokenizer with SmolLM2's merge of two newlines: the chat template's
    prompt before the input (`...Extract.\n\n`) ends in one token `ĊĊ` tokenised alone, and in
    two before a word in the whole string (byte-level BPE keeps a newline run's last character
    apart from what follows it)."""
    import shutil

    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("seam-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tiny_llama / name, out / name)
    data = json.loads((out / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    vocab["ĊĊ"] = max([*vocab.values(), *(t["id"] for t in data["added_tokens"])]) + 1
    data["model"]["merges"].append(["Ċ", "Ċ"])
    (out / "tokenizer.json").write_text(json.dumps(data))
    return AutoTokenizer.from_pretrained(out)


@pytest.fixture
def render_pages(tiny_llama):
    """`(rows, **model) -> (spec, examples)`: (page text, answer) rows rendered for training
    the tiny Llama with the chat template, and the `ModelSpec` (with `model` fields) they were
    rendered under."""
    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.model import load_tokenizer
    from tunelab.modeling.render import make_template, render_example

    def render(rows: list[tuple[str, str]], **model):
        spec = ModelSpec(path=str(tiny_llama), max_length=192, template="chat", **model)
        tokenizer = load_tokenizer(spec, tiny_llama)
        template = make_template(tokenizer, "chat", "Extract the fields as JSON.")
        examples = [
            render_example(tokenizer, template, {"id": str(i), "text": t}, target, 192)
            for i, (t, target) in enumerate(rows)
        ]
        return spec, examples

    return render


def page_rows(n: int = 30) -> list[dict]:
    """Tiny man-page-like documents whose NAME line holds the answer."""
    rows = []
    for i in range(n):
        name, section, summary = PAGES[i % len(PAGES)]
        name = f"{name}{i}"
        text = f"{name.upper()}({section})\n\nNAME\n  {name} - {summary}\n\nSYNOPSIS\n  {name} -x"
        rows.append(
            {
                "text": text,
                "label": section,
                "target": {"name": name, "section": section, "summary": summary},
            }
        )
    return rows


SCHEMA = PAGE_SCHEMA


def extraction_spec(model_path: Path, **sections) -> dict:
    spec = {
        "hypothesis": {"behaviour": "json", "metric": "exact_match", "min_effect": 0.05},
        "guardrails": [
            {"metric": "json_valid", "scope": "overall", "max_drop": 0.0},
            {"metric": "presence", "scope": "every_field", "max_drop": 0.0},
        ],
        "task": {
            "type": "extraction",
            "json_schema": SCHEMA,
            "required": ["name", "section", "summary"],
        },
        "data": {
            "sources": [{"type": "jsonl", "path": "pages.jsonl"}],
            "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        },
        "model": {"path": str(model_path), "max_length": 192, "template": "chat"},
        "method": {"type": "lora", "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        "training": {"lr": 5e-3, "global_batch": 4, "microbatch": 2, "budget": {"steps": 3}},
        "evaluation": {"batch_size": 8, "max_new_tokens": 12},
    }
    spec.update(sections)
    return spec


@pytest.fixture
def make_extraction_lab(tmp_path, tiny_llama):
    def _make(rows: list[dict] | None = None, **sections) -> Path:
        lab = tmp_path / "gen-lab"
        lab.mkdir(exist_ok=True)
        rows = page_rows() if rows is None else rows
        (lab / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (lab / "tunelab.yaml").write_text(yaml.safe_dump(extraction_spec(tiny_llama, **sections)))
        return lab

    return _make


def tl(capsys, *args: str) -> tuple[int, dict | list]:
    """A command through the CLI with `--json`: its exit code and what it printed, read."""
    from tunelab.cli import main

    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def topic_rows(n_per_label: int = 20, seed: int = 0) -> list[dict]:
    """Short synthetic documents whose words give away their topic."""
    rng = random.Random(seed)
    rows = []
    for label, words in TOPICS.items():
        vocab = words.split()
        for i in range(n_per_label):
            text = " ".join(rng.choice(vocab) for _ in range(8)) + f" story {label} {i}"
            rows.append({"text": text, "label": label})
    rng.shuffle(rows)
    return rows


def lab_spec(model_path: Path, **sections) -> dict:
    spec = {
        "hypothesis": {"behaviour": "topics", "metric": "macro_f1", "min_effect": 0.01},
        "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
        "task": {"type": "classification"},
        "data": {
            "sources": [{"type": "jsonl", "path": "docs.jsonl"}],
            "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
        },
        "model": {"path": str(model_path), "max_length": 32},
        "method": {
            "type": "lora",
            "r": 4,
            "alpha": 8,
            "target_modules": ["query", "value"],
            "modules_to_save": ["classifier"],
        },
        "training": {
            "lr": 5e-3,
            "global_batch": 8,
            "microbatch": 4,
            "budget": {"steps": 4},
            "seed": 0,
        },
        "evaluation": {"batch_size": 16},
    }
    spec.update(sections)
    return spec


@pytest.fixture
def make_lab(tmp_path, tiny_bert):
    """Write a lab folder (spec + JSONL data) and return its path."""

    def _make(rows: list[dict] | None = None, **sections) -> Path:
        lab = tmp_path / "lab"
        lab.mkdir(exist_ok=True)
        rows = topic_rows() if rows is None else rows
        (lab / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (lab / "tunelab.yaml").write_text(yaml.safe_dump(lab_spec(tiny_bert, **sections)))
        return lab

    return _make


@pytest.fixture
def no_reload(monkeypatch):
    """`tunelab check` without its fresh interpreter (seconds) in tests about other items; the
    reload item fails."""
    from tunelab.stages.check import reload as preflight_reload

    monkeypatch.setattr(
        preflight_reload,
        "reload_in_fresh_process",
        lambda *a, **k: ({"stderr": "skipped by the test"}, None, {}),
    )


@pytest.fixture(scope="session")
def exported(tmp_path_factory, tiny_bert):
    """A tiny lab trained, compared and exported (with --merge) once, for the handover's tests
    (`tests/e2e/test_cli_export.py` and its neighbours); copy it before changing it."""
    from tunelab.cli import main

    lab = tmp_path_factory.mktemp("export-lab")
    (lab / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in topic_rows()))
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(lab_spec(tiny_bert)))
    for command in (["data"], ["baseline"], ["run", "--name", "lora"], ["compare"]):
        assert main([command[0], "--lab", str(lab), *command[1:], "--json"]) == 0
    assert main(["export", "r003-lora", "--lab", str(lab), "--merge", "--json"]) == 0
    return lab, lab / "bundles" / "r003-lora"


def copy_of(bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bundle, tmp_path / "bundle"))
