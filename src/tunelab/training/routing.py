"""Where a mixture of experts sends its tokens, counted on the validation pass.

An experts ablation's verdict cannot be read without knowing whether the router used its
experts: a router that sends most tokens to one expert, or leaves one unused, is a smaller
model than its parameter count says. The pass that scores the validation documents asks the
model for its router logits (transformers' `output_router_logits`), takes each real token's
top `num_experts_per_tok` experts per sparse layer, and counts them on the device; the record
holds each layer's shares (`metrics.routing`) and a warning where a layer's busiest expert
takes more than twice its balanced share or its least used one under a quarter of it.
"""

from __future__ import annotations

import torch

BUSY, IDLE = 2.0, 0.25
"""A layer is uneven when an expert takes more than BUSY times its balanced share (1/E) of the
layer's assignments, or less than IDLE times it."""


class RouteCounts:
    """Per sparse layer, how many of its real tokens' top-k assignments went to each expert."""

    def __init__(self, experts: int, per_token: int, aux_weight: float):
        self.experts, self.per_token, self.aux_weight = experts, per_token, aux_weight
        self.counts: list[torch.Tensor] = []

    @classmethod
    def of(cls, model: torch.nn.Module) -> RouteCounts | None:
        """Counts for a mixture of experts that reports its router logits; None for any
        other model."""
        config = getattr(model, "config", None)
        experts = getattr(config, "num_experts", 0) or 0
        if experts < 2 or not hasattr(config, "output_router_logits"):
            return None
        aux = float(getattr(config, "router_aux_loss_coef", 0.0) or 0.0)
        return cls(experts, int(config.num_experts_per_tok), aux)

    def add(self, router_logits: tuple[torch.Tensor, ...], real: torch.Tensor) -> None:
        """One batch: each layer's (tokens, experts) logits, `real` the tokens that are not
        padding (flattened as the logits' rows are)."""
        for i, logits in enumerate(router_logits):
            chosen = logits[real].topk(self.per_token, dim=-1).indices.flatten()
            counted = torch.bincount(chosen, minlength=self.experts)
            if i == len(self.counts):
                self.counts.append(counted)
            else:
                self.counts[i] += counted

    def summary(self) -> dict:
        """Each sparse layer's shares of its assignments, and a warning where one is uneven."""
        shares = [(c / c.sum().clamp(min=1)).tolist() for c in self.counts]
        balanced = 1 / self.experts
        uneven = [
            (i, max(s), min(s))
            for i, s in enumerate(shares)
            if max(s) > BUSY * balanced or min(s) < IDLE * balanced
        ]
        warning = None
        if uneven:
            i, most, least = max(uneven, key=lambda u: u[1] - u[2])
            warning = (
                f"routing is uneven in {len(uneven)} of {len(shares)} expert layers: expert "
                f"layer {i}'s busiest expert takes {most:.1%} of its tokens' assignments and its "
                f"least used {least:.1%}, where {balanced:.1%} each is balanced (expert layers "
                "counted from 0, dense ones left out); the balancing loss "
                f"weighs {self.aux_weight:g} (`model.arch.moe.router_aux_loss`)"
            )
        return {
            "experts": self.experts,
            "per_token": self.per_token,
            "shares": [[round(x, 4) for x in s] for s in shares],
            "warning": warning,
        }
