"""Data mixtures and curriculum stages: which training rows each global batch draws.

Without `data.mixture`, `train.example_order` shuffles all rows into seeded epochs. With it,
each example slot of a batch first draws a source by the current stage's weights, then takes
that source's next row from its own seeded epochs (a source that runs out starts a new
epoch). Everything comes from one generator seeded by `training.seed`, so the same spec gives
the same batches, and a resumed run replays the order up to where it stopped. What was
actually sampled (per stage and source: rows drawn, distinct rows, epochs started) goes into
the run record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from tunelab.core.errors import TunelabError
from tunelab.core.spec import Mixture


@dataclass
class Stage:
    start: int
    """First optimizer step (from 0) of this stage."""
    weights: dict[str, float]
    """Normalised to sum to 1 over the sources with a positive weight."""
    declared: str
    """Where the stage comes from in the spec, e.g. `from_fraction: 0.8`."""


def plan_stages(mixture: Mixture, steps: int) -> list[Stage]:
    """The stages with their start step resolved; refuses stages out of order."""
    stages = [Stage(0, _normalised(mixture.weights), "from the start")]
    for i, st in enumerate(mixture.stages):
        if st.from_step is not None:
            start, declared = st.from_step, f"from_step: {st.from_step}"
        else:
            start, declared = round(st.from_fraction * steps), f"from_fraction: {st.from_fraction}"
        if start <= stages[-1].start:
            raise TunelabError(
                f"data.mixture.stages[{i}] ({declared}) starts at step {start}, not after the "
                f"previous stage (step {stages[-1].start}): list stages in order"
            )
        if start >= steps:
            raise TunelabError(
                f"data.mixture.stages[{i}] ({declared}) starts at step {start}, but the run has "
                f"only {steps} steps: it would never be used"
            )
        stages.append(Stage(start, _normalised(st.weights), declared))
    return stages


def _normalised(weights: dict[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {name: w / total for name, w in weights.items() if w > 0}


@dataclass
class MixtureSampler:
    """Seeded batches of row indices following the mixture's stages."""

    sources: list[str]
    """The source name of each training example, by index."""
    mixture: Mixture
    sampled: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rows: dict[str, list[int]] = {}
        for i, name in enumerate(self.sources):
            self.rows.setdefault(name, []).append(i)
        named = set(self.mixture.weights).union(*(s.weights for s in self.mixture.stages))
        unnamed = sorted(set(self.rows) - named)
        if unnamed:
            raise TunelabError(
                f"data.mixture.weights: source(s) {unnamed} have training rows but no weight; "
                "give each a weight (0 leaves it out on purpose)"
            )

    def check(self, steps: int) -> list[Stage]:
        """The resolved stages; refuses a weighted source without training rows."""
        stages = plan_stages(self.mixture, steps)
        for stage in stages:
            empty = sorted(n for n in stage.weights if n not in self.rows)
            if empty:
                raise TunelabError(
                    f"data.mixture ({stage.declared}): source(s) {empty} have a weight but no "
                    "training rows in this data version"
                )
        return stages

    def order(self, steps: int, global_batch: int, seed: int) -> Iterator[list[int]]:
        stages = self.check(steps)
        gen = torch.Generator().manual_seed(seed)
        queues: dict[str, deque[int]] = {name: deque() for name in self.rows}
        self.sampled = {}
        current = 0
        for step in range(steps):
            while current + 1 < len(stages) and step >= stages[current + 1].start:
                current += 1
            names = list(stages[current].weights)
            probs = torch.tensor([stages[current].weights[n] for n in names], dtype=torch.float64)
            picks = torch.multinomial(probs, global_batch, replacement=True, generator=gen)
            counts = self.sampled.setdefault(current, {})
            batch = []
            for k in picks.tolist():
                name = names[k]
                seen = counts.setdefault(name, {"rows": 0, "epochs": 0, "_distinct": set()})
                if not queues[name]:
                    pool = self.rows[name]
                    queues[name] = deque(pool[j] for j in torch.randperm(len(pool), generator=gen))
                    seen["epochs"] += 1
                index = queues[name].popleft()
                seen["rows"] += 1
                seen["_distinct"].add(index)
                batch.append(index)
            yield batch

    def record(self, steps: int) -> dict:
        """What was planned and what was drawn, per stage and source."""
        stages = plan_stages(self.mixture, steps)
        out = []
        for i, stage in enumerate(stages):
            end = stages[i + 1].start if i + 1 < len(stages) else steps
            drawn = self.sampled.get(i, {})
            total = sum(c["rows"] for c in drawn.values()) or 1
            out.append(
                {
                    "stage": i,
                    "declared": stage.declared,
                    "steps": [stage.start, end],
                    "weights": {n: round(w, 4) for n, w in stage.weights.items()},
                    "sampled": {
                        name: {
                            "rows": c["rows"],
                            "share": round(c["rows"] / total, 4),
                            "distinct": len(c["_distinct"]),
                            "available": len(self.rows[name]),
                            "epochs_started": c["epochs"],
                        }
                        for name, c in sorted(drawn.items())
                    },
                }
            )
        return {"sources": {n: len(r) for n, r in sorted(self.rows.items())}, "stages": out}


def sampler_for(
    mixture: Mixture | None, train_set: list, rows: list[dict]
) -> MixtureSampler | None:
    """The sampler of a spec's mixture over the rendered training set (None: no mixture)."""
    if mixture is None:
        return None
    source_of = {row["id"]: row.get("source") for row in rows}
    # a packed sequence (task pretrain) holds one source's documents and names it
    sources = [getattr(e, "source", None) or source_of.get(e.id) for e in train_set]
    if None in sources:
        raise TunelabError(
            "data.mixture: this data version has no source names (made by an older tunelab); "
            "run `tunelab data` again"
        )
    return MixtureSampler(sources, mixture)
