"""Cleaning rules: named, applied in order, counted, and loud about bad settings."""

from __future__ import annotations

import re

import pytest

from tunelab.core.spec import CleaningRule
from tunelab.data.cleaning import apply_cleaning, make_rule, rule_settings
from tunelab.data.loaders import Example


def rules(*items: dict) -> list[CleaningRule]:
    return [CleaningRule.model_validate(item) for item in items]


def rows(*texts: str) -> list[Example]:
    return [Example(f"f:{i}", t, "a", "f", i) for i, t in enumerate(texts, start=1)]


def test_whitespace_is_every_unicode_space_as_the_regex_had_it() -> None:
    """The rule splits on `str.isspace` characters; its versions before split on the regex
    `\\s`. Both are the same set, so every data version keeps its id."""
    spaces = "".join(chr(c) for c in range(0x3001) if chr(c).isspace() or re.match(r"\s", chr(c)))
    clean = make_rule(CleaningRule(rule="whitespace"))
    for text in (spaces + "a" + spaces + "b" + spaces, "a\u2028\u00a0\u3000b", "", "x"):
        assert clean(text) == re.sub(r"\s+", " ", text).strip()


def test_each_rule_does_its_one_thing() -> None:
    assert make_rule(CleaningRule(rule="unicode_nfkc"))("ﬁne ２") == "fine 2"
    assert make_rule(CleaningRule(rule="whitespace"))("  a \t\n b  ") == "a b"
    assert make_rule(CleaningRule(rule="lowercase"))("AbC") == "abc"
    strip = make_rule(CleaningRule.model_validate({"rule": "strip_regex", "pattern": r"<[^>]+>"}))
    assert strip("<b>bold</b> text") == "bold text"


def test_rules_apply_in_spec_order_and_count_changed_rows() -> None:
    spec = rules(
        {"rule": "strip_regex", "pattern": r"\[\d+\]"},
        {"rule": "whitespace"},
        {"rule": "lowercase"},
    )
    out = apply_cleaning(rows("Cited [1] here", "plain text", "Two  Spaces"), spec)
    assert [e.text for e in out.examples] == ["cited here", "plain text", "two spaces"]
    assert out.changed == {"strip_regex": 1, "whitespace": 2, "lowercase": 2}
    assert out.rejections == []


def test_order_matters() -> None:
    upper_first = rules({"rule": "strip_regex", "pattern": "[A-Z]"}, {"rule": "lowercase"})
    lower_first = rules({"rule": "lowercase"}, {"rule": "strip_regex", "pattern": "[A-Z]"})
    assert apply_cleaning(rows("aB"), upper_first).examples[0].text == "a"
    assert apply_cleaning(rows("aB"), lower_first).examples[0].text == "ab"


def test_a_row_emptied_by_a_rule_is_quarantined_with_the_rule_name() -> None:
    spec = rules({"rule": "strip_regex", "pattern": r"https?://\S+"}, {"rule": "whitespace"})
    out = apply_cleaning(rows("keep me", "http://only.a/link  "), spec)
    assert [e.text for e in out.examples] == ["keep me"]
    [rej] = out.rejections
    assert (rej.file, rej.line, rej.kind) == ("f", 2, "empty_after_cleaning")
    assert "strip_regex" in rej.reason


def test_a_repeated_rule_is_counted_separately() -> None:
    out = apply_cleaning(rows("A"), rules({"rule": "lowercase"}, {"rule": "lowercase"}))
    assert out.changed == {"lowercase": 1, "lowercase#2": 0}


def test_unknown_rule_lists_known_ones() -> None:
    with pytest.raises(ValueError, match=r"data\.cleaning\[1\].*'strip_html'.*lowercase"):
        apply_cleaning(rows("x"), rules({"rule": "lowercase"}, {"rule": "strip_html"}))


def test_invalid_regex_names_the_rule() -> None:
    with pytest.raises(ValueError, match=r"data\.cleaning\[0\].*strip_regex.*invalid pattern"):
        apply_cleaning(rows("x"), rules({"rule": "strip_regex", "pattern": "(unclosed"}))


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="pattern"):
        make_rule(CleaningRule(rule="strip_regex"))
    with pytest.raises(ValueError, match="takes no options"):
        make_rule(CleaningRule.model_validate({"rule": "lowercase", "locale": "tr"}))


def test_rule_settings_keep_options() -> None:
    spec = rules({"rule": "strip_regex", "pattern": "x"}, {"rule": "whitespace"})
    assert rule_settings(spec) == [{"rule": "strip_regex", "pattern": "x"}, {"rule": "whitespace"}]
