"""A data ablation hands each variant its own data version and never changes the current one,
so a `tunelab run` started meanwhile trains on the version it was given."""

from __future__ import annotations

from tunelab.core.lab import open_lab
from tunelab.core.store import Store
from tunelab.data import build_data
from tunelab.stages.run import ablate


def _record(n: int, name: str, version: str) -> dict:
    """What the ablation reads of a variant's record."""
    return {
        "id": f"r00{n}-{name}",
        "data_version": version,
        "metrics": {"accuracy": 0.5, "macro_f1": 0.5},
        "training": {"seconds": 1.0},
    }


def test_a_data_ablation_never_switches_the_current_version(make_lab, monkeypatch):
    lab_path = make_lab()
    lab = open_lab(lab_path, device="cpu")
    current = build_data(lab.spec, lab.path, lab.store)["version"]
    seen = []

    def fake_variant(variant_lab, name, console, **_):
        # what a `tunelab run` opened at this moment would read, beside what this variant got
        meanwhile = open_lab(lab_path, device="cpu")
        seen.append((variant_lab.data_version, meanwhile.data_version))
        return _record(len(seen), name, variant_lab.data_version)

    monkeypatch.setattr("tunelab.stages.run.variant.run_variant", fake_variant)
    result = ablate.run_ablation(lab_path, "data.cleaning=[],[{rule: lowercase}]")
    given = [variant for variant, _ in seen]
    assert all(meanwhile == current for _, meanwhile in seen)  # CURRENT never moved
    assert given[1] != current  # the lowercase variant trained on its own version
    assert [row["data_version"] for row in result["runs"]] == given  # and its record says so
    assert Store(lab_path).current_data() == current
    events = [e for e in Store(lab_path).events() if e["event"] == "data"]
    assert [e["current"] for e in events][-2:] == [False, False]


def test_a_model_ablation_trains_on_the_version_read_when_it_started(make_lab, monkeypatch):
    lab_path = make_lab()
    lab = open_lab(lab_path, device="cpu")
    first = build_data(lab.spec, lab.path, lab.store)["version"]
    seen = []

    def fake_variant(variant_lab, name, console, **_):
        seen.append(variant_lab.data_version)
        if len(seen) == 1:  # a `tunelab data` with other rules lands between two variants
            other = open_lab(lab_path, {"data.cleaning": [{"rule": "lowercase"}]}, device="cpu")
            build_data(other.spec, other.path, other.store)
        return _record(len(seen), name, variant_lab.data_version)

    monkeypatch.setattr("tunelab.stages.run.variant.run_variant", fake_variant)
    ablate.run_ablation(lab_path, "training.lr=1e-3,1e-2")
    assert Store(lab_path).current_data() != first
    assert seen == [first, first]


def test_a_stop_names_the_value_it_stopped_at_and_the_values_left(make_lab, monkeypatch):
    """Its message named the run's resume alone; run again whole, ablate trained the finished
    values a second time."""
    import pytest

    from tunelab.core.errors import Interrupted, TunelabError

    lab_path = make_lab()
    lab = open_lab(lab_path, device="cpu")
    build_data(lab.spec, lab.path, lab.store)

    def fake_variant(variant_lab, name, console, **_):
        if name.endswith("0.01"):
            raise Interrupted("Ctrl-C", "run r005-lr-0.01 is interrupted.", "r005-lr-0.01", True)
        return _record(4, name, variant_lab.data_version)

    monkeypatch.setattr("tunelab.stages.run.variant.run_variant", fake_variant)
    with pytest.raises(Interrupted) as err:
        ablate.run_ablation(lab_path, "training.lr=0.001,0.01,0.1,1")
    assert err.value.run == "r005-lr-0.01" and err.value.resumable
    assert err.value.outcome == (
        "run r005-lr-0.01 is interrupted. ablate stopped at training.lr=0.01 (2 of 4); the "
        "values before it are trained. `tunelab ablate training.lr=0.1,1` trains the values "
        "not begun."
    )
    # run again whole before that resume: the interrupted value is not trained a second time
    store = Store(lab_path)
    run_id, _ = store.new_run("lr-0.01")
    begun = open_lab(lab_path, {"training.lr": 0.01}, device="cpu")
    record = {"id": run_id, "kind": "variant", "status": "interrupted"}
    record |= {"data_version": store.current_data(), "spec": begun.spec.to_dict()}
    store.write_record(run_id, record)
    (store.run_dir(run_id) / "checkpoint").mkdir()  # a whole one: `resume` goes on from it
    (store.run_dir(run_id) / "checkpoint" / "state.json").write_text("{}")
    with pytest.raises(TunelabError, match=f"begun and interrupted: seed 0 by {run_id}"):
        ablate.run_ablation(lab_path, "training.lr=0.001,0.01,0.1,1")
    # resumed, as the refusal said: the next ablate counts it, where it had trained it again
    # (a repeat of the same spec and seed, which compare judges alone; hW N3)
    resumed = record | _record(5, "lr-0.01", record["data_version"]) | {"id": run_id}
    store.write_record(run_id, resumed | {"status": "completed"})
    found = ablate.run_ablation(lab_path, "training.lr=0.001,0.01,0.1,1")
    counted = [r for r in found["runs"] if r.get("counted")]
    assert [(r["value"], r["id"]) for r in counted] == [(0.01, run_id)]


