"""What every view shares: the console, percentages, verdict colours, short row ids."""

from __future__ import annotations

from rich.console import Console

VERDICT_STYLE = {
    "improved": "bold green",
    "improved on one seed": "green",
    "guardrail unresolved": "yellow",
    "within seed noise": "yellow",
    "no evidence": "yellow",
    "guardrail broken": "bold red",
    "worse on one seed": "red",
    "worse": "bold red",
    None: "dim",
}
GUARD_STYLE = {"holds": "green", "unresolved": "yellow", "broken": "bold red"}


def verdict_text(verdict: str | None) -> str:
    """A verdict in its colour; None (no hypothesis recorded) reads `no verdict`."""
    return f"[{VERDICT_STYLE[verdict]}]{verdict or 'no verdict'}[/]"


class _Console(Console):
    """rich's console, but a reader that stops reading (`tunelab runs | head`) raises
    BrokenPipeError for the CLI to answer (exit 141, the work recorded), where rich's own
    answer is `SystemExit(1)`: an internal error's code, said with no message."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console(stderr: bool = False) -> Console:
    """A console at the terminal's width, or 120 columns when the output is piped."""
    out = _Console(stderr=stderr)
    return out if out.is_terminal else _Console(stderr=stderr, width=120)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


PLAIN = frozenset({"bits_per_byte", "loss", "perplexity"})
"""Metrics that are not rates (task pretrain): shown as numbers, never as percentages."""


def metric_value(metric: str, x: float | None, percent_sign: str = "") -> str:
    """A metric's value: a plain number for `PLAIN` metrics, else a percentage (with
    `percent_sign` after it where the caller shows one)."""
    if metric == "perplexity" and x is not None:  # a count of choices: 884.1, not 884.0698
        return f"{x:,.1f}"
    if metric in PLAIN and x is not None:
        return f"{x:.4f}"
    return pct(x) + (percent_sign if x is not None else "")


def delta_value(metric: str, boot: dict, named: bool = True) -> str:
    """A paired difference with its interval: points for a rate, the reduction itself for a
    `PLAIN` metric (lower is better: compare reports how much it went down), named so unless
    `named` is False (a column whose header says it)."""
    if metric in PLAIN:
        word = " reduction" if named else ""
        return f"{boot['delta']:+.4f} ({boot['low']:+.4f}, {boot['high']:+.4f}){word}"
    return f"{100 * boot['delta']:+.1f} ({100 * boot['low']:+.1f}, {100 * boot['high']:+.1f})"


def short_id(row_id: str) -> str:
    """A row id that is a long path, shown by its last two parts (`business/214.txt`)."""
    parts = row_id.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else row_id
