"""The synthetic examples a sizing probe steps on: the shapes of the measured configuration."""

from __future__ import annotations

from typing import Any

from tunelab.stages.size.estimate import target_tokens


def synthetic_examples(args: dict[str, Any], vocab: int, n: int) -> list:
    """`n` examples of exactly `seq_len` tokens: the shapes of the measured configuration.
    A causal example ends with `targets` target tokens (loss mask 1; the second half when
    not given, `estimate.target_tokens`)."""
    import torch

    from tunelab.modeling.classifier_inputs import Encoded
    from tunelab.modeling.render import Rendered

    s = int(args["seq_len"])
    gen = torch.Generator().manual_seed(args.get("seed", 0))
    ids = torch.randint(0, vocab, (n, s), generator=gen).tolist()
    if args["kind"] == "encoder":
        labels = args.get("num_labels", 2)
        return [Encoded(str(j), ids[j], j % labels, False) for j in range(n)]
    if args.get("packed"):
        return [_packed(str(j), ids[j], args["packed"]) for j in range(n)]
    p = s - target_tokens(s, args.get("targets"))
    return [Rendered(str(j), ids[j], [0] * p + [1] * (s - p), p, 0, None, "", "") for j in range(n)]


def _packed(name: str, ids: list[int], boundaries: str):
    """A packed sequence of two documents, every token learned, as task pretrain trains on:
    with `mask` the positions restart at the second one, whose first token is not a target."""
    from tunelab.modeling.loss_positions import IGNORE
    from tunelab.modeling.packing import Packed

    half = len(ids) // 2
    labels, positions = [IGNORE, *ids[1:]], None
    if boundaries == "mask":
        labels[half] = IGNORE
        positions = [*range(half), *range(len(ids) - half)]
    return Packed(name, ids, labels, positions, len(ids), "synthetic", ())


def validation_examples(args: dict[str, Any], vocab: int) -> list:
    """`validation_batch` examples for the validation pass (`size.during`): one a token short of
    the others, so the batch is padded and carries its attention mask, as real ones are."""
    n = int(args.get("validation_batch") or 0)
    if n < 2:
        return synthetic_examples(args, vocab, n)
    short = args | {"seq_len": int(args["seq_len"]) - 1}
    return synthetic_examples(args, vocab, n - 1) + synthetic_examples(short, vocab, 1)
