"""Language modelling from scratch, measured in bits per byte.

Each validation document is scored alone (`training.evaluate_lm`): the summed negative
log-likelihood, in nats, of its text tokens, each predicted from the tokens before it in the
document. Over a set of documents:

    bits_per_byte = sum(nll) / (ln 2 * sum(UTF-8 bytes of the texts scored))
    loss          = sum(nll) / sum(tokens)          (nats per token)
    perplexity    = exp(loss)

Bits per byte does not depend on the tokenizer (a byte is a byte), so variants with other
tokenizers or vocabulary sizes compare fairly; loss and perplexity are per token and do not.
All three are *lower is better* (`lower_is_better`): `compare` turns their differences into
reductions, so a positive delta is a gain for every metric alike.

Per document a prediction keeps `nll` (nats), `bytes`, `tokens` and `source`, so the paired
bootstrap resamples documents and recomputes each ratio exactly (`ratio_rows`), and a
guardrail can judge one source (`per_source`).
"""

from __future__ import annotations

import math

import numpy as np

from tunelab.core.errors import TunelabError

name = "pretrain"
overall_metrics = frozenset({"bits_per_byte", "loss", "perplexity"})
class_metrics = frozenset({"bits_per_byte", "loss", "perplexity"})
"""Per-source metrics (usable in an `every_source` guardrail)."""
default_metric = "bits_per_byte"
group_scope = "every_source"
group_key = "per_source"
lower_is_better = frozenset({"bits_per_byte", "loss", "perplexity"})
evaluation_imports: tuple[str, ...] = ()

LN2 = math.log(2)


def sequence_length(spec) -> int:
    """Tokens per packed sequence: `task.sequence_length`, else `model.max_length`."""
    return getattr(spec.task, "sequence_length", None) or spec.model.max_length


def from_sums(nll: float, n_bytes: int, tokens: int) -> dict[str, float]:
    """The three metrics from summed nats, UTF-8 bytes and scored tokens."""
    if n_bytes <= 0 or tokens <= 0:
        raise TunelabError("no text to score: every document is empty")
    loss = nll / tokens
    return {"bits_per_byte": nll / (LN2 * n_bytes), "loss": loss, "perplexity": math.exp(loss)}


def metrics(predictions: list[dict]) -> dict:
    """Overall and per-source metrics of scored documents."""
    if not predictions:
        raise TunelabError("no documents to score")
    out = _summed(predictions)
    sources = sorted({p["source"] for p in predictions})
    out["per_source"] = {s: _summed([p for p in predictions if p["source"] == s]) for s in sources}
    return out


def _summed(predictions: list[dict]) -> dict:
    nll = sum(p["nll"] for p in predictions)
    n_bytes = sum(p["bytes"] for p in predictions)
    tokens = sum(p["tokens"] for p in predictions)
    return {
        **from_sums(nll, n_bytes, tokens),
        "n": len(predictions),
        "bytes": n_bytes,
        "tokens": tokens,
    }


def ratio_rows(metric: str, weights: np.ndarray, nll: np.ndarray) -> np.ndarray:
    """`metric` of each row of resampled documents, negated (lower is better, so a larger value
    is better as `compare` expects): `weights` are the documents' bytes (bits per byte) or
    tokens (loss, perplexity), `nll` their summed nats, both shaped (resamples, n)."""
    ratio = nll.sum(axis=-1) / weights.sum(axis=-1)
    if metric == "bits_per_byte":
        return -ratio / LN2
    if metric == "loss":
        return -ratio
    return -np.exp(ratio)


def weight_key(metric: str) -> str:
    """What a metric divides the summed nats by: `bytes` or `tokens`."""
    return "bytes" if metric == "bits_per_byte" else "tokens"


def document_value(pred: dict, metric: str) -> float:
    """One document's own metric, negated (per-document comparisons: flips, concentration)."""
    return float(ratio_rows(metric, np.array([pred[weight_key(metric)]]), np.array([pred["nll"]])))
