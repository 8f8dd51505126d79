"""Classification by a causal LM: prefix-shared label scoring equals scoring each full sequence."""

import inspect

import pytest
import torch
from make_tiny import build_tiny_gpt2
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2LMHeadModel, LlamaForCausalLM

from tunelab.core.sections import ClassificationTask
from tunelab.modeling.render import Renderer, make_template
from tunelab.training.evaluate import CACHE, label_scores

LABELS = ["business", "sport", "tech news"]  # labels of different token lengths


@pytest.mark.parametrize("model_class", [LlamaForCausalLM, GPT2LMHeadModel])
def test_the_cache_goes_by_the_name_the_installed_forward_takes(model_class):
    """transformers 5.24 renamed `past_key_values` to `cache`, and its warning says the old
    name goes in 5.40: scoring must hand the prompt's cache over by the name the forward takes."""
    assert CACHE in inspect.signature(model_class.forward).parameters


# a deprecated argument of transformers' warns with a FutureWarning: none may come from scoring
@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("base", ["llama", "gpt2"])
def test_cached_scores_equal_full_sequence_log_likelihoods(base, tiny_llama, tmp_path):
    """The llama's chat template ends an answer with `<|im_end|>` (id 2); the GPT-2's plain
    one with its EOS, id 0, which the scoring once took for no end token at all."""
    path = tiny_llama if base == "llama" else build_tiny_gpt2(tmp_path / "gpt2")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    template = make_template(tok, "chat" if base == "llama" else "plain", "Which topic?")
    assert template.end_id == (2 if base == "llama" else 0)
    renderer = Renderer(tok, "causal", ClassificationTask(), None, LABELS, 128, template=template)
    rows = [
        {"id": str(i), "text": t, "label": "sport"}
        for i, t in enumerate(["the team won", "bank rates rose sharply today", "chip"])
    ]
    prompts = [renderer.render(r, with_target=False).prompt_ids for r in rows]
    cached = label_scores(model, renderer, prompts, batch_size=2, device=torch.device("cpu"))

    expected = torch.zeros_like(cached)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            for j, label in enumerate(LABELS):
                c = tok(label, add_special_tokens=False)["input_ids"] + [template.end_id]
                logp = torch.log_softmax(model(torch.tensor([p + c])).logits[0].float(), -1)
                expected[i, j] = sum(logp[len(p) - 1 + t, c[t]] for t in range(len(c)))
    torch.testing.assert_close(cached, expected, atol=1e-4, rtol=1e-4)
