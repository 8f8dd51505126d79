"""The noise floor's spread: every metric's mean, sd and range over the seeds (a forgetting
guardrail's text too), not the counts of the validation data beside them (a source's bytes and
tokens are the same for every seed)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tunelab.stages.noise import spread
from tunelab.views.runs import noise as show_noise


def pretrain_metrics(bpb: float, manuals: float) -> dict:
    def source(x: float, n_bytes: int) -> dict:
        metrics = {"bits_per_byte": x, "loss": 2 * x, "perplexity": 10 * x}
        return metrics | {"bytes": n_bytes, "tokens": n_bytes // 4, "n": 3}

    return {
        "bits_per_byte": bpb,
        "loss": 2 * bpb,
        "perplexity": 10 * bpb,
        "n": 6,
        "per_source": {"manuals": source(manuals, 1000), "news": source(bpb, 4000)},
    }


def floor(measured: dict) -> dict:
    """A noise record of three seeds of r002 with `measured` as its spread."""
    return {
        "id": "n001",
        "of": "r002",
        "runs": ["r002", "r003", "r004"],
        "seeds": [0, 1, 2],
        "trained": 2,
        "group": "g001",
        "file": ".tunelab/noise/n001.json",
        "spread": measured,
    }


def test_a_sources_counts_are_not_spread_over_seeds():
    runs = [
        {"metrics": pretrain_metrics(b, m)} for b, m in ((2.70, 2.50), (2.72, 2.53), (2.74, 2.53))
    ]
    out = spread(runs, "pretrain")
    assert set(out["per_source"]["manuals"]) == {"bits_per_byte", "loss", "perplexity"}
    manuals = out["per_source"]["manuals"]["bits_per_byte"]
    assert manuals["mean"] == pytest.approx(2.52) and manuals["range"] == pytest.approx(0.03)
    assert out["overall"]["bits_per_byte"]["sd"] == pytest.approx(0.02)
    text = io.StringIO()
    record = floor(out)
    show_noise(record, Console(file=text, width=120))
    shown = text.getvalue()
    assert "bits_per_byte manuals" in shown and "bytes" not in shown.replace("bits_per_byte", "")
    assert "perplexity manuals" in shown and " 27.2 " in shown  # to one decimal


def test_a_forgetting_guardrails_text_is_spread_over_the_seeds_that_scored_it():
    def run(bpb: float, news: float | None) -> dict:
        out = {"metrics": pretrain_metrics(bpb, bpb)}
        if news is None:  # never scored on the text
            return out
        scored = {"bits_per_byte": news, "loss": 3 * news, "perplexity": 30.0, "n": 25}
        return out | {"guard": {"general/news.jsonl": {"metrics": scored | {"bytes": 900}}}}

    out = spread([run(2.7, 1.168), run(2.7, 1.149), run(2.7, 1.164)], "pretrain")
    news = out["forgetting"]["general/news.jsonl"]
    assert set(news) == {"bits_per_byte", "loss"}  # what such a guardrail can measure
    assert news["bits_per_byte"]["mean"] == pytest.approx(1.1603, abs=1e-4)
    assert news["bits_per_byte"]["range"] == pytest.approx(0.019)
    # a text one seed was not scored on has no spread to show
    assert "forgetting" not in spread([run(2.7, 1.168), run(2.7, None)], "pretrain")
    record = {"id": "n001", "of": "r002", "runs": ["r002", "r003", "r004"], "seeds": [0, 1, 2]}
    record |= {"trained": 2, "group": "g001", "file": "n001.json", "spread": out}
    text = io.StringIO()
    show_noise(record, Console(file=text, width=120))
    assert "bits_per_byte general/news.jsonl │ forgetting │ 1.1603 │ 0.0100 │ 0.0190" in (
        text.getvalue()
    )


def test_the_floor_says_how_rough_its_sd_is_and_that_tied_seeds_measured_nothing():
    from tunelab.stages.noise import sd_interval, tie_warnings

    assert sd_interval(1) == {"df": 1, "level": 0.95, "low_factor": 0.446, "high_factor": 31.91}
    assert (sd_interval(2)["low_factor"], sd_interval(2)["high_factor"]) == (0.521, 6.285)
    # three seeds of 0.36: np.std reads 6.8e-17 of them, not 0
    tied = [{"metrics": {"accuracy": 0.36, "macro_f1": m, "n": 50}} for m in (0.7, 0.72, 0.7)]
    record = floor(spread(tied, "classification")) | {"sd_interval": sd_interval(2)}
    record["warnings"] = tie_warnings(record)  # in the result, so `--json` carries it too
    text = io.StringIO()
    show_noise(record, Console(file=text, width=300))
    shown = text.getvalue()
    assert "an sd from 3 seeds is rough: on 2 degrees of freedom the true sd lies" in shown
    assert "between 0.521 and 6.285 times it" in shown
    assert "the seeds tie on accuracy: a spread of 0 measured nothing" in shown
    assert "macro_f1" not in shown.split("warning")[1].split(":")[0]  # it differs: not tied
    assert "tunelab noise r002 --seeds 5" in shown
