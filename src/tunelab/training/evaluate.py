"""Predictions on a split under the shared protocol (same split, batch size, lengths, decoding).

Three ways to predict, one per model kind and task:
- an encoder classifier: the argmax of its head;
- a causal LM on a classification task: the label whose text has the highest log-likelihood
  after the prompt (scoring, no free generation);
- a causal LM on a generative task: batched greedy generation with the KV cache, prompts
  padded on the left, then the task's own scoring of the output.
Examples run in length order so each batch pads little; results come back in split order.
"""

from __future__ import annotations

import torch
import transformers
from packaging.version import Version

from tunelab.modeling.classifier_inputs import Encoded, classifier_batch, encode_classification
from tunelab.modeling.render import Renderer, collate_prompts
from tunelab.tasks import score, score_outputs

# The KV cache's name in a causal LM's forward and output: transformers 5.24 renamed
# `past_key_values` to `cache` and takes the old name only until 5.40, so the name follows the
# version installed (tunelab supports transformers from 5.5).
CACHE = "cache" if Version(transformers.__version__).release >= (5, 24) else "past_key_values"


def evaluate_rows(
    model: torch.nn.Module,
    renderer: Renderer,
    rows: list[dict],
    batch_size: int,
    max_new_tokens: int,
    device: torch.device,
    threshold: float | None = None,
    metric: str | None = None,
) -> tuple[list[dict], dict]:
    """Per-example predictions and the task's metrics: the one protocol every run shares.
    Task multilabel (`evaluate_multilabel`): `threshold` None chooses the decision threshold
    on these rows (the validation split only), maximising `metric`; else it is the recorded
    one, applied."""
    model.eval()
    if renderer.task.type == "multilabel":  # a sigmoid per label, then the threshold
        from tunelab.training.evaluate_multilabel import evaluate_multilabel

        return evaluate_multilabel(model, renderer, rows, batch_size, device, threshold, metric)
    if renderer.task.type == "pretrain":  # per-document NLL, bits per byte
        from tunelab.training.evaluate_lm import score_documents

        return score_documents(
            model,
            renderer.tokenizer,
            rows,
            renderer.max_length,
            batch_size,
            device,
            renderer.pad_id,
        )
    if renderer.kind == "image":
        predictions = predict_classifier(
            model, renderer.encode(rows), renderer.labels, batch_size, device, renderer.pad_id
        )
    elif renderer.kind == "encoder":
        encoded = encode_classification(
            renderer.tokenizer, rows, renderer.labels, renderer.max_length
        )
        predictions = predict_classifier(
            model, encoded, renderer.labels, batch_size, device, renderer.pad_id
        )
    elif renderer.task.type == "classification":
        predictions = predict_by_scoring(model, renderer, rows, batch_size, device)
    else:
        prompts = [renderer.render(r, with_target=False).prompt_ids for r in rows]
        outputs = generate(model, renderer, prompts, batch_size, max_new_tokens, device)
        predictions = [
            {"id": r["id"], "target": r["target"], "output": out}
            for r, out in zip(rows, outputs, strict=True)
        ]
        return predictions, score_outputs(renderer.task, renderer.schema, predictions)
    return predictions, score(renderer.task.type, predictions, renderer.labels)


def first_generation_batch(renderer: Renderer, rows: list[dict], batch_size: int) -> list[int]:
    """Indices of the rows in the first batch `generate` makes of `rows` (shortest prompts
    first). Generated alone, those rows are batched and padded exactly as in the full
    evaluation, so on the same device in float32 their outputs must be identical."""
    prompts = [renderer.render(r, with_target=False).prompt_ids for r in rows]
    return sorted(_length_order([len(p) for p in prompts])[:batch_size])


def _length_order(lengths: list[int]) -> list[int]:
    return sorted(range(len(lengths)), key=lambda i: lengths[i])


@torch.no_grad()
def predict_classifier(
    model: torch.nn.Module,
    examples: list,
    labels: list[str],
    batch_size: int,
    device: torch.device,
    pad_id: int,
) -> list[dict]:
    """The argmax of a classifier's head over texts (`Encoded`, run in length order) or
    images (`pixels.Pixels`), with its softmax probability."""
    texts = isinstance(examples[0], Encoded) if examples else False
    order = (
        _length_order([len(e.input_ids) for e in examples]) if texts else list(range(len(examples)))
    )
    out: list[dict] = [{} for _ in examples]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        logits = model(**classifier_batch([examples[i] for i in idx], pad_id, device))
        probs = torch.softmax(logits.logits.float(), dim=-1)
        conf, pred = probs.max(dim=-1)
        for row, i in enumerate(idx):
            out[i] = {
                "id": examples[i].id,
                "gold": labels[examples[i].label],
                "predicted": labels[int(pred[row])],
                "confidence": round(float(conf[row]), 4),
            }
    return out


