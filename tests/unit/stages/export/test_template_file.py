"""A generative bundle's template.json says how a prompt was tokenised: its `prompt` filled
with the input and tokenised whole, after `bos_ids`, gives exactly the ids the run's renderer
fed the model."""

from __future__ import annotations

import json

import pytest

from conftest import extraction_spec
from tunelab.core.spec import validate_spec
from tunelab.modeling.render import make_renderer
from tunelab.stages.export.template_file import (
    CONVERSATION_TOKENS,
    PROMPT_TOKENS,
    template_record,
)

ROW = {"id": "r1", "text": "LS(1)\n\nNAME\n  ls - list directory contents", "target": {}}


@pytest.mark.parametrize("template", ["chat", "plain"])
def test_the_filled_prompt_tokenised_whole_is_the_rendered_prompt(
    tiny_llama, seam_tokenizer, template
):
    model = {"path": str(tiny_llama), "max_length": 192, "template": template}
    spec = validate_spec(extraction_spec(tiny_llama, model=model))
    tokenizer = seam_tokenizer  # where the text meets the template, tokens merge (conftest)
    found = json.loads(json.dumps(template_record(spec, tokenizer, {})))  # as written
    assert found["tokenisation"] == PROMPT_TOKENS
    filled = found["prompt"].replace(found["placeholder"], ROW["text"])
    ids = found["bos_ids"] + tokenizer(filled, add_special_tokens=False)["input_ids"]
    rendered = make_renderer(spec, tokenizer, [], tiny_llama).render(ROW, with_target=False)
    assert ids == rendered.prompt_ids


def test_a_generative_bundle_says_how_its_answers_were_decoded(tiny_llama, seam_tokenizer):
    spec = validate_spec(extraction_spec(tiny_llama))
    found = template_record(spec, seam_tokenizer, {})["decoding"]
    end = seam_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert found["strategy"] == "greedy" and found["max_new_tokens"] == 12
    assert found["stop_token_ids"] == sorted({end, seam_tokenizer.eos_token_id})


def test_a_conversation_labs_bundle_gives_the_chat_templates_recipe_not_a_prompt(
    tiny_llama, seam_tokenizer
):
    """A conversation lab never filled tunelab's prompt: its template.json names no prompt,
    placeholder or instruction, and its recipe (the turns before the answer rendered with the
    generation prompt, tokenised whole) gives the ids the renderer fed the model."""
    spec = extraction_spec(tiny_llama)
    spec["data"]["fields"] = {"id": "id", "messages": "messages"}
    spec = validate_spec(spec)
    found = json.loads(json.dumps(template_record(spec, seam_tokenizer, {})))
    assert found["conversation"] is True and found["tokenisation"] == CONVERSATION_TOKENS
    assert not {"prompt", "placeholder", "instruction", "bos_ids"} & set(found)
    assert found["decoding"]["stop_token_ids"]
    turns = [
        {"role": "user", "content": "What is a manual page?"},
        {"role": "assistant", "content": "\n\nA page of documentation."},
        {"role": "user", "content": "Index: " + ROW["text"]},
        {"role": "assistant", "content": '{"name": "ls"}'},
    ]
    served = seam_tokenizer.apply_chat_template(
        turns[:-1], tokenize=False, add_generation_prompt=True
    )
    ids = seam_tokenizer(served, add_special_tokens=False)["input_ids"]
    renderer = make_renderer(spec, seam_tokenizer, [], tiny_llama)
    rendered = renderer.render({"id": "c1", "messages": turns}, with_target=False)
    assert ids == rendered.prompt_ids
