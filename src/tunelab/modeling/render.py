"""Example -> tokens: the one place that decides what the model sees, for training and evaluation.

Classification encodes the text alone (`classifier_inputs`: truncated on the right to
`max_length`, the label as a class index); a generative task renders its prompt and target
with a loss mask; microbatches are padded dynamically to their longest member.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from tunelab.core.errors import TunelabError
from tunelab.modeling.classifier_inputs import encode_classification
from tunelab.modeling.loss_positions import IGNORE, target_index
from tunelab.modeling.template import Template, make_template
from tunelab.modeling.transfer import to_device


def pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id batches are padded with: the tokenizer's pad token, else its end-of-text token
    (GPT-2's and many decoders' tokenizers have no pad token; padding is masked either way)."""
    for token_id in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return token_id
    raise TunelabError(
        "the model's tokenizer has neither a pad token nor an end-of-text token, so batches "
        "cannot be padded; give it one (`tokenizer.pad_token = ...`, then `save_pretrained` "
        "into model.path)"
    )


# --- generative: prompt + target -> tokens with a loss mask ------------------------------------


@dataclass(frozen=True)
class Rendered:
    """One generative example as the trainer sees it."""

    id: str
    input_ids: list[int]
    loss_mask: list[int]
    """1 on the target tokens and the end-of-answer token, 0 on the prompt."""
    prompt_len: int
    text_cut: int
    """Tokens of the input text cut to fit max_length (0: nothing cut)."""
    target: object
    target_text: str
    category: str
    turns: tuple | None = None
    """A conversation's turns (`conversation.Turn`: role, token span, loss), else None."""
    turns_cut: int = 0
    """A conversation's oldest turns dropped to fit max_length (`text_cut` counts their
    tokens)."""
    cut_at: int | None = None
    """Where the input text was cut, as an index into input_ids (None: nothing cut, or a
    conversation)."""

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask[1:])  # position 0 is never predicted (`teaches`)

    @property
    def teaches(self) -> bool:
        """A loss token the model is trained to predict: position 0 never is (nothing comes
        before it), so a mask on it alone teaches nothing."""
        return any(self.loss_mask[1:])

    @property
    def prompt_ids(self) -> list[int]:
        return self.input_ids[: self.prompt_len]


def render_example(
    tokenizer: PreTrainedTokenizerBase,
    template: Template,
    example: dict,
    target_text: str,
    max_length: int,
    truncation: str = "right",
    with_target: bool = True,
    loss_on_prompt: bool = False,
) -> Rendered:
    """Prompt (the template filled with the input text, tokenised whole, the text cut to fit)
    then the target and end token (`Template.fill`).

    The target is never cut: when it cannot fit whole, a ValueError says so and the caller
    rejects the example with that reason.
    """
    end = [] if template.end_id is None else [template.end_id]
    target = (
        tokenizer(target_text, add_special_tokens=False)["input_ids"] + end if with_target else []
    )
    room = max_length - len(target)
    if room - len(template.prefix) - len(template.suffix) < 1:
        raise TunelabError(
            f"target of {len(target)} tokens and template of "
            f"{len(template.prefix) + len(template.suffix)} leave no room for the input in "
            f"model.max_length={max_length}"
        )
    prompt = template.fill(tokenizer, example["text"], room, truncation)
    return Rendered(
        id=example["id"],
        input_ids=prompt.ids + target,
        loss_mask=[int(loss_on_prompt)] * len(prompt.ids) + [1] * len(target),
        prompt_len=len(prompt.ids),
        text_cut=prompt.cut,
        target=example.get("target"),
        target_text=target_text,
        category=example.get("label") or "",
        cut_at=prompt.cut_at,
    )


