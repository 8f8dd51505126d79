"""Seeds as replicates: which seeds a replicate group draws, which runs are one arm, and the
family a noise floor applies to.

- **Seeds.** A group of N replicates of a spec with `training.seed` s trains seeds
  `replicate_seeds(s, N)`: s itself first (so the run a user would have trained anyway is one
  of them), then seeds derived from s and the replicate's index by a hash, far from s and from
  one another so that two groups' seeds do not collide the way s+1, s+2 would.
- **Arms.** Two completed runs are draws of one arm when they are of one kind, on one data
  version, and their resolved specs differ in nothing but the `seed` and uncounted `runtime`
  groups (`param_groups`): the same procedure, another draw of its randomness. An arm keeps
  one run per seed (a repeat with the same seed draws nothing new), the oldest.
- **Family.** A noise record (`tunelab noise`) measures the seed-to-seed spread of one
  procedure; it applies to the arms of its family: the same task, data version (and so the
  validation examples), base model (its path and init), method type, training budget and
  evaluation protocol. These set what the seed draws over (which weights start at random, how
  many steps of data order, what is measured); a one-change variant inside the family (a
  learning rate, a LoRA rank, an attention layout) is taken to share the spread, the
  equal-variance assumption of a pooled t.
"""

from __future__ import annotations

import hashlib
import json

from tunelab.core.param_groups import flatten, group_of, normalise

DRAWN_GROUPS = frozenset({"seed", "runtime"})
"""The parameter groups in which the runs of one arm may differ."""

COUNTS = ("n", "support", "bytes", "tokens")
"""Fields of a run's metrics that count the validation data (examples, a class's support, a
source's bytes and tokens), the same for every seed: not metrics, so they have no spread."""


FAMILY_KEYS = (
    "task",
    "model.path",
    "model.init",
    "method.type",
    "training.budget",
    "evaluation",
)
"""The spec keys (and their sub-keys) that a noise record's family holds, beside the data
version and the evaluation protocol."""


def replicate_seeds(seed: int, n: int) -> list[int]:
    """The seeds of `n` replicates of a run whose seed is `seed`: `seed` first, then derived."""
    if n < 1:
        raise ValueError("a replicate group has at least one seed")
    out = [seed]
    for index in range(1, n):
        digest = hashlib.sha256(f"tunelab replicate {seed} {index}".encode()).digest()
        out.append(int.from_bytes(digest[:4], "big") % (2**31 - 1))
    return out


def again_command(group: dict) -> str:
    """The command that trains the seeds a replicate group lacks: the one that made it (a noise
    group's is `noise`, not `run --seeds`, which its user never ran)."""
    n = len(group.get("seeds") or [])
    if group.get("kind") == "noise":
        return f"`tunelab noise {group.get('of')} --seeds {n}`"
    return f"the same `tunelab run --seeds {n}`"


def arm_key(record: dict) -> str:
    """What the runs of one arm share: kind, data version and every spec key outside the
    drawn groups (`DRAWN_GROUPS`)."""
    spec = flatten(normalise(record.get("spec") or {}))
    kept = {k: v for k, v in spec.items() if group_of(k) not in DRAWN_GROUPS}
    return json.dumps([record["kind"], record["data_version"], kept], sort_keys=True, default=str)


def seed_of(record: dict) -> int | None:
    return ((record.get("spec") or {}).get("training") or {}).get("seed")


def arms(records: list[dict]) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Runs by arm, keyed by the id of the arm's first run (oldest first), one run per seed;
    and the repeats left out: each run whose seed its arm already has, with that run's id."""
    by_key: dict[str, list[dict]] = {}
    repeats: dict[str, str] = {}
    for record in records:
        members = by_key.setdefault(arm_key(record), [])
        same = [m for m in members if seed_of(m) == seed_of(record)]
        if same:
            repeats[record["id"]] = same[0]["id"]
        else:
            members.append(record)
    return {members[0]["id"]: members for members in by_key.values()}, repeats


def family(record: dict) -> dict:
    """The family a run's seed spread describes (see the module docstring)."""
    spec = flatten(normalise(record.get("spec") or {}))
    kept = {
        k: v for k, v in spec.items() if any(k == f or k.startswith(f + ".") for f in FAMILY_KEYS)
    }
    return {
        "data_version": record["data_version"],
        "protocol": record.get("protocol"),
        "spec": dict(sorted(kept.items())),
    }


def arm_means(comparison: dict) -> list[tuple[str, int, float]]:
    """Each judged variant arm of several seeds: its first run, its seeds and their mean of the
    primary metric (its row shows the first seed's own value; its difference is the mean's)."""
    primary = comparison["primary_metric"]
    return [
        (row["id"], *mean)
        for row in comparison["runs"]
        if "vs_reference" in row and (mean := _seed_mean(row, primary))
    ]


def _seed_mean(row: dict, primary: str) -> tuple[int, float] | None:
    """A comparison row's seeds and their mean of `primary`, when it has two or more."""
    values = [s[primary] for s in row.get("seeds") or [] if s.get(primary) is not None]
    return (len(values), sum(values) / len(values)) if len(values) > 1 else None


def reference_arm(comparison: dict) -> tuple[int, float] | None:
    """A comparison's reference arm when it has several seeds: their number and their mean of
    the primary metric, which every variant's interval is against (its row gives the first
    seed's own value); None for a reference of one seed."""
    primary = comparison["primary_metric"]
    ref = next((r for r in comparison["runs"] if r["id"] == comparison["reference"]), {})
    return _seed_mean(ref, primary)


def several_seeds(versus: dict) -> bool:
    """Either arm of a comparison's pair (a row's `vs_reference`) has several seeds: its
    flips, McNemar's test and concentration are its first seeds', beside an interval over
    all of them."""
    b = versus.get("bootstrap") or {}
    return len(b.get("values_a") or ()) + len(b.get("values_b") or ()) > 2
