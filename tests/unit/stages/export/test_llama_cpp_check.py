"""verify's llama.cpp check without llama.cpp: where `llama_cpp` cannot be imported the `gguf`
item says "not checked" and why (a warning mark, never a pass of llama.cpp); the decoding
loop's stop and length rules are those of tunelab's `generate`."""

from __future__ import annotations

import json
import sys
import types

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import extraction_spec
from tunelab.modeling.gguf_write import write_gguf
from tunelab.stages.export import llama_cpp_check as L
from tunelab.stages.export.verify import item
from tunelab.stages.export.verify_gguf import check_gguf
from tunelab.views.check import mark_of

ROW = {"id": "r1", "text": "LS(1)\n\nNAME\n  ls - list directory contents", "target": {}}


@pytest.fixture
def no_llama_cpp(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` raises ImportError


def _info(tiny_llama, dtype: str = "f32") -> dict:
    return {"spec": extraction_spec(tiny_llama), "labels": [], "gguf": {"dtype": dtype}}


def test_without_llama_cpp_the_check_is_not_checked_with_the_reason(no_llama_cpp, tiny_llama):
    sample = [{"row": ROW, "prediction": {"id": "r1", "output": "{}"}}]
    path = tiny_llama / "x.gguf"
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, path, "f16")
    assert found["checked"] is False
    assert found["why"].startswith("llama.cpp runtime not built (make gguf-runtime)")
    assert not L.passes(found)
    assert L.describe(found).startswith(
        "llama.cpp: not checked: llama.cpp runtime not built (make gguf-runtime)"
    )


def test_verify_gguf_item_says_not_checked_never_passed(no_llama_cpp, tiny_llama, tmp_path):
    """The whole `gguf` item on a bundle-shaped folder: transformers' read-back passes, the
    llama.cpp clause says not checked, and the item is marked `?`, not `✓`."""
    model = AutoModelForCausalLM.from_pretrained(tiny_llama).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "gguf").mkdir()
    write_gguf(model, tokenizer, tmp_path / "gguf" / "model.gguf", "f32")
    (tmp_path / "verify").mkdir()
    sample = {"row": ROW, "prediction": {"id": "r1", "output": "{}"}}
    (tmp_path / "verify" / "sample.jsonl").write_text(json.dumps(sample) + "\n")

    def reproduced(bundle, info, loaded, device):
        return {"passed": True, "differ": []}

    found = check_gguf(tmp_path, _info(tiny_llama), "cpu", reproduced, item)
    assert found["passed"] is None and found["agreed"] == found["n"] == 1  # not checked: no pass
    assert (
        "llama.cpp: not checked: llama.cpp runtime not built (make gguf-runtime)"
        in (found["detail"])
    )
    assert found["not_checked"].startswith("llama.cpp runtime not built")
    assert found["llama_cpp"]["checked"] is False
    assert mark_of(found) == "[yellow]?[/]"


def test_a_scored_task_is_not_checked_by_generation(tiny_llama):
    info = _info(tiny_llama) | {
        "spec": extraction_spec(
            tiny_llama,
            task={"type": "classification"},
            hypothesis={"behaviour": "labels", "metric": "accuracy", "min_effect": 0.05},
            guardrails=[],
        ),
        "labels": ["a", "b"],
    }
    found = L.llama_cpp_answers(tiny_llama, info, [], tiny_llama / "x.gguf", "f16")
    assert not found["checked"] and "scored, not generated" in found["why"]


class FakeLlama:
    """What `_answer` uses of llama_cpp.Llama: a fixed continuation, detokenised by id."""

    def __init__(self, continuation: list[int]):
        self.continuation, self.resets = continuation, 0

    def reset(self):
        self.resets += 1

    def generate(self, prompt, **sampling):
        assert sampling["temp"] == 0.0 and sampling["top_k"] == 1
        yield from self.continuation

    def detokenize(self, ids, special=False):
        pieces = {1: b" {", 2: b"}", 9: b""}  # 9: a control token, empty unless special
        return b"".join(pieces[i] for i in ids)


@pytest.mark.parametrize(
    "continuation, max_new, text, ids",
    [
        ([1, 2, 9, 1, 1], 10, "{}", [1, 2, 9]),  # stops at the stop id, which is kept, not shown
        ([1, 2, 1, 2], 3, "{} {", [1, 2, 1]),  # at most max_new tokens
    ],
)
def test_answer_stops_as_generate_does(continuation, max_new, text, ids):
    llm = FakeLlama(continuation)
    assert L._answer(llm, [5, 6], {9}, max_new) == (text, ids)
    assert llm.resets == 1  # every prompt from an empty cache


@pytest.mark.parametrize(
    "device, dtype, written, share",
    [
        ("cpu", "float32", "f16", 1.0),  # the same weights, greedy: every answer
        ("cpu", "float32", "f32", 1.0),
        ("cpu", "float32", "q8_0", L.QUANTIZED_AGREE),
        ("cuda", "bfloat16", "f16", L.QUANTIZED_AGREE),  # evaluated elsewhere: not exact
    ],
)
def test_the_rule_is_exact_only_for_the_runs_own_numbers(tiny_llama, device, dtype, written, share):
    from tunelab.core.spec import validate_spec

    info = {"environment": {"device": {"type": device}}}
    spec = validate_spec(
        extraction_spec(tiny_llama) | {"model": {"path": str(tiny_llama), "dtype": dtype}}
    )
    assert L._rule(info, spec, written)[0] == share
    agreed = {"checked": True, "agreed": 15, "n": 16, "min_agree": share}
    assert L.passes(agreed) == (share < 1.0)


def test_a_file_llama_cpp_cannot_load_is_not_checked_with_its_error(tiny_llama, tmp_path):
    pytest.importorskip("llama_cpp", reason="llama.cpp runtime not built (make gguf-runtime)")
    broken = tmp_path / "model.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))  # a header and nothing after it
    sample = [{"row": ROW, "prediction": {"id": "r1", "output": "{}"}}]
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, broken, "f16")
    assert not found["checked"] and not L.passes(found)
    assert found["why"].startswith("model.gguf does not load in llama.cpp (llama-cpp-python")
    assert "gguf_init" in found["why"]  # llama.cpp's own error line, kept


@pytest.fixture
def fake_llama_cpp(monkeypatch):
    """`import llama_cpp` finds a stand-in: `_in_child`, patched per test, does the rest."""
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(__version__="9.9.9"))


def _outcomes(monkeypatch, *outcomes):
    """`_in_child` answers with these outcomes in turn and records its `extra_bufts`."""
    asked, queue = [], list(outcomes)

    def in_child(path, prompts, texts, stop, max_new, extra_bufts):
        asked.append(extra_bufts)
        return queue.pop(0)

    monkeypatch.setattr(L, "_in_child", in_child)
    return asked


def test_a_crash_with_the_default_kernels_is_said_and_the_sample_answered_without_them(
    fake_llama_cpp, monkeypatch, tiny_llama
):
    sample = [{"row": ROW, "prediction": {"id": "r1", "output": "{}"}}]
    crashed, answered = ("crashed", "crashed (SIGSEGV)"), ("answered", [("{}", [7, 2])], [[]])
    asked = _outcomes(monkeypatch, crashed, answered)
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, tiny_llama / "x", "q8_0")
    assert asked == [True, False]  # the default first, then extra buffer types off
    assert found["checked"] and found["agreed"] == found["n"] == 1
    assert found["kernels"] == "extra buffer types off: the default crashed (SIGSEGV) on this CPU"
    assert L.describe(found).endswith(f"; kernels: {found['kernels']}")


def test_a_crash_both_ways_is_not_checked_and_the_default_kernels_say_nothing(
    fake_llama_cpp, monkeypatch, tiny_llama
):
    sample = [{"row": ROW, "prediction": {"id": "r1", "output": "{}"}}]
    crashed = ("crashed", "crashed (SIGSEGV)")
    _outcomes(monkeypatch, crashed, ("crashed", "crashed (SIGABRT)"))
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, tiny_llama / "x", "q8_0")
    assert not found["checked"] and not L.passes(found)
    assert found["why"] == (
        "llama.cpp (llama-cpp-python 9.9.9) crashed (SIGSEGV) answering from x, and "
        "crashed (SIGABRT) again with its extra buffer types off"
    )
    asked = _outcomes(monkeypatch, ("answered", [("{}", [7, 2])], [[]]))
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, tiny_llama / "x", "f16")
    assert asked == [True] and found["kernels"] == "default"
    assert "kernels" not in L.describe(found)


def test_prompts_llama_cpp_tokenises_otherwise_from_text_are_named_not_judged(
    fake_llama_cpp, monkeypatch, tiny_llama
):
    sample = [{"row": ROW, "prediction": {"id": "r1", "output": "{}"}}]
    _outcomes(monkeypatch, ("answered", [("{}", [7, 2])], [[5, 6]]))
    found = L.llama_cpp_answers(tiny_llama, _info(tiny_llama), sample, tiny_llama / "x", "f16")
    assert found["prompt_text"] == {"same": 0, "n": 1, "differ": ["r1"]}
    assert L.passes(found)  # the answers, from the trained ids, are what is judged
    assert L.describe(found).endswith(
        "; sent as text, 0 of 1 prompts tokenise in llama.cpp to the ids trained on "
        "(differ: ['r1'])"
    )


def test_a_prompt_llama_cpp_cannot_tokenise_is_a_difference_not_a_crash():
    class Refusing:
        def tokenize(self, text, add_bos, special):
            raise RuntimeError("Failed to tokenize")

    assert L._tokenize(Refusing(), "x") is None
    sample = [{"row": ROW, "prediction": {}}]
    assert L._as_text(sample, [[5, 6]], [None])["differ"] == ["r1"]
