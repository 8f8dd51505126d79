"""Conversations as the trainer sees them: the loss on the assistant's answers only (all or the
last), the evaluation prompt before the final answer, the oldest turns dropped first, and the
templates that cannot be masked turn by turn refused with the reason."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tunelab.modeling.conversation import TurnError, render_conversation
from tunelab.modeling.template import end_of_answer

TURNS = [
    {"role": "system", "content": "You index manual pages."},
    {"role": "user", "content": "What is a manual page?"},
    {"role": "assistant", "content": "A page of documentation."},
    {"role": "user", "content": "Name the page: LS(1) ls - list directory contents"},
    {"role": "assistant", "content": '{"name": "ls"}'},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_llama):
    return AutoTokenizer.from_pretrained(tiny_llama)


def trained_text(tokenizer, c) -> list[str]:
    """The trained tokens, decoded run by run."""
    runs, current = [], []
    for token, m in zip(c.input_ids, c.loss_mask, strict=True):
        if m:
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    return runs + ([tokenizer.decode(current)] if current else [])


def test_every_assistant_answer_and_its_end_token_carry_the_loss_and_nothing_else(tokenizer):
    end = end_of_answer(tokenizer, "chat")
    c = render_conversation(tokenizer, TURNS, 512, end)
    assert trained_text(tokenizer, c) == [
        "A page of documentation.<|im_end|>",
        '{"name": "ls"}<|im_end|>',
    ]
    assert [t.role for t in c.turns] == ["system", "user", "assistant", "user", "assistant"]
    assert [t.loss for t in c.turns] == [False, False, True, False, True]
    assert tokenizer.decode(c.input_ids) == tokenizer.apply_chat_template(TURNS, tokenize=False)


def test_the_last_answer_only_when_asked(tokenizer):
    c = render_conversation(tokenizer, TURNS, 512, end_of_answer(tokenizer, "chat"), last_only=True)
    assert trained_text(tokenizer, c) == ['{"name": "ls"}<|im_end|>']


def test_an_answer_weighed_0_stays_in_the_conversation_without_its_loss(tokenizer):
    """OpenAI's fine-tuning format: `weight: 0` on an assistant turn takes the loss off it; the
    tokens are the conversation's as the template renders it, the weight unseen."""
    end = end_of_answer(tokenizer, "chat")
    plain = render_conversation(tokenizer, TURNS, 512, end)
    earlier = [*TURNS[:2], {**TURNS[2], "weight": 0}, *TURNS[3:]]
    c = render_conversation(tokenizer, earlier, 512, end)
    assert c.input_ids == plain.input_ids and c.prompt_len == plain.prompt_len
    assert trained_text(tokenizer, c) == ['{"name": "ls"}<|im_end|>']
    assert [t.loss for t in c.turns] == [False, False, False, False, True]
    final = [*TURNS[:-1], {**TURNS[-1], "weight": 0}]
    c = render_conversation(tokenizer, final, 512, end)
    assert trained_text(tokenizer, c) == ["A page of documentation.<|im_end|>"]
    assert not c.turns[-1].loss
    prompt = render_conversation(tokenizer, final, 512, end, with_target=False)
    assert prompt.input_ids == plain.input_ids[: plain.prompt_len]  # evaluation as before


