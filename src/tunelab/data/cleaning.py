"""Named cleaning rules, applied in the spec's order.

Each rule is named so the report can say how many rows it changed: a rule that changes
nothing, or half the data, is worth knowing about before training. A row whose text a rule
empties is quarantined with that rule's name, not dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.spec import CleaningRule
from tunelab.data.loaders import Example, Rejection

Clean = Callable[[str], str]


def _no_options(name: str, fn: Clean) -> Callable[[dict[str, Any]], Clean]:
    def make(options: dict[str, Any]) -> Clean:
        if options:
            raise TunelabError(f"cleaning rule {name!r} takes no options, got {sorted(options)}")
        return fn

    return make


def _strip_regex(options: dict[str, Any]) -> Clean:
    unknown = set(options) - {"pattern"}
    if unknown or not isinstance(options.get("pattern"), str):
        raise TunelabError(
            "cleaning rule 'strip_regex' needs one option, `pattern` (a regular expression)"
            + (f"; unknown option(s) {sorted(unknown)}" if unknown else "")
        )
    try:
        pattern = re.compile(options["pattern"])
    except re.error as err:
        raise TunelabError(
            f"cleaning rule 'strip_regex': invalid pattern {options['pattern']!r}: {err}"
        ) from None
    return lambda text: pattern.sub("", text)


RULES: dict[str, Callable[[dict[str, Any]], Clean]] = {
    "unicode_nfkc": _no_options("unicode_nfkc", lambda t: unicodedata.normalize("NFKC", t)),
    # runs of whitespace (every character `str.isspace` accepts, as the regex `\s`) become
    # one space, and the ends are stripped: `re.sub(r"\s+", " ", t).strip()`, several times faster
    "whitespace": _no_options("whitespace", lambda t: " ".join(t.split())),
    "strip_regex": _strip_regex,
    "lowercase": _no_options("lowercase", str.lower),
}


def make_rule(rule: CleaningRule, index: int | None = None) -> Clean:
    """Build one rule from the spec; errors name the rule and its place in the spec."""
    where = f"data.cleaning[{index}]: " if index is not None else ""
    if rule.rule not in RULES:
        raise TunelabError(f"{where}unknown cleaning rule {rule.rule!r}; known: {sorted(RULES)}")
    try:
        return RULES[rule.rule](dict(rule.model_extra or {}))
    except ValueError as err:
        raise TunelabError(f"{where}{err}") from None


def rule_settings(rules: list[CleaningRule]) -> list[dict[str, Any]]:
    """The rules with their options, as recorded in the manifest and hashed into the version."""
    return [rule.model_dump(mode="json") for rule in rules]


@dataclass
class Cleaned:
    examples: list[Example]
    rejections: list[Rejection]
    changed: dict[str, int]
    """Rows whose text each rule changed, in spec order (a repeated rule is `name#2`)."""


def apply_cleaning(
    examples: list[Example], rules: list[CleaningRule], hold: Callable[[str], Any] = str
) -> Cleaned:
    """Apply every rule to every row; all rules are built first so a bad one fails early.
    `hold`: what a changed row keeps of its new text (`spill.TextSpill.hold`)."""
    built = [(name, make_rule(r, i)) for i, (name, r) in enumerate(_named(rules))]
    out = Cleaned([], [], {name: 0 for name, _ in built})
    for ex in examples:
        text = original = ex.text
        emptied_by = None
        for name, clean in built:
            new = clean(text)
            if new != text:
                out.changed[name] += 1
                text = new
            if not text.strip():
                emptied_by = name
                break
        if emptied_by is None:
            out.examples.append(replace(ex, body=hold(text)) if text != original else ex)
        else:
            out.rejections.append(
                ex.reject("empty_after_cleaning", f"text is empty after rule {emptied_by!r}")
            )
    return out


def _named(rules: list[CleaningRule]) -> list[tuple[str, CleaningRule]]:
    seen: dict[str, int] = {}
    named = []
    for rule in rules:
        seen[rule.rule] = seen.get(rule.rule, 0) + 1
        n = seen[rule.rule]
        named.append((rule.rule if n == 1 else f"{rule.rule}#{n}", rule))
    return named
