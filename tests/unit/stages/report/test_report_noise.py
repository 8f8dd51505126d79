"""The report's noise floors: each `tunelab noise` record with its seeds and every metric's
spread, read as `tunelab noise` prints it (rates in percent, bits per byte as they are)."""

from __future__ import annotations

from tunelab.core.lab import Lab
from tunelab.core.layout import NOISE
from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.stages.noise import sd_interval, spread
from tunelab.stages.report.html import gather, render

SPEC = {
    "compass": {"kind": "research", "why": "Manual pages to JSON."},
    "hypothesis": {"behaviour": "LoRA answers exactly", "metric": "exact_match", "min_effect": 0.1},
    "guardrails": [{"metric": "json_valid", "scope": "overall", "max_drop": 0.0}],
    "task": {
        "type": "extraction",
        "required": ["name"],
        "json_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    "data": {"sources": [{"type": "jsonl", "path": "d"}]},
    "model": {"path": "m"},
}


def seed_run(exact: float, news: float) -> dict:
    fields = {"name": {"presence": 1.0, "exact": exact, "support": 60}}
    metrics = {"exact_match": exact, "json_valid": 1.0, "schema_valid": 1.0, "n": 60}
    metrics |= {"field_presence": 1.0, "field_accuracy": exact, "per_field": fields}
    guard = {"news.jsonl": {"metrics": {"bits_per_byte": news, "loss": 3 * news, "n": 25}}}
    return {"metrics": metrics, "guard": guard}


def section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}">')
    return page[start : page.index("</section>", start)]


def test_a_noise_record_is_shown_with_its_seeds_and_spread(tmp_path):
    lab = Lab(tmp_path, validate_spec(SPEC), Store(tmp_path), None)
    runs = [seed_run(0.867, 1.1683), seed_run(0.817, 1.1494), seed_run(0.867, 1.1638)]
    record = {
        "of": "r002-lora",
        "group": "g001",
        "runs": ["r002-lora", "r009-lora-s1", "r010-lora-s2"],
        "seeds": [0, 625451353, 749192398],
        "created": "2026-12-05T21:08:59+00:00",
        "spread": spread(runs, "extraction"),
        "sd_interval": sd_interval(2),
    }
    noise_id, path = lab.store.reserve(NOISE, "n")
    record |= {"id": noise_id, "file": str(path.relative_to(tmp_path))}
    lab.store.save(path, record, "noise", noise=noise_id, of=record["of"], runs=record["runs"])
    noise = section(render(gather(lab)), "noise")
    assert "<code>n001</code>: r002-lora over 3 seeds" in noise
    assert "seeds 0, 625451353, 749192398), measured 2026-12-05 21:08 UTC" in noise
    # a rate in percent, its sd in points; the forgetting text's bits per byte as it is
    assert '<td>exact_match</td><td>overall</td><td class="num">85.0</td>' in noise
    assert '<td class="num">2.9</td><td class="num">5.0</td>' in noise
    assert "<td>exact name</td><td>per_field</td>" in noise
    assert "<td>bits_per_byte news.jsonl</td><td>forgetting</td>" in noise
    assert (
        '<td class="num">1.1605</td><td class="num">0.0099</td><td class="num">0.0189</td>' in noise
    )
    assert "none yet" not in noise
    assert "on 2 degrees of freedom the true sd lies between 0.521 and 6.285 times it" in noise