def test_a_seeded_ablation_s_table_says_its_scores_are_means():
    from rich.console import Console

    from tunelab.views.runs import ablation

    row = {"value": 1e-4, "id": "r011-lr", "parent": "r010", "metric": "format_valid"}
    row |= {"score": 1.0, "seconds": 276.0, "data_version": "v"}
    seeded = row | {"seeds": [{"run": "r011-lr", "seed": 0}, {"run": "r012-lr-s1", "seed": 1}]}
    for runs, said in (([row], "format_valid"), ([seeded], "format_valid, mean of 2 seeds")):
        out = Console(record=True, width=200)
        ablation({"key": "training.lr", "runs": runs}, out)
        text = out.export_text()
        assert "ablation of training.lr" in text  # the key, named in the title
        header = next(line for line in text.splitlines() if line.startswith("┃ value "))
        assert f"┃ {said} ┃" in header and ("all seeds" in header) == (runs == [seeded])


def test_a_value_refused_for_another_field_is_named_first(make_lab, tiny_bert, capsys):
    """`ablate model.path=...,small` blamed `model.max_length` (tunelab.yaml), not the value:
    a base with 16 positions cannot hold the spec's 32 tokens."""
    import json
    import shutil

    from tunelab.cli import main

    lab_path = make_lab()
    assert main(["data", "--lab", str(lab_path), "--json"]) == 0
    capsys.readouterr()
    small = shutil.copytree(tiny_bert, lab_path / "small-bert")
    config = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 16}))
    argv = ["ablate", f"model.path={tiny_bert},{small}", "--lab", str(lab_path), "--json"]
    assert main(argv) == 2
    said = json.loads(capsys.readouterr().out)["error"]
    assert said.startswith(f"model.path={small}: ") and "model.max_length" in said
    assert not list(Store(lab_path).root.glob("runs/*"))  # refused before anything trained


def test_a_list_or_mapping_value_names_its_run_by_its_values():
    names = [
        ("training.lr", 1e-4, "lr-0.0001"),
        ("model.arch.rope.nope_layers", [1, 3], "nope_layers-1-3"),
        ("data.cleaning", [], "cleaning-none"),
        ("data.cleaning", [{"rule": "lowercase"}], "cleaning-lowercase"),
        ("data.dedup.policy", "report", "policy-report"),
    ]
    assert [ablate.run_name(key, value) for key, value, _ in names] == [n for *_, n in names]


def test_a_value_that_builds_the_parents_own_model_is_told_apart_from_one_that_does_not():
    """`num_key_value_heads: 4` on a parent that left it unset (as many as the heads, 4) is the
    same model: the spec's text differs, the config it builds does not."""
    from tunelab.core.scratch import Arch

    shape = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
    parent = {"model": {"arch": shape | {"num_key_value_heads": None}}}
    assert ablate._same_model(parent, Arch(**shape, num_key_value_heads=4))
    assert not ablate._same_model(parent, Arch(**shape, num_key_value_heads=2))
    assert not ablate._same_model({"model": {"path": "m"}}, Arch(**shape))  # no arch: not one


def test_a_trained_parents_own_value_is_refused_only_where_it_would_repeat_that_run(make_lab):
    """On the parent's data version and one seed the value trains a copy of it; on a newer
    version, or under `--seeds N` (the parent's seed counted, the others trained), it does not."""
    import pytest

    from tunelab.core.lab import open_records_lab
    from tunelab.stages.run.diff import OneChangeError

    lab_path = make_lab()
    lab = open_lab(lab_path, device="cpu")
    version = build_data(lab.spec, lab.path, lab.store)["version"]
    run_id, _ = lab.store.new_run("lora")
    parent = {"id": run_id, "kind": "variant", "status": "completed", "data_version": version}
    lab.store.write_record(run_id, parent | {"spec": lab.spec.to_dict()})
    lr = lab.spec.training.lr
    labs = [open_records_lab(lab_path, {"training.lr": value}) for value in (lr, lr * 3)]
    with pytest.raises(OneChangeError, match=rf"training.lr is {run_id}'s own value, so its run"):
        ablate._only("training.lr", [lr, lr * 3], labs, run_id, version, None)
    ablate._only("training.lr", [lr, lr * 3], labs, run_id, version, 2)  # seeds: not a copy
    ablate._only("training.lr", [lr, lr * 3], labs, run_id, "a-newer-version", None)
