"""Replicate groups: one variant trained over several seeds (`tunelab run --seeds N`).

The seeds are `core.replicates.replicate_seeds(training.seed, N)`: the spec's own seed first,
then derived ones. Each replicate is an ordinary run (its own record, weights, predictions;
resumable, invalidatable) whose record says `replicate: {group, index, seed, base_seed}` and
whose diff against the parent is the group's (its seed is the group's draw, not a change). The
group's record (`.tunelab/groups/gNNN.json`) lists the planned seeds and each replicate's run as
it opens; a replicate that fails stays in it, and the others still train. Statuses are read
from the runs themselves, so a resumed replicate needs nothing rewritten here.
"""

from __future__ import annotations

import dataclasses

from rich.console import Console
from rich.markup import escape

from tunelab.core.errors import Interrupted, TunelabError
from tunelab.core.lab import Lab
from tunelab.core.layout import GROUPS
from tunelab.core.ledger import effective_status
from tunelab.core.replicates import COUNTS, again_command, arm_key, replicate_seeds, seed_of
from tunelab.core.store import Store, now
from tunelab.modeling.checkpoint_files import can_resume
from tunelab.stages.run.variant import run_variant
from tunelab.training.distributed import main_process


def with_seed(lab: Lab, seed: int) -> Lab:
    """The lab with its spec's `training.seed` set to `seed`."""
    training = lab.spec.training.model_copy(update={"seed": seed})
    return dataclasses.replace(lab, spec=lab.spec.model_copy(update={"training": training}))


def open_group(store: Store, kind: str, name: str, base_seed: int, seeds: list[int], **extra):
    """A new replicate group's record (`kind`: replicates or noise), written at once."""
    group_id, path = store.reserve(GROUPS, "g")
    group = {
        "id": group_id,
        "kind": kind,
        "name": name,
        "created": now(),
        "base_seed": base_seed,
        "seeds": seeds,
        "members": [],
        **extra,
    }
    store.save(path, group, "group_started", group=group_id, kind=kind, seeds=len(seeds))
    return group, path


def train_seeds(
    lab: Lab,
    group: dict,
    path,
    name: str,
    console: Console | None,
    have: dict[int, str] | None = None,
    **run_args,
) -> list[dict]:
    """Train the group's seeds not in `have` (seed -> an existing run), in order, recording
    each member as it ends; returns the completed members' records. A failed replicate is kept
    in the group and the next one trains; an interrupted one stops the group."""
    store, have, completed = lab.store, have or {}, []
    lab.data = lab.data_version  # read once: every seed trains on the same version
    for index, seed in enumerate(group["seeds"]):
        if seed in have:
            member = {"index": index, "seed": seed, "run": have[seed], "trained": False}
            group["members"].append(member)
            completed.append(store.read_record(have[seed]))
            continue
        replicate = {"group": group["id"], "index": index, "seed": seed}
        replicate["base_seed"] = group["base_seed"]
        if console:
            console.print(
                f"[bold]{group['id']}[/] seed {index + 1} of {len(group['seeds'])}: {seed}"
            )
        member = {"index": index, "seed": seed, "run": None, "trained": True}
        group["members"].append(member)
        try:
            record = run_variant(
                with_seed(lab, seed),
                name if index == 0 else f"{name}-s{index}",
                console,
                replicate=replicate,
                **run_args,
            )
            member["run"], member["status"] = record["id"], record["status"]
            completed.append(record)
        except Interrupted as err:
            member["run"], member["status"] = _opened(store, replicate), "interrupted"
            raise Interrupted(
                err.cause,
                f"{err.outcome} Group {group['id']} stopped at seed {index + 1} of "
                f"{len(group['seeds'])}: {again_command(group)} again, after that resume, counts "
                "the seeds trained and trains the rest.",
                err.run,
                err.resumable,
            ) from err
        except Exception as err:
            member["run"], member["status"] = _opened(store, replicate), "failed"
            member["error"] = f"{type(err).__name__}: {err}"
            if member["run"] is None:  # refused before any run existed: every seed would be
                raise
            if console:
                console.print(f"[red]seed {seed} failed[/]: {escape(member['error'])}")
        finally:
            group["finished"] = len(completed)
            store.save(path, group, "group_member", group=group["id"], seed=seed)
    group["finished"] = len(completed)  # counted seeds after the last trained one are members too
    store.save(path, group, "group_ended", group=group["id"], finished=len(completed))
    return completed