def test_evaluation_generates_the_final_answer_from_the_turns_before_it(tokenizer):
    end = end_of_answer(tokenizer, "chat")
    prompt = render_conversation(tokenizer, TURNS, 512, end, with_target=False)
    expected = tokenizer.apply_chat_template(TURNS[:-1], tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(prompt.input_ids) == expected
    trained = render_conversation(tokenizer, TURNS, 512, end)
    assert trained.input_ids[: trained.prompt_len] == prompt.input_ids


def test_the_oldest_turns_go_first_whole_and_the_final_answer_never(tokenizer):
    end = end_of_answer(tokenizer, "chat")
    whole = render_conversation(tokenizer, TURNS, 512, end)
    c = render_conversation(tokenizer, TURNS, len(whole.input_ids) - 1, end)
    assert c.turns_cut == 2 and [t.role for t in c.turns] == ["system", "user", "assistant"]
    assert c.tokens_cut == len(whole.input_ids) - len(c.input_ids)
    assert trained_text(tokenizer, c) == ['{"name": "ls"}<|im_end|>']
    with pytest.raises(TurnError, match="final exchange needs") as err:
        render_conversation(tokenizer, TURNS, len(c.input_ids) - 1, end)
    assert err.value.kind == "answer_cannot_fit"


def test_a_role_the_template_leaves_out_is_refused_naming_it(tokenizer):
    only_known = (
        "{% for m in messages %}{% if m['role'] in ['user', 'assistant'] %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}"
    )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = only_known
    turns = [{"role": "tool", "content": "ls output"}, *TURNS[1:]]
    with pytest.raises(TurnError, match="role 'tool'") as err:
        render_conversation(tokenizer, turns, 512, end_of_answer(tokenizer, "chat"))
    assert err.value.kind == "unknown_role"


def test_a_template_s_own_refusal_is_a_finding_and_any_other_error_goes_on(tokenizer, monkeypatch):
    """Any exception at all was taken for the template refusing the turns (`unknown_role`),
    a bug in the rendering included."""
    end = end_of_answer(tokenizer, "chat")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = "{{ raise_exception('Conversation roles must alternate') }}"
    with pytest.raises(TurnError, match="roles must alternate") as err:
        render_conversation(tokenizer, TURNS, 512, end)
    assert err.value.kind == "unknown_role"

    def broken(*args, **kwargs):
        raise KeyError("content")

    monkeypatch.setattr(type(tokenizer), "apply_chat_template", broken)
    with pytest.raises(KeyError):
        render_conversation(tokenizer, TURNS, 512, end)


def test_a_template_that_rewrites_earlier_turns_is_refused(tokenizer):
    counting = (
        "turns: {{ messages | length }}\\n{% for m in messages %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}"
    )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = counting
    with pytest.raises(TurnError, match="growing prefix") as err:
        render_conversation(tokenizer, TURNS, 512, end_of_answer(tokenizer, "chat"))
    assert err.value.kind == "template_rewrites"


SEAM = [  # an earlier answer that begins with blank lines: its header's newline merges into them
    {"role": "user", "content": "What is a manual page?"},
    {"role": "assistant", "content": "\n\nA page of documentation."},
    {"role": "user", "content": "Name the page: LS(1) ls - list directory contents"},
    {"role": "assistant", "content": '{"name": "ls"}'},
]


def test_the_prompt_is_the_rendered_conversation_tokenised_whole(seam_tokenizer):
    """What a server sends the model for the final answer: the turns before it, rendered with
    the generation prompt and tokenised as one string; tokenised turn by turn, the earlier
    answer's first newline would be a token of its own."""
    tok, end = seam_tokenizer, end_of_answer(seam_tokenizer, "chat")
    served = tok.apply_chat_template(SEAM[:-1], tokenize=False, add_generation_prompt=True)
    served_ids = tok(served, add_special_tokens=False)["input_ids"]
    prompt = render_conversation(tok, SEAM, 512, end, with_target=False)
    assert prompt.input_ids == served_ids
    trained = render_conversation(tok, SEAM, 512, end)
    assert trained.input_ids[: trained.prompt_len] == served_ids
    answer = tok(SEAM[-1]["content"], add_special_tokens=False)["input_ids"]
    assert trained.input_ids[trained.prompt_len :][: len(answer)] == answer  # generated apart
    # the earlier answer still carries the loss, from the token after the merged newlines
    assert trained_text(tok, trained) == [
        "\nA page of documentation.<|im_end|>",
        '{"name": "ls"}<|im_end|>',
    ]
    ours = [(t.role, t.loss) for t in trained.turns]
    assert ours == [("user", False), ("assistant", True), ("user", False), ("assistant", True)]
