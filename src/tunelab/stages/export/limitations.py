"""What a bundle's user should know before trusting it, derived from the records alone:
classes or fields that regressed (with their intervals), every guardrail's margin, how much
input the model never saw (truncation), typical failures with their inputs, the blocking
findings its run was told to train past (`--allow-warnings`), and what the comparison that
judged it warned of it (one answer for every example, a probe start that broke)."""

from __future__ import annotations

from tunelab.core.allowed import trained_past

FAILURES = 5
SNIPPET = 300


def limitations(
    record: dict, comparison: dict | None, predictions: list[dict], rows: dict, truncation: dict
) -> dict:
    row = (comparison or {}).get("row") or {}
    return {
        "verdict": row.get("verdict"),
        "against": (comparison or {}).get("reference"),
        "regressed": regressed(row),
        "guardrails": margins(row),
        "truncation": truncation,
        "typical_failures": failures(predictions, rows),
        "trained_past": trained_past(record),
        "warnings": row.get("warnings") or [],  # the comparison's, of this run
        "source": "comparison " + comparison["id"] if comparison else "no comparison judged it",
    }


def regressed(row: dict) -> list[dict]:
    """Every class or field (or overall metric) a guardrail measured lower than the
    reference, worst first, with its paired interval and whether it counts the seeds."""
    out = []
    for g in row.get("guardrails", []):
        for name, c in g["checks"].items():
            if c.get("delta", 0) < 0:  # a check that did not run has none
                out.append(
                    {
                        "metric": g["metric"],
                        "on": g.get("on"),
                        "scope": name,
                        "delta": c["delta"],
                        "low": c["low"],
                        "high": c["high"],
                        "status": c["status"],
                        "seeds": c.get("basis") == "seeds and examples",
                    }
                )
    return sorted(out, key=lambda r: r["delta"])


def margins(row: dict) -> list[dict]:
    """Each guardrail's status and how far its worst interval end is from the limit."""
    return [
        {
            "metric": g["metric"],
            "on": g.get("on"),
            "scope": g["scope"],
            "max_drop": g["max_drop"],
            "status": g["status"],
            "worst": g["worst"],
            "margin": g["checks"][g["worst"]].get("margin"),  # None: not checked
            "not_checked": g["checks"][g["worst"]].get("not_checked"),
        }
        for g in row.get("guardrails", [])
    ]


def failures(predictions: list[dict], rows: dict, n: int = FAILURES) -> list[dict]:
    """Up to n wrong answers, one per (gold, predicted) kind first, with their inputs. A
    language model's scored documents (task pretrain) have no right answer: none."""
    if any("nll" in p for p in predictions):
        return []
    wrong = [p for p in predictions if not _right(p)]
    seen, picked = set(), []
    for p in wrong:
        kind = (str(p.get("gold", "")), str(p.get("predicted", p.get("output", ""))[:40]))
        if kind not in seen:
            seen.add(kind)
            picked.append(p)
    picked += [p for p in wrong if p not in picked]
    return [_failure(p, rows.get(p["id"], {})) for p in picked[:n]]


def _right(p: dict) -> bool:
    if "gold" in p:
        return p["gold"] == p["predicted"]
    score = p.get("score", {})
    return bool(score.get("exact_match", score.get("format_valid", False)))


def _failure(p: dict, row: dict) -> dict:
    if row.get("messages"):
        text = _asked(row["messages"])
    else:
        text = row.get("text", "") or (f"the image {row['file']}" if "image" in row else "")
    out = {"id": p["id"], "input": text[:SNIPPET] + ("…" if len(text) > SNIPPET else "")}
    if "gold" in p:
        return out | {"expected": p["gold"], "predicted": p["predicted"]}
    return out | {"expected": p.get("target"), "output": p.get("output")}


def _asked(turns: list[dict]) -> str:
    """A conversation's input as the model met it: the turn its final answer answers, after
    a mark where earlier turns came; never the answer itself."""
    if len(turns) < 2:
        return ""
    asked = turns[-2]
    return ("… " if len(turns) > 2 else "") + f"{asked['role']}: {asked['content']}"
