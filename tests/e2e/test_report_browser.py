"""The report page in a real browser: headless Chromium (Debian's `chromium` package) renders it
without a console error, its DOM has every section and figure, and a screenshot shows it."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from PIL import Image

from tunelab.core.lab import Lab
from tunelab.core.spec import SPEC_FILE, validate_spec
from tunelab.core.store import Store, atomic_write_json, write_jsonl
from tunelab.stages.compare.verdicts import compare
from tunelab.stages.report.html import SECTIONS, write_report
from tunelab.tasks.classification import metrics

CHROMIUM = os.environ.get("TUNELAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
"""Debian's `chromium`; TUNELAB_CHROMIUM names another Chromium or Chrome binary."""
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).is_file(),
        reason=f"no Chromium binary at {CHROMIUM}: install Debian's `chromium` package "
        "(`apt-get install -y chromium`, or set TUNELAB_CHROMIUM) to run the browser check of "
        "`tunelab report`",
    ),
]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
PAGE_TROUBLE = (":CONSOLE", "Uncaught", "net::ERR_", "Failed to load resource")
"""What a page's own problems look like in Chromium's log (the rest is the browser's)."""
LABELS = ["business", "sport", "tech"]
SPEC = {
    "compass": {"kind": "research", "why": "Sort news into desks."},
    "hypothesis": {"behaviour": "LoRA beats the probe", "metric": "accuracy", "min_effect": 0.02},
    "guardrails": [{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
    "data": {"sources": [{"type": "jsonl", "path": "d"}]},
    "model": {"path": "m"},
}


def add_run(lab: Lab, name: str, kind: str, rate: float, **extra) -> None:
    run_id, run_dir = lab.store.new_run(name)
    preds = [
        {"id": f"{g}{i}", "gold": g, "predicted": g if i < 30 * rate else LABELS[0]}
        for g in LABELS
        for i in range(30)
    ]
    write_jsonl(run_dir / "predictions.jsonl", preds)
    record = {
        "id": run_id,
        "kind": kind,
        "status": "completed",
        "data_version": "v1",
        "task": "classification",
        "method": name,
        "created": "2026-11-30T09:00:00+00:00",
        "spec": lab.spec.to_dict(),
        "metrics": metrics([p["gold"] for p in preds], [p["predicted"] for p in preds], LABELS),
        **extra,
    }
    lab.store.write_record(run_id, record)


def build_lab(path: Path) -> Lab:
    path.mkdir()
    (path / SPEC_FILE).write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    lab = Lab(path, validate_spec(SPEC), Store(path), None)
    lab.store.set_current_data("v1")
    atomic_write_json(lab.store.data_dir("v1") / "manifest.json", {"labels": LABELS})
    atomic_write_json(
        lab.store.data_dir("v1") / "report.json",
        {"rows_read": 100, "kept": 90, "quarantined": 4, "duplicates_removed": 6},
    )
    add_run(lab, "probe", "baseline", 0.6)
    steps = [{"step": s, "loss": 1.0 / s, "lr": 1e-3 * (1 - s / 21)} for s in range(1, 21)]
    add_run(lab, "lora", "variant", 0.95, parent="r001-probe", training={"history": steps})
    compare(lab)
    return lab


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def page_trouble(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(t in line for t in PAGE_TROUBLE)]


def test_the_console_check_sees_a_broken_page(tmp_path):
    """The control for the test below: a page that logs an error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom')</script>")
    done = chromium(tmp_path / "profile", "--dump-dom", bad.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert any("boom" in line for line in page_trouble(done.stderr))


def test_the_report_renders_in_chromium_without_errors(tmp_path):
    lab = build_lab(tmp_path / "lab")
    url = Path(write_report(lab)["file"]).as_uri()

    dom = chromium(tmp_path / "dom-profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert page_trouble(dom.stderr) == []
    for anchor, title in SECTIONS:
        assert f'<section id="{anchor}">' in dom.stdout and title in dom.stdout
    assert dom.stdout.count("<svg") >= 4  # curves, forest, guardrail, per-class bars
    assert "r002-lora" in dom.stdout and "none yet" in dom.stdout

    png = tmp_path / "report.png"
    shot = chromium(
        tmp_path / "shot-profile", f"--screenshot={png}", "--window-size=1280,2000", url
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert page_trouble(shot.stderr) == []
    assert png.is_file() and png.stat().st_size > 20_000
    with Image.open(png) as image:
        assert image.size == (1280, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 64  # text, tables, badges: not a blank page
