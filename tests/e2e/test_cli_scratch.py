"""A scratch ablation through the CLI: init a pretrain spec, data, inspect, baseline, a run, an
ablation of one architecture key against that run, the comparison with its compute warning,
and the handover of a scratch model (its base, config and tokenizer, in the bundle)."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from rich.console import Console

import tunelab
from conftest import tl
from tunelab.cli import main
from tunelab.core.store import Store
from tunelab.stages.compare.rules import VERDICTS
from tunelab.stages.export.load import WrongBaseError
from tunelab.views import runs as runs_view

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "and",
    "the",
    "dog",
    "ran",
    "in",
    "the",
    "park",
    "while",
    "birds",
    "sang",
]
CODE = [
    "def",
    "f",
    "(",
    "x",
    ")",
    ":",
    "return",
    "x",
    "+",
    "1",
    "for",
    "i",
    "in",
    "range",
    "(",
    "10",
    ")",
    "print",
    "(",
    "i",
    ")",
    "import",
    "os",
]


def write_sources(lab: Path) -> None:
    rng = random.Random(0)
    for name, vocab in (("prose", WORDS), ("code", CODE)):
        rows = [
            {"text": " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30))) + f" {i}"}
            for i in range(40)
        ]
        (lab / "data").mkdir(exist_ok=True)
        (lab / "data" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def shrink(lab: Path) -> None:
    """The template's model and budget, cut to a few seconds on a CPU."""
    path = lab / "tunelab.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["task"]["sequence_length"] = 48
    spec["data"]["split"] = {"train": 0.7, "validation": 0.2, "test": 0.1, "seed": 0}
    spec["data"]["dedup"] = {"near": False}
    spec["model"]["max_length"] = 48  # scored as it trains (inspect warns otherwise)
    spec["model"]["arch"] |= {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 64,
    }
    spec["model"]["bpe"] = {"vocab_size": 300}
    spec["training"] |= {"warmup_steps": 0, "global_batch": 8, "microbatch": 4, "lr": 3e-3}
    spec["training"]["budget"] = {"tokens": 8 * 48 * 4}
    spec["evaluation"]["batch_size"] = 16
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def test_a_scratch_ablation_from_init_to_compare(tmp_path, capsys):
    lab = tmp_path / "lab"
    assert tl(capsys, "init", "--lab", str(lab), "--task", "pretrain")[0] == 0
    write_sources(lab)
    shrink(lab)
    where = ["--lab", str(lab)]
    code, data = tl(capsys, "data", *where)
    assert code == 0, data
    by_source = data["by_source"]  # pretrain counts documents per source, not per label
    assert sum(by_source["train"].values()) == data["splits"]["train"]["n"]
    assert set(by_source["validation"]) == {"prose", "code"}
    code, seen = tl(capsys, "inspect", *where)
    assert code == 0, seen
    assert seen["summary"]["packing"]["sequence_length"] == 48 and seen["findings"] == []
    assert {e["category"] for e in seen["examples"]} == {"prose", "code"}
    # trained on 8 tokens, scored in windows of 64: positions never trained at, said
    code, short = tl(capsys, "inspect", *where, "task.sequence_length=8")
    assert code == 0, short
    (past,) = short["findings"]
    assert past["code"] == "scored_past_trained_length" and not past["blocking"]
    assert 0 < past["count"] <= data["splits"]["validation"]["n"]
    assert "set model.max_length=8 to score at the trained length" in past["message"]
    code, baseline = tl(capsys, "baseline", *where)
    assert code == 0, baseline
    (zero,) = baseline["runs"]
    assert zero["base_model"]["init"] == "scratch" and zero["metrics"]["bits_per_byte"] > 1

    code, mha = tl(capsys, "run", *where, "--name", "mha")
    assert code == 0, mha
    assert mha["training"]["steps"] == 4  # tokens / (global batch × sequence length)
    assert mha["packing"]["boundaries"] == "mask" and mha["packing"]["sequence_length"] == 48
    assert mha["metrics"]["bits_per_byte"] < zero["metrics"]["bits_per_byte"]
    assert set(mha["metrics"]["per_source"]) == {"prose", "code"}
    base = mha["base_model"]
    assert base["config_class"] == "LlamaConfig" and base["tokenizer"]["source"] == "bpe"
    assert base["params"]["total"] == base["params"]["active"] > 0 and base["flops_per_token"] > 0

    # a value that changes nothing the run trains is refused before anything trains
    lr = mha["spec"]["training"]["lr"]
    for change, why in (
        ("model.arch.moe.experts_per_token=1", "the model has no experts"),
        (f"training.lr={lr},{lr * 3}", f"training.lr is {mha['id']}'s own value"),
    ):
        code, refused = tl(capsys, "ablate", *where, change, "--parent", mha["id"])
        assert code == 2 and why in refused["error"], refused
        assert f"would train a copy of {mha['id']}" in refused["error"]
    assert len(Store(lab).runs()) == 2  # the baseline and mha alone

    key = "model.arch.num_key_value_heads"
    code, ablation = tl(capsys, "ablate", *where, f"{key}=2,1", "--parent", mha["id"])
    assert code == 0, ablation
    assert [r["parent"] for r in ablation["runs"]] == [mha["id"]] * 2
    runs = [Store(lab).read_record(r["id"]) for r in ablation["runs"]]
    assert [list(r["diff"]) for r in runs] == [["attention"], ["attention"]]  # one change
    assert [r["base_model"]["config"]["num_key_value_heads"] for r in runs] == [2, 1]
    assert runs[1]["base_model"]["params"]["total"] < runs[0]["base_model"]["params"]["total"]
    assert [r["params"]["total"] for r in ablation["runs"]] == [  # each value's size, by its score
        r["base_model"]["params"]["total"] for r in runs
    ]

    # `--check`: each value's new wiring checked before its run. Experts without a shared one:
    # its empty projections and gate are frozen, and the check (which failed on them as
    # "trainable but no gradient reached them") passes and says so
    experts = ["ablate", *where, "model.arch.moe.num_experts=4", "--parent", mha["id"], "--check"]
    code, moe = tl(capsys, *experts)
    assert code == 0, moe
    check = moe["runs"][0]["check"]
    assert check["ran"] and check["passed"], check
    items = json.loads((lab / check["file"]).read_text())["items"]
    (trainable,) = [i for i in items if i["name"] == "trainable_set"]
    assert "tensors frozen, no gradient can reach them" in trainable["detail"]
    routing = Store(lab).read_record(moe["runs"][0]["id"])["metrics"]["routing"]  # its router
    assert routing["experts"] == 4 and len(routing["shares"]) == 2  # each sparse layer's shares
    code, again = tl(capsys, *experts)  # the passed check on record covers it: not rerun
    assert code == 0 and again["runs"][0]["check"] == {
        "file": check["file"],
        "passed": True,
        "ran": False,
    }
    out = io.StringIO()
    runs_view.ablation(again, Console(file=out, width=160))
    assert "wiring check" in out.getvalue() and "passed, on record" in out.getvalue()
    size = again["runs"][0]["params"]  # experts: more weights in all than a token uses
    assert size["total"] > size["active"] and "params (active)" in out.getvalue()
    assert f"{size['total'] / 1e3:.1f}k ({size['active'] / 1e3:.1f}k)" in out.getvalue()
    # a failed check stops the ablation before that value's run, and says where to look
    import tunelab.stages.check.steps as steps

    failed = {"passed": False, "ran": True, "failed": ["update"], "file": ".tunelab/checks/x.json"}
    before = len(Store(lab).runs())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(steps, "wiring_checked", lambda lab, console=None: failed)
        code, refused = tl(capsys, "ablate", *where, "model.arch.moe.num_experts=2", "--check")
    assert code == 2 and len(Store(lab).runs()) == before
    assert (
        "--check: the check of model.arch.moe.num_experts=2 (command line) FAILED (update)"
        in refused["error"]
    )

    # a plain compare judges against the strongest baseline, here the untrained model: every
    # run beats it, and the comparison says so and names the run the variants change
    code, plain = tl(capsys, "compare", *where)
    assert code == 0 and plain["reference"] == zero["id"], plain
    assert (
        "untrained model (model.init: scratch): every run that trains beats it"
        in (plain["reference_note"])
    )
    assert plain["reference_note"].endswith(f"`tunelab compare --against {mha['id']}`")
    code, comparison = tl(capsys, "compare", *where, "--against", mha["id"])
    assert code == 0, comparison
    assert comparison["reference_note"] is None
    assert comparison["primary_metric"] == "bits_per_byte" and comparison["groups"] == "per_source"
    rows = {r["id"]: r for r in comparison["runs"]}
    mqa = rows[ablation["runs"][1]["id"]]
    assert mqa["verdict"] in VERDICTS
    boot = mqa["vs_reference"]["bootstrap"]
    assert boot["low"] <= boot["delta"] <= boot["high"]
    assert any("more than 5% apart" in w for w in mqa["warnings"])  # MQA: fewer parameters
    assert mqa["guardrails"][0]["scope"] == "every_source"
    assert set(mqa["guardrails"][0]["checks"]) == {"prose", "code"}
    # as people read it: bits per byte alone beside the reduction (loss and perplexity, the same
    # measure in other units, in a table of their own), no McNemar column for a per-document score
    assert main(["compare", *where, "--against", mha["id"]]) == 0
    shown = capsys.readouterr().out
    verdicts, _, others = shown.partition("other metrics")
    assert "reduction, 95% CI" in verdicts and "McNemar" not in verdicts
    assert "perplexity" not in verdicts and "perplexity" in others.splitlines()[0]
    assert tl(capsys, "report", *where)[0] == 0  # the page names no base model path
    page = (lab / "lab-report.html").read_text()
    # bits per byte as it is, each delta a reduction: not a share in percent or points
    assert "bits_per_byte reduction (95% CI), higher is better" in page
    assert "bits_per_byte, %" not in page
    assert "McNemar p" not in page  # a per-document score has no right and wrong: no column
    assert f"{mqa['bits_per_byte']:.4f}" in page and "per source on validation" in page

    # the handover: a scratch model's base is its config and tokenizer, carried in the bundle
    # (not a GGUF file: its tokenizer is its own, and the refusal says what to do instead)
    code, refused = tl(capsys, "export", mqa["id"], *where, "--gguf", "--out", str(tmp_path / "g"))
    assert code == 2 and refused["error"].endswith("loaded by transformers)")
    code, exported = tl(capsys, "export", mqa["id"], *where)
    assert code == 0, exported
    bundle = Path(exported["bundle"])
    info = json.loads((bundle / "tunelab.json").read_text())
    assert info["base_model"]["init"] == "scratch" and info["base_model"]["path"] is None
    tokenizer_files = sorted(p.name for p in (bundle / "base" / "tokenizer").iterdir())
    assert tokenizer_files == sorted(info["base_model"]["tokenizer"]["files"])
    card = (bundle / "README.md").read_text()
    assert "bits_per_byte reduced by" in card
    total = runs[1]["base_model"]["params"]["total"]  # what the model is, in numbers
    assert f"It has {total:,} parameters and trained on sequences of 48 tokens." in card
    assert 'tunelab.load_bundle("path/to/bundle")' in card  # its base is its own base/
    assert "| bytes |" not in card and "| tokens |" not in card  # counts, not metrics
    assert "validation bytes" not in card and "validation tokens" not in card  # model-index
    assert f"# {mqa['id']}: trained from scratch as LlamaConfig" in card
    assert "trained whole: nothing to merge" in card
    code, verified = tl(capsys, "verify", str(bundle))
    assert code == 0 and verified["passed"], verified["items"]
    assert (
        verified["base"] == str(bundle / "base")
        and "every one must" in verified["items"][-1]["detail"]
    )
    assert ": config and tokenizer sha256 " in verified["items"][1]["detail"]
    model, tokenizer, _ = tunelab.load_bundle(bundle)
    assert type(model).__name__ == "LlamaForCausalLM" and tokenizer.eos_token == "<|endoftext|>"
    other = Path(shutil.copytree(bundle / "base", tmp_path / "other-base"))
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"rms_norm_eps": 1e-5}))
    with pytest.raises(WrongBaseError, match=r"trained from scratch.*\(config\.json differs\)"):
        tunelab.load_bundle(bundle, base=other)


