"""Every command through the CLI on a tiny lab, checking --json output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import tl, topic_rows
from tunelab.cli import main
from tunelab.core.store import Store


def test_the_whole_classification_lab(make_lab, capsys):
    lab = str(make_lab())
    code, report = tl(capsys, "data", "--lab", lab)
    assert code == 0
    assert report["rows_read"] == 60 and report["kept"] == 60
    assert set(report["splits"]) == {"train", "validation", "test"}

    code, base = tl(capsys, "baseline", "--lab", lab)
    assert code == 0
    assert [r["name"] for r in base["runs"]] == ["majority", "probe"]
    majority = base["runs"][0]["metrics"]
    assert majority["accuracy"] == pytest.approx(1 / 3)  # balanced 3-class validation split

    code, lora = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and lora["status"] == "completed"
    assert lora["trainable"]["target_modules"] == {"query": 2, "value": 2}
    assert lora["training"]["accumulation"] == 2
    assert "adapter_model.safetensors" in lora["weights"]["files"]
    assert 0 < lora["evaluation_seconds"] < 60  # what `plan` times a final from
    assert lora["env"]["packages"]["torch"] and lora["data_version"] == report["version"]

    code, full = tl(capsys, "run", "--lab", lab, "--name", "full", "method.type=full")
    assert code == 0 and full["trainable"]["trainable_fraction"] == 1.0
    assert "model.safetensors" in full["weights"]["files"]

    code, result = tl(capsys, "compare", "--lab", lab)
    assert code == 0
    variants = [r for r in result["runs"] if r["kind"] == "variant"]
    assert [r["id"] for r in variants] == [lora["id"], full["id"]]
    assert [r["verdict"] for r in variants] == [expected_verdict(r, 0.01) for r in variants]
    assert result["reference"] == "r002-probe" or result["reference"] == "r001-majority"
    assert json.loads((Path(lab) / result["file"]).read_text()) == result  # the record
    code, err = tl(capsys, "compare", "--lab", lab, "hypothesis.min_effect=0")
    assert code == 2 and "recorded with them, so that a verdict cannot be" in err["error"]
    code, err = tl(capsys, "compare", "--lab", lab, "training.lr=1")  # it had been dropped
    assert code == 2 and "`tunelab compare` takes no key=value: it judges" in err["error"]

    code, runs = tl(capsys, "runs", "--lab", lab)
    assert code == 0
    assert [r["status"] for r in runs] == ["completed"] * 4
    # a baseline draws no seed (it read 0); a variant's time is there to check a plan with
    assert [r["seed"] for r in runs] == [None, None, 0, 0]
    timed = runs[2]["training"]
    assert timed["steps"] == lora["training"]["steps"] and timed["seconds"] > 0
    assert timed["tokens_per_s"] > 0 and timed["peak_memory_mb"] > 0


def test_run_refuses_without_a_hypothesis(make_lab, capsys):
    lab = make_lab(hypothesis=None)
    raw = yaml.safe_load((lab / "tunelab.yaml").read_text())
    raw.pop("hypothesis")
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(raw))
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    code, err = tl(capsys, "run", "--lab", str(lab))
    assert code == 2
    assert "refuses to start" in err["error"] and "hypothesis" in err["error"]
    assert not (lab / ".tunelab" / "runs").exists()  # nothing was started


def test_bad_spec_names_the_line_and_field(make_lab, capsys):
    lab = make_lab(training={"lr": "fast", "global_batch": 8, "microbatch": 4})
    code, err = tl(capsys, "data", "--lab", str(lab))
    assert code == 2
    assert "field `training.lr`" in err["error"] and "line " in err["error"]


def test_the_commands_that_run_the_model_refuse_it_in_the_user_s_words(make_lab, capsys):
    lab = make_lab()
    assert tl(capsys, "data", "--lab", str(lab))[0] == 0
    # inspect too: it had shown examples the trainer would never see
    for command in ("baseline", "check", "run", "size", "inspect"):  # before any model loads
        code, out = tl(capsys, command, "--lab", str(lab), "model.max_length=4096")
        assert code == 2, command
        assert out["error"].startswith(
            "model.max_length=4096 (command line): 4096 positions, more than the base model's 128"
        ), command
    code, out = tl(capsys, "size", "--lab", str(lab), "--seq-len", "600")  # torch's words after
    assert code == 2 and out["error"].startswith(  # a probe's model load, before
        "--seq-len 600: more than the base model's 128 positions (max_position_embeddings in "
    )


def test_runs_refuses_a_folder_that_is_no_lab_and_lists_a_new_one(tmp_path, capsys):
    """A mistyped --lab read as "no runs yet", exit 0, as if the lab were new."""
    code, err = tl(capsys, "runs", "--lab", str(tmp_path / "typo"))
    assert code == 2 and "is not a tunelab lab" in err["error"]
    assert not (tmp_path / "typo").exists()
    assert tl(capsys, "init", "--lab", str(tmp_path / "new"))[0] == 0
    assert tl(capsys, "runs", "--lab", str(tmp_path / "new")) == (0, [])


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("check --rows 0", "is not above 0"),
        ("size --microbatch 0", "is not above 0"),
        ("size --memory-limit nan", "is not a finite number above 0"),  # 7 minutes, then exit 1
        ("size --memory-limit 0", "is not a finite number above 0"),  # read as no limit
        ("run --seeds 0", "is not above 0"),
        ("inspect --sample -3", "is below 0"),  # 0 is the findings without examples
        ("plan --tokens-per-second nan", "is not a finite number above 0"),  # had crashed
        ("plan --tokens-per-second 0", "is not a finite number above 0"),
        ("plan --price-per-hour inf", "is not a finite number of 0 or more"),  # NaN in records
    ],
)
def test_a_count_out_of_range_is_refused_by_name(command, why, tmp_path, capsys):
    """`--rows 0` made a check of no rows that failed and was saved, `--sample -3` showed
    nothing and reported no findings, `--microbatch 0` measured the spec's microbatch."""
    name, flag, value = command.split()
    code, err = tl(capsys, name, flag, value, "--lab", str(tmp_path))
    assert (code, err["error"]) == (2, f"argument {flag}: {value} {why}")


