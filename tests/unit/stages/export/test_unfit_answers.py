"""A validation row whose answer leaves no room for any input at `model.max_length` (training
rejects it) used to stop `export` ("target of 115 tokens and template of 56 leave no room..."):
the bundle's truncation count counts it as cut, and the merge check compares its prompt."""

from __future__ import annotations

from transformers import AutoTokenizer

from conftest import extraction_spec, page_rows
from tunelab.core.spec import validate_spec
from tunelab.modeling.render import make_renderer
from tunelab.stages.export.merge import _rendered
from tunelab.stages.export.truncation import input_cut as _input_cut


def test_an_answer_that_fills_max_length_counts_as_cut_and_merges_on_its_prompt(tiny_llama):
    spec = validate_spec(extraction_spec(tiny_llama))
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    short, long = ({**row, "id": f"r{i}"} for i, row in enumerate(page_rows(2)))
    long["target"] = {**long["target"], "summary": "word " * 400}
    renderer = make_renderer(spec, tokenizer, [], tiny_llama)
    assert renderer.render(short).text_cut == 0
    assert (_input_cut(renderer, short), _input_cut(renderer, long)) == (False, True)
    assert _rendered(renderer, short) == renderer.render(short)
    prompt = _rendered(renderer, long)
    assert prompt == renderer.render(long, with_target=False) and prompt.loss_tokens == 0
