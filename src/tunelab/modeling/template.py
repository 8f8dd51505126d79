"""The prompt around an example's input text, as the model's template renders it: the
instruction and the input's place (a chat template's user turn, or a plain layout), split at
the input so the text alone can be cut to fit, and the token that ends an answer."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from tunelab.core.errors import TunelabError

PLACEHOLDER = "\x00INPUT\x00"
PLAIN_INPUT, PLAIN_ANSWER = "\n\n### Input:\n", "\n\n### Answer:\n"


class RenderError(TunelabError):
    """The template cannot render with this tokenizer (e.g. chat asked, none shipped)."""


@dataclass(frozen=True)
class Template:
    """The prompt around the input text, as token ids, and the token that ends an answer."""

    prefix: list[int]
    suffix: list[int]
    end_id: int | None
    kind: str
    text: tuple[str, str]
    """The prefix and suffix as text, for the inspect view."""


def make_template(tokenizer: PreTrainedTokenizerBase, kind: str, instruction: str) -> Template:
    """Split the rendered prompt at the input text, so the text alone can be cut to fit."""
    if kind == "chat":
        if not tokenizer.chat_template:
            raise RenderError(
                "model.template is `chat` but this tokenizer has no chat template; "
                "use `template: plain` or a model that ships one"
            )
        messages = [{"role": "user", "content": f"{instruction}\n\n{PLACEHOLDER}"}]
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        prefix, suffix = rendered.split(PLACEHOLDER)
        bos: list[int] = []
    else:
        prefix, suffix = instruction + PLAIN_INPUT, PLAIN_ANSWER
        bos = [tokenizer.bos_token_id] if getattr(tokenizer, "add_bos_token", False) else []

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    return Template(
        bos + ids(prefix), ids(suffix), end_of_answer(tokenizer, kind), kind, (prefix, suffix)
    )


def end_of_answer(tokenizer: PreTrainedTokenizerBase, kind: str) -> int | None:
    """The token the model must learn to emit after an answer: the chat template's
    end-of-turn token when there is one, else EOS; None when the tokenizer has neither
    (then nothing teaches the model to stop, and `tunelab inspect` blocks training)."""
    if kind == "chat":
        turn = [{"role": "user", "content": "q"}, {"role": "assistant", "content": PLACEHOLDER}]
        after = tokenizer.apply_chat_template(turn, tokenize=False).split(PLACEHOLDER, 1)[1]
        first = tokenizer(after, add_special_tokens=False)["input_ids"][:1]
        if first and first[0] in tokenizer.all_special_ids:
            return first[0]
    return tokenizer.eos_token_id