@pytest.mark.parametrize("command", [["export", "r002"], ["final", "r002"], ["resume", "r002"]])
def test_a_run_named_in_a_folder_that_is_no_lab_says_so(command, tmp_path, capsys):
    """It read "no run 'r002' in DIR; known runs: none yet", as if the lab were new."""
    code, err = tl(capsys, *command, "--lab", str(tmp_path))
    assert code == 2 and err["error"].startswith(f"{tmp_path} is not a tunelab lab")


def test_verify_of_a_folder_that_is_not_there_says_so(tmp_path, capsys):
    code, err = tl(capsys, "verify", str(tmp_path / "nothere"))
    assert code == 2 and err["error"].endswith(
        ": no such folder; give the path of a bundle `export` wrote."
    )
    spec = tmp_path / "tunelab.yaml"  # a file is not called missing
    spec.write_text("")
    code, err = tl(capsys, "verify", str(spec))
    assert code == 2 and err["error"] == f"{spec}: a file, not a folder; give the path of a " + (
        "bundle `export` wrote."
    )


def test_init_then_refuses_to_overwrite(tmp_path, capsys):
    code, _ = tl(capsys, "init", "--lab", str(tmp_path))
    assert code == 0 and (tmp_path / "tunelab.yaml").exists()
    code, err = tl(capsys, "init", "--lab", str(tmp_path))
    assert code == 2 and "--force" in err["error"]
    code, err = tl(capsys, "init", "--lab", str(tmp_path / "new"), "--task", "classfication")
    assert code == 2 and "did you mean 'classification'?" in err["error"]


def test_data_says_when_the_texts_went_past_their_memory_budget(make_lab, capsys):
    lab = str(make_lab())
    code, report = tl(capsys, "data", "--lab", lab)
    assert code == 0 and report["cost"]["texts"]["spilled"] is False
    version = report["version"]
    assert main(["data", "--lab", lab, "data.texts_in_memory_mb=0.001"]) == 0
    shown = capsys.readouterr()
    assert "went past data.texts_in_memory_mb" in shown.out and version in shown.out  # the same
    # stderr, a file here: each stage a line (a terminal gets a spinner), none with --json
    assert "data: reading 1 source(s) (" in shown.err and "data: finding duplicates (" in shown.err
    code, report = tl(capsys, "data", "--lab", lab, "data.texts_in_memory_mb=0.001")
    assert report["cost"]["texts"]["spilled"] is True and report["version"] == version


def test_commands_before_data_say_what_to_run(make_lab, capsys):
    code, err = tl(capsys, "baseline", "--lab", str(make_lab()))
    assert code == 2 and "tunelab data" in err["error"]  # the user's to fix: exit 2


