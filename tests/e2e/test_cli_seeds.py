"""Seeds as replicates through the CLI on the tiny lab: `run --seeds`, `noise`, and compare's
seed-aware intervals and verdict words."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import tl
from tunelab.cli import main
from tunelab.core.replicates import replicate_seeds
from tunelab.core.store import Store
from tunelab.stages.compare.rules import VERDICTS


def test_replicates_a_noise_floor_and_a_seed_aware_comparison(make_lab, capsys):
    lab = str(make_lab())
    where = ["--lab", lab]
    assert tl(capsys, "data", *where)[0] == 0
    assert tl(capsys, "baseline", *where)[0] == 0

    code, group = tl(capsys, "run", *where, "--name", "lora", "--seeds", "2")
    assert code == 0, group
    first, second = group["runs"]
    assert group["seeds"] == replicate_seeds(0, 2) and group["finished"] == 2
    assert [r["spec"]["training"]["seed"] for r in group["runs"]] == group["seeds"]
    assert [r["replicate"]["index"] for r in group["runs"]] == [0, 1]
    assert first["diff"] == second["diff"]  # a replicate's seed is the group's draw, no change
    assert first["training"]["final_loss"] != second["training"]["final_loss"]  # another draw
    assert Path(lab, ".tunelab/groups", f"{group['id']}.json").exists()

    code, single = tl(capsys, "run", *where, "--name", "lr", "training.lr=1e-3")
    assert code == 0, single
    code, floor = tl(capsys, "noise", *where, single["id"], "--seeds", "2")
    assert code == 0, floor
    assert floor["runs"][0] == single["id"] and floor["trained"] == 1
    assert floor["family"]["spec"]["method.type"] == "lora"
    assert set(floor["spread"]["overall"]) >= {"accuracy", "macro_f1"}
    assert set(floor["spread"]["per_class"]) == {"business", "sport", "tech"}
    groups = sorted(Path(lab, ".tunelab/groups").iterdir())
    code, again = tl(capsys, "noise", *where, single["id"], "--seeds", "2")  # the same seeds
    assert code == 0 and again["unchanged"] and again["id"] == floor["id"]
    assert sorted(Path(lab, ".tunelab/groups").iterdir()) == groups  # no empty group either
    assert again["trained"] == 0 and len(list(Path(lab, ".tunelab/noise").glob("n*.json"))) == 1

    code, result = tl(capsys, "compare", *where)
    assert code == 0, result
    rows = {r["id"]: r for r in result["runs"]}
    arm = rows[first["id"]]
    assert [s["run"] for s in arm["seeds"]] == [first["id"], second["id"]]
    boot = arm["vs_reference"]["bootstrap"]
    # the tiny model's seeds score alike here (each of its 12 validation rows the same): a
    # spread of 0 measured nothing, so the interval is the examples' and says why (the
    # seed-aware one, over seeds that differ, is the ablation demo's test and test_arms')
    assert boot["basis"] == "examples" and boot["seeds_tied"]["sources"]
    assert arm["verdict"] in VERDICTS and arm["verdict"] != "improved"
    assert any("seeds that tie" in why for why in arm["reasons"])
    # the second seed is judged with its arm, and set beside the first as seed noise
    assert "verdict" not in rows[second["id"]] and rows[second["id"]]["arm"] == first["id"]
    assert rows[second["id"]]["vs_first"]["verdict"] == "within seed noise"
    # the lr arm's second seed came from `noise`; its interval counts both seeds too
    assert rows[single["id"]]["vs_reference"]["bootstrap"]["seeds_tied"]["df"] >= 1
    assert result["rules"]["seed_rule"].startswith("seed-aware interval")
    assert result["rules"]["arms"][first["id"]] == [first["id"], second["id"]]

    code, runs = tl(capsys, "runs", *where)
    assert code == 0 and {r["group"] for r in runs} >= {group["id"], floor["group"]}
    grouped = {r["id"] for r in runs if r["group"] == floor["group"]}
    assert grouped == set(floor["runs"])  # the floor's first seed too, trained before its group
    # a seed of an arm is judged with its arm: final reads the arm's verdict for it
    judged = Store(Path(lab)).judgement(second["id"])
    assert judged is not None and judged[1]["id"] == first["id"]

    # a group of a spec whose seeds already ran counts those runs: trained again, a seed was a
    # second run that compare judged alone, outside the group's arm
    code, more = tl(capsys, "run", *where, "--name", "lr", "--seeds", "3", "training.lr=1e-3")
    assert code == 0, more
    assert [m["trained"] for m in more["members"]] == [False, False, True]
    assert [r["id"] for r in more["runs"]][:2] == floor["runs"] and more["finished"] == 3
    code, result = tl(capsys, "compare", *where)
    assert code == 0 and result["rules"]["arms"][single["id"]] == [r["id"] for r in more["runs"]]
    saved = json.loads(Path(lab, ".tunelab/groups", f"{more['id']}.json").read_text())
    assert [m["run"] for m in saved["members"]] == [r["id"] for r in more["runs"]]

    # every seed trained already: nothing trains, no group is written, and it is said (it
    # was a KeyError in the view, after an empty group record)
    groups = sorted(Path(lab, ".tunelab/groups").iterdir())
    code, same = tl(capsys, "run", *where, "--name", "lr", "--seeds", "3", "training.lr=1e-3")
    assert code == 0 and same["unchanged"] and same["id"] is None
    assert [r["id"] for r in same["runs"]] == [r["id"] for r in more["runs"]]
    assert sorted(Path(lab, ".tunelab/groups").iterdir()) == groups
    assert main(["run", *where, "--name", "lr", "--seeds", "2", "training.lr=1e-3"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"every one of the 2 seeds was trained already ({', '.join(floor['runs'])})" in said
    assert "nothing trained, no group written; mean ± sd over them: accuracy" in said


def test_seeds_below_one_are_refused(make_lab, capsys):
    lab = str(make_lab())
    code, err = tl(capsys, "noise", "--lab", lab, "--seeds", "1")
    assert code == 2 and "at least 2 seeds" in err["error"]
