"""Durations as tunelab's sentences give them, one rule each: `seconds` in a sentence or a
table, `clock` on a progress line."""

from __future__ import annotations


def seconds(x: float, hours: bool = True) -> str:
    """`0.025 s`, `9.39 s`, `1,200 s`, `90,720 s (25.2 h)`: three significant figures below
    100 s, whole seconds from there (999.6 s read `1e+03 s`), and the hours past one unless
    the sentence gives them itself (`hours=False`)."""
    text = f"{x:,.0f} s" if x >= 99.95 else f"{x:.3g} s"
    return f"{text} ({x / 3600:.3g} h)" if hours and x >= 3600 else text


def clock(x: float) -> str:
    """`1:05` (m:ss), or `2:03:04` (h:mm:ss) past an hour."""
    minutes, s = divmod(round(x), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}:{m:02d}:{s:02d}" if hours else f"{m}:{s:02d}"