def expected_verdict(row: dict, min_effect: float) -> str:
    """The verdict rule, restated from the row's own numbers."""
    b, statuses = row["vs_reference"]["bootstrap"], {g["status"] for g in row["guardrails"]}
    if b["high"] < 0:
        return "worse" if b["basis"] == "seeds and examples" else "worse on one seed"
    if "broken" in statuses:
        return "guardrail broken"
    if b["delta"] >= min_effect and b["low"] > 0:
        if "unresolved" in statuses:
            return "guardrail unresolved"
        return "improved" if b["basis"] == "seeds and examples" else "improved on one seed"
    if b["basis"] == "seeds and examples" and (b["example"]["low"] > 0 or b["example"]["high"] < 0):
        return "within seed noise"
    return "no evidence"


def test_console_script_runs_in_a_fresh_process(make_lab):
    lab = make_lab()
    out = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "runs", "--lab", str(lab), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == []


def test_variants_have_a_parent_a_diff_and_the_one_change_rule(make_lab, capsys, monkeypatch):
    lab = str(make_lab())
    tl(capsys, "data", "--lab", lab)
    tl(capsys, "baseline", "--lab", lab)
    code, first = tl(capsys, "run", "--lab", lab, "--name", "lora")
    assert code == 0 and first["parent"] == "r002-probe" and first["diff"] == {}
    assert "no_baseline" not in first["preflight"]

    two = ["training.lr=1e-3", "method.r=8"]
    with monkeypatch.context() as m:  # refused before the run's stage (and torch) is imported
        m.setitem(sys.modules, "tunelab.stages.run.variant", None)
        code, err = tl(capsys, "run", "--lab", lab, "--name", "two", *two)
    assert code == 2 and "optimizer" in err["error"] and "method" in err["error"]
    assert "--reason" in err["error"]
    code, both = tl(capsys, "run", "--lab", lab, "--name", "two", *two, "--reason", "paired")
    assert code == 0 and both["reason"] == "paired" and set(both["diff"]) == {"method", "optimizer"}

    number = first["id"].split("-")[0]  # a run is named by its number alone, too: `r001`
    code, lr = tl(
        capsys, "run", "--lab", lab, "--name", "lr", "--parent", number, "training.lr=1e-3"
    )
    assert code == 0 and lr["parent"] == first["id"], lr
    assert lr["diff"] == {"optimizer": [{"key": "training.lr", "parent": 5e-3, "child": 1e-3}]}

    code, result = tl(capsys, "compare", "--lab", lab)
    rows = {r["id"]: r for r in result["runs"]}
    assert rows[lr["id"]]["vs_parent"]["run"] == first["id"]
    assert rows[both["id"]]["reason"] == "paired"
    assert "flips" in rows[lr["id"]]["vs_reference"]
    assert main(["compare", "--lab", lab]) == 0  # the human view renders
    assert f"parent {first['id']}" in capsys.readouterr().out


def test_final_opens_the_seal_once_then_needs_a_reason(make_lab, capsys):
    lab = str(make_lab())
    _, report = tl(capsys, "data", "--lab", lab)
    tl(capsys, "baseline", "--lab", lab)
    code, run = tl(capsys, "run", "--lab", lab, "--name", "lora")
    code, err = tl(capsys, "final", "--lab", lab, run["id"])  # not judged by compare yet
    assert code == 2 and "no comparison has judged it" in err["error"]
    code, final = tl(capsys, "final", "--lab", lab, run["id"][:4], "--reason", "wiring")  # r002
    assert code == 0 and final["metrics"]["n"] == report["splits"]["test"]["n"]
    assert final["run"] == run["id"]
    code, err = tl(capsys, "final", "--lab", lab, run["id"])
    assert code == 2 and "already opened" in err["error"]
    assert main(["final", "--lab", lab, run["id"], "--reason", "report figure"]) == 0
    assert "repeated" in capsys.readouterr().out


