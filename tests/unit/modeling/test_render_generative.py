"""The loss mask covers exactly the target and the end token; truncation never cuts the target;
a prompt is the filled template tokenised whole, as a server tokenises it."""

import pytest
import torch
from transformers import AutoTokenizer

from tunelab.modeling.render import (
    collate_causal,
    collate_prompts,
    make_template,
    render_example,
)
from tunelab.modeling.template import RenderError

EXAMPLE = {"id": "ls.1", "text": "NAME ls - list directory contents", "label": "1"}
TARGET = '{"name": "ls", "section": "1"}'


@pytest.fixture(scope="module")
def tok(tiny_llama):
    return AutoTokenizer.from_pretrained(tiny_llama)


@pytest.mark.parametrize("kind", ["plain", "chat"])
def test_loss_mask_is_exactly_target_and_end_token(tok, kind):
    template = make_template(tok, kind, "Extract the fields.")
    r = render_example(tok, template, EXAMPLE, TARGET, max_length=128)
    target_ids = tok(TARGET, add_special_tokens=False)["input_ids"]
    masked = [t for t, m in zip(r.input_ids, r.loss_mask, strict=True) if m]
    assert masked == [*target_ids, template.end_id]
    assert r.loss_mask == [0] * r.prompt_len + [1] * (len(target_ids) + 1)
    assert r.input_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")
    assert r.text_cut == 0


def test_chat_template_wraps_the_prompt_and_ends_with_end_of_turn(tok):
    template = make_template(tok, "chat", "Extract.")
    prompt = tok.decode(render_example(tok, template, EXAMPLE, TARGET, 128).prompt_ids)
    assert prompt.startswith("<|im_start|>user\nExtract.")
    assert prompt.endswith("<|im_start|>assistant\n")
    assert template.end_id == tok.convert_tokens_to_ids("<|im_end|>")


def test_chat_template_missing_is_an_error(tok):
    bare = AutoTokenizer.from_pretrained(tok.name_or_path)
    bare.chat_template = None
    with pytest.raises(RenderError, match="template: plain"):
        make_template(bare, "chat", "x")


@pytest.mark.parametrize("cut", ["user", "assistant"])
def test_a_chat_template_that_cuts_a_message_is_named_not_crashed_on(tok, cut):
    """A template writing `message['content'][:3]` for one role gave an internal IndexError
    (inspect exited 1) and check called it a bug of tunelab's."""
    chopped = AutoTokenizer.from_pretrained(tok.name_or_path)
    chopped.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        f"{{% if m['role'] == '{cut}' %}}{{{{ m['content'][:3] }}}}"
        "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    said = "the user's message" if cut == "user" else "the assistant's answer"
    with pytest.raises(RenderError, match=f"does not write {said} as it is given.*template: plain"):
        make_template(chopped, "chat", "Extract.")


@pytest.mark.parametrize("side", ["right", "left"])
def test_truncation_cuts_the_input_text_never_the_target(tok, side):
    template = make_template(tok, "plain", "Extract.")
    long = {**EXAMPLE, "text": "word " * 200 + "NAME ls - list"}
    r = render_example(tok, template, long, TARGET, max_length=64, truncation=side)
    assert 60 <= len(r.input_ids) <= 64 and r.text_cut > 0
    target_ids = tok(TARGET, add_special_tokens=False)["input_ids"]
    assert r.input_ids[-len(target_ids) - 1 : -1] == target_ids
    assert r.input_ids[r.prompt_len - len(template.suffix) : r.prompt_len] == template.suffix
    text = tok.decode(r.input_ids[len(template.prefix) : r.prompt_len - len(template.suffix)])
    assert ("NAME ls" in text) == (side == "left")
    # the cut is marked where the text kept meets the template
    seam = r.prompt_len - len(template.suffix) if side == "right" else len(template.prefix)
    assert r.cut_at == seam


def _whole(tok, template, text: str) -> list[int]:
    filled = template.text[0] + text + template.text[1]
    return [*template.bos, *tok(filled, add_special_tokens=False)["input_ids"]]


@pytest.mark.parametrize("kind", ["plain", "chat"])
@pytest.mark.parametrize("text", [EXAMPLE["text"], "\n\nNAME ls", " ls - list\n", "ls\n\n"])
def test_the_prompt_is_the_filled_template_tokenised_whole(seam_tokenizer, kind, text):
    template = make_template(seam_tokenizer, kind, "Extract.")
    r = render_example(seam_tokenizer, template, {**EXAMPLE, "text": text}, TARGET, max_length=128)
    assert r.prompt_ids == _whole(seam_tokenizer, template, text)
    assert r.text_cut == 0 and r.cut_at is None


def test_the_seam_a_server_sees_is_the_one_trained_on(seam_tokenizer):
    """Tokenised apart, the chat prompt's `\n\n` before the page is one token; a server that
    tokenises the filled template gets two, and so does training."""
    template = make_template(seam_tokenizer, "chat", "Extract.")
    assert template.prefix[-1] == seam_tokenizer.convert_tokens_to_ids("ĊĊ")
    r = render_example(seam_tokenizer, template, EXAMPLE, TARGET, max_length=128)
    apart = template.prefix + seam_tokenizer(EXAMPLE["text"])["input_ids"] + template.suffix
    assert r.prompt_ids != apart
    assert len(r.prompt_ids) == len(apart) + 1


