"""The human view of `final`: the one look at the sealed test split, beside validation."""

from __future__ import annotations

from rich.console import Console

from tunelab.views.runs import metric_line
from tunelab.views.style import PLAIN, metric_value


def final(result: dict, console: Console) -> None:
    """The one look at the test split: its metrics beside validation, and the access."""
    m, primary = result["metrics"], result.get("primary_metric")
    console.print(
        f"[bold]final {result['run']}[/] on the sealed test split of {result['data_version']}"
        f" ({m['n']} examples, sha256 {result['test_sha256'][:12]}… verified)"
    )
    console.print(f"  test: {metric_line(m)}")
    if interval := result.get("interval"):
        console.print(f"  {_interval_line(interval)}")
    val = result.get("validation_metrics") or {}
    if primary and primary in val and primary in m:
        # of the values as shown: 66.6% -> 72.5% read "+6.0 points" from the unrounded ones
        gap = round(m[primary], 4) - round(val[primary], 4) if primary in PLAIN else None
        shown = round(100 * m[primary], 1) - round(100 * val[primary], 1)
        change = f"{gap:+.4f}, lower is better" if gap is not None else f"{shown:+.1f} points"
        console.print(
            f"  {primary.replace('_', ' ')}: validation {metric_value(primary, val[primary], '%')}"
            f" -> test {metric_value(primary, m[primary], '%')} ({change})"
        )
    copied = result.get("copied_in_validation")
    if copied and copied["rows"]:
        console.print(
            f"  [yellow]note[/] {copied['rows']} of the {m['n']} test rows have an exact or near "
            f"copy in validation ({copied['pairs']} pairs, {copied['file']}): a run chosen on "
            "validation was chosen partly on them, so the test score is not wholly independent "
            "of the choice" + _without(copied.get("without"))
        )
    access = f"access {result['n']} recorded in {result['file']}"
    if result["repeated"]:
        earlier = ", ".join(f"{e['run']} ({e['time']})" for e in result["earlier"])
        console.print(
            f"  [yellow]repeated[/] {access}; earlier: {earlier}; reason: {result['reason']}"
        )
    else:
        console.print(f"  {access}; any later look needs --reason and is listed in the handover")


def _interval_line(interval: dict) -> str:
    """`macro f1 95% interval 91.2% to 95.6% over the 445 test examples (their noise, not
    the seeds')`: how far another sample of this size could move the score."""
    metric = interval["metric"]
    low, high = (metric_value(metric, interval[k], "%") for k in ("low", "high"))
    alike = interval.get("unseen")  # every example scored alike: the exact binomial bound
    how = "; every one scored alike, so the exact binomial bound" if alike else ""
    if "right" in interval and not alike:  # a share of examples right: Clopper-Pearson
        how = f"; {interval['right']} of {interval['n']} right, the exact binomial interval"
    return (
        f"{metric.replace('_', ' ')} {interval['level']:.0%} interval {low} to {high} over the "
        f"{interval['n']} test examples (their noise, not the seeds'{how})"
    )


def _without(without: dict | None) -> str:
    """`; without them (426 rows): macro f1 93.6%`, the test score the choice did not see."""
    if not without or without.get("value") is None:
        return ""
    metric = without["metric"]
    value = metric_value(metric, without["value"], "%")
    return f"; without them ({without['n']} rows): {metric.replace('_', ' ')} {value}"