def test_size_measures_a_scratch_model_from_its_seeded_first_weights(tmp_path, capsys, monkeypatch):
    """`size` of a scratch lab failed ("a scratch model has no path"), then on its packed
    sequences ("'Packed' object has no attribute 'label'"). Its probes load the first weights a
    run draws from the seed, saved for them in the sizing scratch and removed after, and step
    packed sequences. The probes run in this process here (a fresh process each costs ~5 s;
    the slow size tests run them as `size` does)."""
    from safetensors.torch import load_file

    from tunelab.core.lab import open_lab
    from tunelab.modeling.scratch_identity import scratch_model
    from tunelab.stages.size import measure, probe

    lab = tmp_path / "lab"
    assert tl(capsys, "init", "--lab", str(lab), "--task", "pretrain")[0] == 0
    write_sources(lab)
    shrink(lab)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    seen = []

    def in_process(args, timeout=None, scratch=None):
        weights = load_file(Path(args["model_dir"]) / "model.safetensors")
        seen.append((args["model_dir"], args["packed"], weights))
        return probe.measure(args)

    monkeypatch.setattr(measure, "run_probe", in_process)
    code, sized = tl(capsys, "size", "--lab", str(lab))
    assert code == 0, sized
    assert sized["model"] == {
        "path": None,
        "init": "scratch",
        "dtype": "float32",
        "model_kind": "causal",
    }
    assert sized["seq_len"]["value"] == 48 and sized["target_tokens"]["value"] > 40
    assert sized["gradient_check"]["equal"] and len(seen) == 5  # four variants, the check
    folder, packed, weights = seen[0]
    assert Path(folder).parent == lab / ".tunelab" / "sizing" / "scratch" and packed == "mask"
    assert not Path(folder).exists()  # removed after
    spec = open_lab(lab).spec
    drawn = scratch_model(spec.model, lab, spec.training.seed).state_dict()
    assert all(torch.equal(weights[k], drawn[k]) for k in weights) and len(weights) > 10


def test_a_stop_while_the_documents_are_packed_leaves_no_lost_run(tmp_path, capsys, monkeypatch):
    """The packing was recorded after the run's record said `running`: a Ctrl-C there (a large
    train split takes a while) left the run `lost` where nothing had trained."""
    from tunelab.stages.run import variant

    lab = tmp_path / "lab"
    assert tl(capsys, "init", "--lab", str(lab), "--task", "pretrain")[0] == 0
    write_sources(lab)
    shrink(lab)
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(variant, "packing_record", stopped)
    code, _ = tl(capsys, "run", "--lab", str(lab), "--allow-warnings", "no check yet")
    assert code == 130
    assert [r["status"] for r in Store(lab).runs()] == []  # no run was opened