def collate_causal(
    batch: list[Rendered], pad_id: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """Right-padded training batch; labels are IGNORE off the loss mask and on padding, so the
    padding never hides the end token even when the pad token equals EOS. With them, where the
    targets are (`loss_positions.target_index`)."""
    width = max(len(e.input_ids) for e in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    for row, e in enumerate(batch):
        n = len(e.input_ids)
        ids = torch.tensor(e.input_ids)
        input_ids[row, :n] = ids
        attention[row, :n] = 1
        mask = torch.tensor(e.loss_mask, dtype=torch.bool)
        labels[row, :n] = torch.where(mask, ids, torch.tensor(IGNORE))
    out = {"input_ids": input_ids, "attention_mask": attention, "labels": labels}
    return to_device(out | target_index(labels), device)


def collate_causal_packed(batch: list[Rendered], device: torch.device) -> dict[str, torch.Tensor]:
    """A microbatch as one padding-free row (`training.packing`): the examples end to end,
    position ids restarting at 0 at each, so transformers masks attention block-diagonally
    (`training.step.forward`); labels as in `collate_causal`, and each example's first token
    never a target (what precedes it belongs to another example)."""
    ids, labels, positions = [], [], []
    for e in batch:
        ids.extend(e.input_ids)
        labels.append(IGNORE)
        labels.extend(
            t if m else IGNORE for t, m in zip(e.input_ids[1:], e.loss_mask[1:], strict=True)
        )
        positions.extend(range(len(e.input_ids)))
    row = torch.tensor([ids], dtype=torch.long)
    out = {
        "input_ids": row,
        "attention_mask": torch.ones_like(row),  # counts tokens; not given the model
        "labels": torch.tensor([labels], dtype=torch.long),
        "position_ids": torch.tensor([positions], dtype=torch.long),
    }
    return to_device(out | target_index(out["labels"]), device)


def collate_prompts(
    prompts: list[list[int]], pad_id: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """Left-padded prompts for batched generation: every prompt ends where generation starts."""
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        input_ids[row, width - len(p) :] = torch.tensor(p)
        attention[row, width - len(p) :] = 1
    return to_device({"input_ids": input_ids, "attention_mask": attention}, device)


# --- one lab's renderer: the same code for training, evaluation and inspection ----------------


@dataclass
class Renderer:
    """Renders this lab's rows for its model kind and task."""

    tokenizer: PreTrainedTokenizerBase
    kind: str
    """encoder or causal (see `Spec.model_kind`)."""
    task: object
    schema: dict | None
    labels: list[str]
    max_length: int
    truncation: str = "right"
    template: Template | None = None
    loss_on_prompt: bool = False
    last_turn_only: bool = False
    """Conversations: the loss on the last assistant turn only (`model.loss_on_turns`)."""
    pack_length: int | None = None
    """Task pretrain: tokens per packed training sequence (evaluation windows stay
    `max_length`, so a packing change leaves the protocol as it is)."""

    @property
    def pad_id(self) -> int:
        return pad_id(self.tokenizer)

    def training(self, rows: list[dict]) -> tuple[list, list[dict]]:
        """Training inputs, and the rows that cannot be trained on with the reason (task
        pretrain: the documents packed into sequences, `modeling.packing`)."""
        if self.task.type == "pretrain":
            from tunelab.modeling.packing import pack

            packed = pack(self.tokenizer, rows, self.pack_length, self.task.boundaries, self.pad_id)
            return packed, []
        if self.kind == "encoder":
            return encode_classification(self.tokenizer, rows, self.labels, self.max_length), []
        out, rejected = [], []
        for row in rows:
            try:
                out.append(self.render(row))
            except ValueError as err:
                kind = getattr(err, "kind", "target_truncated")
                rejected.append({"id": row["id"], "reason": str(err), "kind": kind})
        return out, rejected

    def require_prompts(self, rows: list[dict], split: str) -> None:
        """Refuse, naming the rows, when the chat template cannot render the prompt of a
        conversation of `split` (a role it does not print, a turn it refuses): evaluation
        would stop there, after a baseline's model had loaded or a run had trained."""
        from tunelab.modeling.conversation import TurnError
        from tunelab.tasks.targets import row_name

        bad, kinds = [], set()
        for row in rows:
            if row.get("messages") is None:
                continue
            try:
                self.render(row, with_target=False)
            except TurnError as err:
                bad.append(f"{row_name(row)}: {err}")
                kinds.add(err.kind)
        if bad:
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            length = kinds <= {"answer_cannot_fit"}  # the length says its own fix
            why = (
                "do not fit model.max_length"
                if length
                else "cannot be rendered by the model's chat template"
            )
            raise TunelabError(
                f"{len(bad)} {split} conversation(s) {why}, so they cannot be evaluated: "
                f"{'; '.join(bad[:3])}{more}." + ("" if length else f" {ROLES_FIX}")
            )

    def render(self, row: dict, with_target: bool = True) -> Rendered:
        from tunelab.tasks import target_text

        if row.get("messages") is not None:
            return self._conversation(row, with_target)
        return render_example(
            self.tokenizer,
            self.template,
            row,
            target_text(self.task, self.schema, row),
            self.max_length,
            self.truncation,
            with_target,
            self.loss_on_prompt and with_target,
        )

    def _conversation(self, row: dict, with_target: bool) -> Rendered:
        from tunelab.modeling.conversation import render_conversation

        c = render_conversation(
            self.tokenizer,
            row["messages"],
            self.max_length,
            self.template.end_id,
            self.last_turn_only,
            with_target,
        )
        return Rendered(
            id=row["id"],
            input_ids=c.input_ids,
            loss_mask=c.loss_mask,
            prompt_len=c.prompt_len,
            text_cut=c.tokens_cut,
            target=row.get("target"),
            target_text=row["messages"][-1]["content"],
            category=row.get("label") or "",
            turns=c.turns,
            turns_cut=c.turns_cut,
        )


ROLES_FIX = (
    "Map their roles to ones the template prints (`tunelab inspect` shows each turn), or use a "
    "model whose template knows them, and run `tunelab data` again."
)


def make_renderer(spec, tokenizer: PreTrainedTokenizerBase, labels: list[str], lab) -> Renderer:
    from tunelab.tasks import load_schema
    from tunelab.tasks.pretrain import sequence_length

    template = None
    if spec.prompted:
        template = make_template(tokenizer, spec.model.template, spec.task.instruction)
    return Renderer(
        tokenizer=tokenizer,
        kind=spec.model_kind,
        task=spec.task,
        schema=load_schema(spec.task, lab),
        labels=labels,
        max_length=spec.model.max_length,
        truncation=spec.model.truncation,
        template=template,
        loss_on_prompt=spec.model.loss_on_prompt,
        last_turn_only=spec.model.loss_on_turns == "last",
        pack_length=sequence_length(spec) if spec.task.type == "pretrain" else None,
    )


def lab_renderer(spec, lab, labels: list[str], version: str | None = None, root=None):
    """The renderer of a lab's rows with the base's own inputs: its tokenizer (a scratch
    model's: the BPE of `version`), or, for an image lab, its image processor, with the images
    under `root` (by default `version`'s folder in the lab's store)."""
    from tunelab.modeling.model import load_tokenizer

    if spec.images:
        from tunelab.core.layout import DATA
        from tunelab.core.store import STORE_DIR
        from tunelab.modeling.image_model import load_processor
        from tunelab.modeling.pixels import ImageRenderer

        if root is None:
            root = lab / STORE_DIR / DATA / version
        processor, limit = load_processor(spec.model, lab), spec.data.images.max_pixels
        return ImageRenderer(processor, spec.task, labels, root, max_pixels=limit)
    return make_renderer(spec, load_tokenizer(spec.model, lab, version), labels, lab)
