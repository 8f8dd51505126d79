"""`tunelab report` on labs of other shapes: a pretrain lab's metrics, a format lab's empty
sections, many classes, many labels, and where validation came from."""

import json

from test_report import SPEC, build_lab, section

from tunelab.core.lab import Lab
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store, atomic_write_json
from tunelab.stages.report.html import gather, render


def test_a_pretrain_lab_s_metrics_are_shown_as_they_are_not_as_shares():
    """Bits per byte, loss and perplexity are not shares: no percent, no points; a delta is a
    reduction. Before, the page read "bits_per_byte, %: 315.5" and "+60.4 points"."""
    from tunelab.stages.report.comparison import comparison
    from tunelab.stages.report.html import change, change_unit, score, unit

    assert (score(2.55061, "bits_per_byte"), score(856.37, "perplexity")) == ("2.5506", "856.4")
    assert (score(0.9333, "macro_f1", True), score(None, "loss")) == ("93.3%", "-")
    assert (unit("bits_per_byte"), unit("accuracy")) == ("", ", %")
    assert (change(0.60391, "bits_per_byte"), change(0.012, "macro_f1")) == ("+0.6039", "+1.2")
    assert (change_unit("loss"), change_unit("f1")) == ("reduction (higher is better)", "points")
    boot = {"delta": 0.6039, "low": 0.5884, "high": 0.6183}
    record = {
        "primary_metric": "bits_per_byte",
        "reference": "r001",
        "min_effect": 0.01,
        "runs": [{"id": "r002", "verdict": "improved", "vs_reference": {"bootstrap": boot}}],
    }
    svg = str(comparison(record)["forest"])
    assert "bits_per_byte reduction against r001, higher is better (95% interval)" in svg
    assert "minimum effect +0.01" in svg
    assert "+0.6039 (+0.5884, +0.6183)" in svg


def test_sections_a_task_never_fills_say_so_not_none_yet(tmp_path):
    spec = SPEC | {
        "task": {"type": "format", "regex": "A: .+"},
        "hypothesis": {"behaviour": "b", "metric": "format_valid", "min_effect": 0.1},
        "guardrails": [{"metric": "exact_match", "scope": "overall", "max_drop": 0.0}],
        "model": {"path": "m", "kind": "causal"},
    }
    page = render(gather(Lab(tmp_path, validate_spec(spec), Store(tmp_path), None)))
    groups, confusion = section(page, "groups"), section(page, "confusion")
    assert "a format lab scores each answer whole" in groups and "none yet" not in groups
    assert "this lab&#39;s task is format" in confusion and "none yet" not in confusion
    assert "none yet" in section(page, "runs")  # what a format lab may still have


def test_the_split_table_counts_sources_for_pretrain_and_no_empty_label(tmp_path):
    """A pretrain lab's split table counts documents per source, as `tunelab data` shows it;
    it showed one untitled column repeating each split's total (its rows have no label)."""
    from tunelab.stages.report.sections import data_version

    store = Store(tmp_path)
    store.set_current_data("v1")
    splits = {s: {"n": n, "labels": {"": n}} for s, n in (("train", 774), ("test", 44))}
    by_source = {"train": {"code": 79, "prose": 695}, "test": {"code": 3, "prose": 41}}
    report = {"labels": [""], "splits": splits}
    atomic_write_json(store.data_dir("v1") / "report.json", report | {"by_source": by_source})
    data = data_version(store)
    assert data["labels"] == ["code", "prose"]
    assert data["splits"]["train"] == {"n": 774, "labels": {"code": 79, "prose": 695}}
    atomic_write_json(store.data_dir("v1") / "report.json", report)  # extraction: no label
    assert data_version(store)["labels"] == []


def test_many_classes_lie_down_a_readable_row_each():
    """77 intents' names, tilted under upright bars, ran into each other; past MANY_GROUPS the
    bars lie down, a row per class, and the chart grows with them."""
    import re

    from tunelab.stages.report.charts import MANY_GROUPS, group_bars

    def height(svg: str) -> float:
        return float(re.search(r'<svg[^>]* height="([\d.]+)pt"', svg).group(1))

    few = [f"class {i}" for i in range(MANY_GROUPS)]
    many = [f"intent {i:02d}" for i in range(77)]
    colours = {"r1": "#2563eb"}
    upright = group_bars([("r1", {g: 0.5 for g in few})], few, "f1", colours)
    lying = group_bars([("r1", {g: 0.5 for g in many})], many, "f1", colours)
    assert all(f">{g}<" in lying for g in many)
    assert height(lying) > 3 * height(upright)


def test_past_twelve_labels_the_confusions_are_listed_most_frequent_first():
    """A 77-label matrix was 5,929 cells in a page of 953 KB, unreadable; past MATRIX_LABELS a
    run's most frequent confusions are listed instead, with each one's share of its label."""
    from tunelab.stages.report.sections import MATRIX_LABELS, PAIRS_LISTED, confusions

    labels = [f"l{i:02d}" for i in range(MATRIX_LABELS + 1)]
    matrix = [[0] * len(labels) for _ in labels]
    for i in range(len(labels)):
        matrix[i][i] = 3
        matrix[i][(i + 1) % len(labels)] = 1 + (i == 4)  # l04 -> l05 twice
    record = {"id": "r2", "metrics": {"confusion": {"labels": labels, "matrix": matrix}}}
    (listed,) = confusions([record])
    assert "rows" not in listed and len(listed["pairs"]) == len(labels) <= PAIRS_LISTED
    first = listed["pairs"][0]
    assert (first["true"], first["predicted"], first["n"], first["share"]) == ("l04", "l05", 2, 0.4)
    assert listed["confused"] == len(labels) + 1 and listed["total"] == 4 * len(labels) + 1
    small = {"labels": labels[:3], "matrix": [row[:3] for row in matrix[:3]]}
    (matrix_view,) = confusions([{"id": "r3", "metrics": {"confusion": small}}])
    assert "pairs" not in matrix_view and len(matrix_view["rows"]) == 3


def test_the_data_section_says_where_validation_came_from(tmp_path):
    """Validation held out of a DatasetDict's train split was said by `tunelab data` only."""
    lab = build_lab(tmp_path)
    folder = lab.store.data_dir("v1")
    report = json.loads((folder / "report.json").read_text())
    carved = {"share": 0.1, "rows": 22, "seed": 0}
    atomic_write_json(
        folder / "report.json", report | {"presplit": True, "validation_from_train": carved}
    )
    data = section(render(gather(lab)), "data")
    assert "22 (10.0%) were held out of its train split as validation" in data
    atomic_write_json(folder / "report.json", report | {"presplit": True})
    assert "The data came already split: its own split was kept." in section(
        render(gather(lab)), "data"
    )
    atomic_write_json(folder / "report.json", report)
    assert "already split" not in section(render(gather(lab)), "data")