@pytest.mark.parametrize("side", ["right", "left"])
def test_a_cut_prompt_is_tokenised_whole_and_fits(seam_tokenizer, side):
    template = make_template(seam_tokenizer, "chat", "Extract.")
    long = {**EXAMPLE, "text": "word " * 200 + "NAME ls - list"}
    r = render_example(seam_tokenizer, template, long, TARGET, max_length=64, truncation=side)
    assert len(r.input_ids) <= 64 and r.text_cut > 0
    before, after = template.text
    prompt = seam_tokenizer.decode(r.prompt_ids)
    assert prompt.startswith(before) and prompt.endswith(after)
    kept = prompt[len(before) : len(prompt) - len(after)]
    assert long["text"].startswith(kept) if side == "right" else long["text"].endswith(kept)
    assert r.prompt_ids == _whole(seam_tokenizer, template, kept)


def test_a_target_that_cannot_fit_is_refused_with_a_reason(tok):
    template = make_template(tok, "plain", "Extract.")
    with pytest.raises(ValueError, match="no room for the input"):
        render_example(tok, template, EXAMPLE, TARGET * 20, max_length=32)


def test_padding_never_hides_the_end_token_even_when_pad_is_eos(tok):
    assert tok.pad_token_id == tok.eos_token_id  # the trap this guards against
    template = make_template(tok, "chat", "x")
    short = render_example(tok, template, EXAMPLE, '{"a": 1}', 128)
    longer = render_example(tok, template, EXAMPLE, TARGET, 128)
    batch = collate_causal([short, longer], tok.pad_token_id, torch.device("cpu"))
    labels = batch["labels"][0]
    n = len(short.input_ids)
    assert labels[n - 1].item() == template.end_id  # the real EOS is trained
    assert (labels[n:] == -100).all()  # the padding after it is not
    assert (labels[: short.prompt_len] == -100).all()


def test_prompts_are_left_padded_for_generation(tok):
    batch = collate_prompts([[5, 6, 7], [8]], pad_id=0, device=torch.device("cpu"))
    assert batch["input_ids"].tolist() == [[5, 6, 7], [0, 0, 8]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]


def test_a_plain_prompt_starts_with_the_bos_its_tokenizer_adds(tiny_llama):
    """A plain template has no BOS in its text: it goes before the whole string, as a server's
    tokenizer adds it, and template.bos says so."""
    bos_adding = AutoTokenizer.from_pretrained(tiny_llama)
    bos_adding.add_bos_token = True
    template = make_template(bos_adding, "plain", "Extract.")
    assert template.bos == (bos_adding.bos_token_id,)
    long = {**EXAMPLE, "text": "word " * 200}
    for example, cut in ((EXAMPLE, False), (long, True)):
        r = render_example(bos_adding, template, example, TARGET, max_length=64)
        assert r.prompt_ids[0] == bos_adding.bos_token_id and (r.text_cut > 0) == cut
        kept = template.input_of(bos_adding, r.prompt_ids)
        assert r.prompt_ids == _whole(bos_adding, template, kept)


def test_a_bos_its_post_processor_adds_is_kept_where_add_bos_token_says_false():
    """OPT's, Mistral's and Gemma's tokenizer.json put BOS in front of every text, and
    transformers 5 reports `add_bos_token` False for them: plain prompts had lost it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, "x": 3, "Extract.": 4}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    raw.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    assert not getattr(tok, "add_bos_token", False) and tok("x")["input_ids"] == [0, 3]
    assert make_template(tok, "plain", "Extract.").bos == (0,)
    raw.post_processor = None  # a tokenizer that adds nothing: no BOS made up
    bare = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    assert make_template(bare, "plain", "Extract.").bos == ()


def test_a_turn_token_marked_special_only_in_tokenizer_json_ends_the_answer():
    """The chat template closes an assistant turn with `<end_of_turn>`, special in
    tokenizer.json but not named among the tokenizer's special tokens: answers were trained
    to end with EOS instead."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, "q": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    raw.add_special_tokens([AddedToken("<end_of_turn>", special=True)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }} {{ m['content'] }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}model {% endif %}"
    )
    turn = tok.convert_tokens_to_ids("<end_of_turn>")
    assert turn not in tok.all_special_ids  # named nowhere but in tokenizer.json
    assert make_template(tok, "chat", "Extract.").end_id == turn


@pytest.mark.parametrize("on_prompt", [False, True])
def test_an_example_weighs_as_many_tokens_as_its_loss_covers(tok, on_prompt):
    """With `loss_on_prompt` the mask covers position 0, which nothing predicts: the step had
    divided by one token more than the loss summed (34 for 33)."""
    from tunelab.training.step import loss_weight, make_batch

    template = make_template(tok, "chat", "Extract.")
    r = render_example(tok, template, EXAMPLE, TARGET, 128, loss_on_prompt=on_prompt)
    batch = make_batch([r], tok.pad_token_id or 0, torch.device("cpu"))
    assert loss_weight(r) == int((batch["labels"][:, 1:] != -100).sum())
    assert loss_weight(r) == (len(r.input_ids) - 1 if on_prompt else sum(r.loss_mask))
