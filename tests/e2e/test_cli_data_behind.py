"""`run` on a data version that the spec's data section or its sources no longer describe: it
trains on that version as it is, and says so (it had trained in silence, its record keeping
the edited spec)."""

from __future__ import annotations

import json

import yaml

from conftest import tl


def test_a_run_says_when_its_data_version_is_not_the_specs(make_lab, capsys):
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    code, same = tl(capsys, "run", "--name", "as-made", *where)
    assert code == 0 and "data_behind" not in same["preflight"]

    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    spec["data"]["split"]["seed"] = 7
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    code, split = tl(capsys, "run", "--name", "split-seed", "--reason", "a test", *where)
    assert code == 0
    words = split["preflight"]["data_behind"]
    assert f"data version {split['data_version']} was not made from" in words
    assert "(data.split)" in words and "Run `tunelab data`" in words

    spec["data"]["split"]["seed"] = 0
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    with (lab / "docs.jsonl").open("a") as f:
        f.write(json.dumps({"id": "new", "text": "a late row", "label": "sport"}) + "\n")
    code, source = tl(capsys, "run", "--name", "source", "--reason", "a test", *where)
    assert code == 0
    assert "data.sources[0] (docs.jsonl): its content changed" in source["preflight"]["data_behind"]

    assert tl(capsys, "data", *where)[0] == 0  # the version they describe now
    code, again = tl(capsys, "run", "--name", "after", "--reason", "a test", *where)
    assert code == 0 and "data_behind" not in again["preflight"]


def test_a_run_says_when_the_declared_labels_are_not_its_versions(make_lab, capsys):
    """`task.labels` narrowed without `tunelab data`: the run trained and scored on the
    version's classes while its record held the new list, with no word."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    assert tl(capsys, "data", *where)[0] == 0
    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    labels = json.loads(
        (lab / ".tunelab" / "data")
        .joinpath((lab / ".tunelab" / "data" / "CURRENT").read_text().strip(), "manifest.json")
        .read_text()
    )["labels"]
    narrowed = labels[:-1]
    code, run = tl(capsys, "run", "--name", "narrowed", *where, f"task.labels={narrowed}")
    assert code == 0 and "(task.labels)" in run["preflight"]["data_behind"]
    spec["task"] = {**spec.get("task", {}), "labels": labels}  # the version's own: nothing said
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    code, same = tl(capsys, "run", "--name", "same", "--reason", "a test", *where)
    assert code == 0 and "data_behind" not in same["preflight"]


def test_compare_after_a_new_data_version_says_why_it_has_nothing_to_judge(make_lab, capsys):
    """After `tunelab data` made a new version, compare said 'run `tunelab baseline` first',
    `--against` the old baseline too, and nothing said why."""
    lab = make_lab()
    where = ["--lab", str(lab)]
    for command in (["data"], ["baseline"]):
        assert tl(capsys, *command, *where)[0] == 0
    spec = yaml.safe_load((lab / "tunelab.yaml").read_text())
    spec["data"]["split"]["seed"] = 7  # another validation split
    (lab / "tunelab.yaml").write_text(yaml.safe_dump(spec))
    assert tl(capsys, "data", *where)[0] == 0
    code, plain = tl(capsys, "compare", *where)
    assert code == 2 and "the lab's 2 earlier runs are on another" in plain["error"]
    code, against = tl(capsys, "compare", "--against", "r001-majority", *where)
    assert code == 2 and against["error"].startswith("--against 'r001-majority': no completed")
    assert against["error"].endswith("compared here: none")
