"""How a difference of a metric is written, in words the comparison's reasons, the terminal and
the lab report share: a rate in points; a lower-is-better metric (bits per byte, loss,
perplexity) as its reduction where it is the gain sought, and as the change of the metric
itself where it is a guardrail's cost (a rise is the harm)."""

from __future__ import annotations

from tunelab.tasks.pretrain import lower_is_better


def gain(metric: str, boot: dict) -> str:
    """A verdict's interval, with what it resamples: `+86.7 points (95% CI +76.7 to +95.0,
    examples)`, or `reduction +0.0123 (95% CI +0.0040 to +0.0200, seeds and examples)`."""
    d, low, high, over = boot["delta"], boot["low"], boot["high"], boot["basis"]
    if metric in lower_is_better:
        return f"reduction {d:+.4f} (95% CI {low:+.4f} to {high:+.4f}, {over})"
    return f"{100 * d:+.1f} points (95% CI {100 * low:+.1f} to {100 * high:+.1f}, {over})"


def span(metric: str, delta: float, low: float, high: float) -> str:
    """A difference and its interval, the gain's way: `+86.7 points (+76.7 to +95.0)`."""
    if metric in lower_is_better:
        return f"reduction {delta:+.4f} ({low:+.4f} to {high:+.4f})"
    return f"{100 * delta:+.1f} points ({100 * low:+.1f} to {100 * high:+.1f})"


def effect(metric: str, min_effect: float) -> str:
    """`minimum effect +10.0 points`, or `minimum effect 0.01` (a reduction)."""
    if metric in lower_is_better:
        return f"minimum effect {min_effect:g} (a reduction)"
    return f"minimum effect {100 * min_effect:+.1f} points"


def change(metric: str, check: dict) -> str:
    """A guardrail check's change in the metric's own direction: `-2.1 points (-5.8 to +1.2)`,
    or for a lower-is-better metric `+0.0570 (+0.0510 to +0.0629)`, a rise."""
    d, low, high = check["delta"], check["low"], check["high"]
    if metric in lower_is_better:  # recorded as the reduction: the change is its negative
        return f"{-d:+.4f} ({-high:+.4f} to {-low:+.4f})"
    return f"{100 * d:+.1f} points ({100 * low:+.1f} to {100 * high:+.1f})"


def limit(metric: str, max_drop: float) -> str:
    """`limit -2.0 points`, `limit +0.05 (a rise)`, or where no drop is allowed
    `limit 0 (no drop)`: never a `-0.0`."""
    if not max_drop:
        return "limit 0 (no drop)"
    if metric in lower_is_better:
        return f"limit +{max_drop:g} (a rise)"
    return f"limit -{100 * max_drop:.1f} points"


def p_value(value: float) -> str:
    """A p-value to three places; one that rounds to 0.000 is `<0.001`, not zero."""
    return "<0.001" if value < 0.0005 else f"{value:.3f}"