@torch.no_grad()
def predict_by_scoring(
    model: torch.nn.Module,
    renderer: Renderer,
    rows: list[dict],
    batch_size: int,
    device: torch.device,
) -> list[dict]:
    """The label whose tokens (and the end token) have the highest summed log-likelihood after
    the prompt; no generation."""
    prompts = [renderer.render(r, with_target=False).prompt_ids for r in rows]
    probs = torch.softmax(label_scores(model, renderer, prompts, batch_size, device), dim=-1)
    return [
        {
            "id": r["id"],
            "gold": r["label"],
            "predicted": renderer.labels[int(probs[i].argmax())],
            "confidence": round(float(probs[i].max()), 4),
        }
        for i, r in enumerate(rows)
    ]


@torch.no_grad()
def label_scores(
    model: torch.nn.Module,
    renderer: Renderer,
    prompts: list[list[int]],
    batch_size: int,
    device: torch.device,
) -> torch.Tensor:
    """Summed log-probabilities of each label after each prompt, shaped (prompts, labels).

    Each prompt runs through the model once; its KV cache is repeated for every label, and all
    labels' tokens go through one more batched forward pass, with positions that follow the
    left padding.
    """
    tok, end = renderer.tokenizer, renderer.template.end_id
    candidates = [
        tok(label, add_special_tokens=False)["input_ids"] + ([end] if end is not None else [])
        for label in renderer.labels
    ]
    k, width = len(candidates), max(len(c) for c in candidates)
    # each candidate as inputs (all but its last token) and as targets (all its tokens)
    inputs = torch.full((k, max(width - 1, 1)), renderer.pad_id, dtype=torch.long)
    input_mask = torch.zeros_like(inputs)
    for j, c in enumerate(candidates):
        inputs[j, : len(c) - 1] = torch.tensor(c[:-1], dtype=torch.long)
        input_mask[j, : len(c) - 1] = 1
    scores = torch.zeros(len(prompts), k)
    order = _length_order([len(p) for p in prompts])
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate_prompts([prompts[i] for i in idx], renderer.pad_id, device)
        mask = batch["attention_mask"]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(**batch, position_ids=positions, use_cache=True)
        first = torch.log_softmax(out.logits[:, -1].float(), -1)  # predicts each label's 1st token
        rest = None
        if width > 1:
            cache = out[CACHE]
            cache.batch_repeat_interleave(k)
            n = len(idx)
            cont_mask = input_mask.repeat(n, 1).to(device)
            cont_pos = (
                positions[:, -1:].repeat_interleave(k, 0)
                + 1
                + torch.arange(inputs.shape[1], device=device)
            )
            rest = torch.log_softmax(
                model(
                    input_ids=inputs.repeat(n, 1).to(device),
                    attention_mask=torch.cat([mask.repeat_interleave(k, 0), cont_mask], 1),
                    position_ids=cont_pos,
                    **{CACHE: cache},
                    use_cache=False,
                ).logits.float(),
                -1,
            )
        for row, i in enumerate(idx):
            for j, c in enumerate(candidates):
                total = first[row, c[0]]
                for t in range(1, len(c)):
                    total = total + rest[row * k + j, t - 1, c[t]]
                scores[i, j] = total
    return scores


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    renderer: Renderer,
    prompts: list[list[int]],
    batch_size: int,
    max_new_tokens: int,
    device: torch.device,
) -> list[str]:
    """Greedy decoding with the KV cache; stops at the end-of-answer token or EOS."""
    tok = renderer.tokenizer
    stop = renderer.template.stop_ids(tok)
    order = _length_order([len(p) for p in prompts])
    out = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate_prompts([prompts[i] for i in idx], renderer.pad_id, device)
        generated = model.generate(
            **batch,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=stop,
            pad_token_id=renderer.pad_id,
            use_cache=True,
        )
        new = generated[:, batch["input_ids"].shape[1] :]
        for row, i in enumerate(idx):
            out[i] = tok.decode(new[row], skip_special_tokens=True).strip()
    return out
