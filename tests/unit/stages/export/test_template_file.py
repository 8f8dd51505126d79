"""A generative bundle's template.json holds the prompt's token ids as trained: the input's own
tokens between them are exactly the ids the run's renderer fed the model."""

from __future__ import annotations

import json

from transformers import AutoTokenizer

from conftest import extraction_spec
from tunelab.core.spec import validate_spec
from tunelab.modeling.render import make_renderer
from tunelab.stages.export.template_file import PROMPT_TOKENS, template_record

ROW = {"id": "r1", "text": "LS(1)\n\nNAME\n  ls - list directory contents", "target": {}}


def test_the_prompt_ids_around_the_text_are_the_rendered_prompt(tiny_llama):
    spec = validate_spec(extraction_spec(tiny_llama))
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    found = json.loads(json.dumps(template_record(spec, tokenizer, {})))  # as written
    assert found["tokenisation"] == PROMPT_TOKENS
    text = tokenizer(ROW["text"], add_special_tokens=False)["input_ids"]
    ids = found["prompt_ids"]["before"] + text + found["prompt_ids"]["after"]
    rendered = make_renderer(spec, tokenizer, [], tiny_llama).render(ROW, with_target=False)
    assert ids == rendered.prompt_ids
    # the text form it stands beside: the same prompt once the input fills the placeholder
    filled = found["prompt"].replace(found["placeholder"], ROW["text"])
    assert tokenizer.decode(ids) == filled