def test_ablate_makes_one_variant_per_value_with_one_change_each(make_lab, capsys):
    lab = str(make_lab())
    tl(capsys, "data", "--lab", lab)
    tl(capsys, "baseline", "--lab", lab)
    code, result = tl(capsys, "ablate", "--lab", lab, "training.lr=1e-3,1e-2")
    assert code == 0 and result["values"] == [1e-3, 1e-2]
    assert [r["parent"] for r in result["runs"]] == ["r002-probe", "r002-probe"]
    runs_dir = Path(lab) / ".tunelab" / "runs"
    records = [json.loads((runs_dir / r["id"] / "record.json").read_text()) for r in result["runs"]]
    assert all(list(rec["diff"]) == ["optimizer"] for rec in records)
    assert [rec["spec"]["training"]["lr"] for rec in records] == [1e-3, 1e-2]
    # a parent the spec differs from in more than the key: ablate has no --reason to offer
    code, run = tl(capsys, "run", "--lab", lab, "training.budget.steps=2")
    assert code == 0, run
    code, err = tl(capsys, "ablate", "--lab", lab, "training.lr=1e-3", "--parent", run["id"])
    assert code == 2 and err["error"].startswith(
        f"ablate changes training.lr alone, but the spec also differs from {run['id']} in "
        "training.budget.steps 2 -> 4: make tunelab.yaml match the parent in everything else"
    )
    # an edit left in the spec within the key's own group rode along in silence
    spec_path = Path(lab) / "tunelab.yaml"
    pristine = spec_path.read_text()
    spec = yaml.safe_load(pristine)
    spec["training"]["weight_decay"] = 0.5
    spec_path.write_text(yaml.safe_dump(spec))
    before = sorted(runs_dir.iterdir())
    code, err = tl(capsys, "ablate", "--lab", lab, "training.lr=1e-3")
    assert code == 2 and "differs from r002-probe in training.weight_decay" in err["error"]
    # and a bad value is found before the first value trains
    spec_path.write_text(
        yaml.safe_dump(spec | {"training": {**spec["training"], "weight_decay": 0.0}})
    )
    code, err = tl(capsys, "ablate", "--lab", lab, "training.lr=1e-3,-1")
    assert code == 2 and "field `training.lr`" in err["error"], err
    assert sorted(runs_dir.iterdir()) == before  # nothing trained
    # and a value `run` refuses before its model loads: the first value had trained, then
    # the last stopped with an internal error inside the model
    code, err = tl(capsys, "ablate", "--lab", lab, "model.max_length=16,100000")
    assert code == 2 and "100000 positions, more than the base model's" in err["error"], err
    assert sorted(runs_dir.iterdir()) == before
    # what follows from the key is no other change: full fine-tuning takes no LoRA rank
    spec_path.write_text(pristine)
    code, full = tl(capsys, "ablate", "--lab", lab, "method.type=full")
    assert code == 0 and full["runs"][0]["parent"] == "r002-probe", full


def test_a_data_ablation_builds_a_version_per_value_on_the_same_validation(make_lab, capsys):
    rows = topic_rows()
    for row in rows[::3]:
        row["text"] = row["text"].upper()  # what the lowercase rule changes
    lab = str(make_lab(rows))
    _, data = tl(capsys, "data", "--lab", lab)
    tl(capsys, "baseline", "--lab", lab)
    code, result = tl(capsys, "ablate", "--lab", lab, "data.cleaning=[],[{rule: lowercase}]")
    assert code == 0 and result["values"] == [[], [{"rule": "lowercase"}]]
    versions = [r["data_version"] for r in result["runs"]]
    assert len(set(versions) | {data["version"]}) == 3  # a version per value, pinned to v1
    assert [r["parent"] for r in result["runs"]] == ["r002-probe", "r002-probe"]
    store = Store(Path(lab))
    assert store.current_data() == data["version"]  # the spec's own version stays current
    for version in versions:
        manifest = store.data_manifest(version)
        assert manifest["eval_from"] == data["version"]
        assert manifest["test_sha256"] == store.data_manifest(data["version"])["test_sha256"]
    runs_dir = Path(lab) / ".tunelab" / "runs"
    records = [json.loads((runs_dir / r["id"] / "record.json").read_text()) for r in result["runs"]]
    assert all(list(rec["diff"]) == ["data"] and not rec["diff_warnings"] for rec in records)

    code, compared = tl(capsys, "compare", "--lab", lab)
    assert code == 0, compared
    judged = {r["id"]: r for r in compared["runs"] if "vs_reference" in r}
    assert set(judged) == {r["id"] for r in result["runs"]}  # paired across data versions
    assert all("validation split is identical" in r["data_note"] for r in judged.values())

    # a data value that cannot be built, or trained on, last: found before the first trains
    before = sorted(runs_dir.iterdir())
    missing = "data.sources=[{type: jsonl, path: docs.jsonl}],[{type: jsonl, path: gone.jsonl}]"
    code, err = tl(capsys, "ablate", "--lab", lab, missing)
    assert code == 2 and "gone.jsonl" in err["error"], err
    (Path(lab) / "one.jsonl").write_text(
        "".join(json.dumps({**r, "label": "sport"}) + "\n" for r in rows)
    )
    single = "data.sources=[{type: jsonl, path: docs.jsonl}],[{type: jsonl, path: one.jsonl}]"
    code, err = tl(capsys, "ablate", "--lab", lab, single)
    assert code == 2 and "label" in err["error"], err
    assert sorted(runs_dir.iterdir()) == before