def run_replicates(
    lab: Lab, seeds: int, name: str | None = None, console: Console | None = None, **run_args
) -> dict:
    """`tunelab run --seeds N`: N replicates of the spec's variant; returns the group with its
    completed runs and the mean and spread of each overall metric. When every seed is trained
    already, nothing trains and no group is written (`id` None, `unchanged`): the runs that
    have them are the arm `compare` judges already."""
    name = name or lab.spec.method.type
    base = lab.spec.training.seed
    planned = replicate_seeds(base, seeds)
    have = trained_already(lab, planned)
    refuse_begun(lab, planned, have)
    if console:
        for seed, run in have.items():
            console.print(
                f"seed {seed}: {run} trained this spec with it already; counted, not trained again"
            )
    if len(have) == len(planned):  # nothing to train: no group to open for it
        runs = [lab.store.read_record(have[seed]) for seed in planned]
        members = [
            {"index": i, "seed": seed, "run": have[seed], "trained": False}
            for i, seed in enumerate(planned)
        ]
        return {
            "id": None,
            "kind": "replicates",
            "name": name,
            "base_seed": base,
            "seeds": planned,
            "members": members,
            "finished": len(runs),
            "runs": runs,
            "summary": summary(runs),
            "unchanged": True,
        }
    if not main_process():  # under torchrun: rank 0 writes the group, this rank trains with it
        return _follow_seeds(lab, planned, have, name, **run_args)
    group, path = open_group(lab.store, "replicates", name, base, planned)
    runs = train_seeds(lab, group, path, name, console, have, **run_args)
    return {**group, "runs": runs, "summary": summary(runs)}


def _follow_seeds(lab: Lab, planned: list[int], have: dict[int, str], name: str, **run_args):
    """A rank other than 0: its share of each seed rank 0 trains, in the same order (`have`,
    read before any seed trains, is rank 0's too); it writes nothing. A seed that fails here
    stops this rank: rank 0's run of it fails with it."""
    lab.data = lab.data_version
    base, followed = planned[0], []
    for index, seed in enumerate(planned):
        if seed in have:
            continue
        replicate = {"group": None, "index": index, "seed": seed, "base_seed": base}
        run_name = name if index == 0 else f"{name}-s{index}"
        followed.append(
            run_variant(with_seed(lab, seed), run_name, None, replicate=replicate, **run_args)
        )
    return {"rank": followed[0]["rank"] if followed else None, "seeds": followed}


def trained_already(lab: Lab, seeds: list[int]) -> dict[int, str]:
    """The completed variants of this spec on this data version (its arm, `arm_key`: whatever
    their parent) whose seed is one of `seeds`, by seed, for `run --seeds` and `noise` to count
    rather than train again: `compare` keeps one run per spec and seed, so a second run of a
    seed would be judged alone, outside the group's arm."""
    have = {}
    for record in _arm_of(lab):
        seed = seed_of(record)
        if record.get("status") == "completed" and seed in seeds and seed not in have:
            have[seed] = record["id"]
    return have


def _arm_of(lab: Lab) -> list[dict]:
    """The lab's variants of this spec on this data version (`arm_key`), oldest first."""
    spec = {"kind": "variant", "data_version": lab.data_version, "spec": lab.spec.to_dict()}
    key = arm_key(spec)
    return [r for r in lab.store.runs() if r.get("kind") == "variant" and arm_key(r) == key]


def interrupted_with(lab: Lab, seed: int) -> str | None:
    """An interrupted run of this spec on this data version that began `seed`: a plain `run`
    trains the seed anew beside it, and says so (`noise`, `run --seeds` and `ablate` refuse)."""
    return _interrupted(lab).get(seed)


def _interrupted(lab: Lab) -> dict[int, str]:
    """The runs of the lab's arm (`_arm_of`) that stopped (interrupted, or lost to a kill -9)
    and that `resume` can finish, by the seed each began. One with nothing to resume from is
    left out: its seed is trained anew, as `resume` itself would advise."""
    stopped = {}
    for r in _arm_of(lab):
        run_dir = lab.store.run_dir(r["id"])
        if effective_status(r, run_dir) in ("interrupted", "lost") and can_resume(r, run_dir):
            stopped.setdefault(seed_of(r), r["id"])
    return stopped


def refuse_begun(lab: Lab, seeds: list[int], have: dict[int, str]) -> None:
    """Refuse to train a seed again that an interrupted run of this spec began: an interrupted
    `noise` or `run --seeds`, run again, trained it a second time beside the one that waited
    to be resumed."""
    begun = {s: run for s, run in _interrupted(lab).items() if s in seeds and s not in have}
    if begun:
        listed = ", ".join(f"seed {seed} by {run}" for seed, run in sorted(begun.items()))
        first = next(iter(begun.values()))
        raise TunelabError(
            f"begun and interrupted: {listed}. `tunelab resume {first}` finishes it, and this "
            f'command then counts it; or `tunelab invalidate {first} --why "..."` to train the '
            "seed anew."
        )


def summary(runs: list[dict]) -> dict:
    """Each overall metric's mean, standard deviation (n - 1) and range over the runs."""
    import numpy as np

    out = {}
    if not runs:
        return out
    for key, value in runs[0]["metrics"].items():
        if key in COUNTS or not isinstance(value, int | float):  # bytes, tokens: not metrics
            continue
        values = [r["metrics"][key] for r in runs]
        out[key] = {
            "mean": float(np.mean(values)),
            "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            "min": float(min(values)),
            "max": float(max(values)),
        }
    return out


def _opened(store: Store, replicate: dict) -> str | None:
    """The run a replicate opened before it stopped, if it got that far."""
    for record in reversed(store.runs()):
        r = record.get("replicate") or {}
        if r.get("group") == replicate["group"] and r.get("index") == replicate["index"]:
            return record["id"]
    return None
