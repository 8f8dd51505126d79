"""The lines `tunelab run` prints as a variant starts: what trains, in which batches, over
how many steps, from what (a probe's head, a scratch model, a mixture of sources)."""

from __future__ import annotations

from collections import Counter

from tunelab.training.distributed import World
from tunelab.training.loop import sequence_length_of, total_steps


def head_line(init: dict) -> str:
    cached = ", features from an earlier run's cache" * bool(init.get("features_cached"))
    return (
        f"head {init['layer']} starts from a linear probe on its {init['features']} input "
        f"features over {init['rows']} train rows (train accuracy "
        f"{100 * init['train_accuracy']:.1f}%, {init['seconds']:.0f}s{cached})"
    )


def start_line(record: dict, spec, train_set: list, world: World) -> str:
    t, cfg, n_train = record["trainable"], spec.training, len(train_set)
    steps = total_steps(cfg, n_train, sequence_length_of(train_set))
    accumulation = cfg.global_batch // (cfg.microbatch * world.size)
    processes = processes_text(world.size, cfg.strategy)
    return (
        f"[bold]{record['id']}[/]: {t['method']} · {t['trainable_params']:,} of "
        f"{t['total_params']:,} parameters train ({100 * t['trainable_fraction']:.2f}%) · "
        f"global batch {cfg.global_batch} = {cfg.microbatch} microbatch × {accumulation} "
        f"accumulation × {processes} · {steps} steps on {n_train} examples"
        + _left_out(record.get("rejected_train") or [])
        + (_mixture_text(spec.data.mixture) if spec.data.mixture else "")
        + (_scratch_text(record["base_model"]) if record["base_model"].get("init") else "")
    )


def processes_text(size: int, strategy: str) -> str:
    """`2 processes (fsdp)`; one process says when it does not shard as the spec asks (FSDP
    shards only among several processes, so one trains the whole model as it is)."""
    if size > 1:
        return f"{size} processes ({strategy})"
    unsharded = " (training.strategy fsdp shards only under torchrun: unsharded here)"
    return "1 process" + unsharded * (strategy == "fsdp")


def _left_out(rejected: list[dict]) -> str:
    """` (28 train rows left out, 28 unknown_role: `tunelab inspect` says why)`."""
    if not rejected:
        return ""
    kinds = ", ".join(f"{n} {k}" for k, n in Counter(r.get("kind", "?") for r in rejected).items())
    return f" ({len(rejected)} train rows left out, {kinds}: `tunelab inspect` says why)"


def _scratch_text(base: dict) -> str:
    p = base["params"]
    return (
        f" · from scratch ({base['config_class']}): {p['total']:,} parameters, "
        f"{p['active']:,} active per token, {base['flops_per_token']:,} FLOPs per token"
    )


def _mixture_text(mixture) -> str:
    total = sum(mixture.weights.values())
    parts = ", ".join(f"{n} {w / total:.0%}" for n, w in mixture.weights.items())
    stages = f", then {len(mixture.stages)} more stage(s)" if mixture.stages else ""
    return f" · mixture {parts}{stages}"
