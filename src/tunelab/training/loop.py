"""The training loop: one plain function you can read top to bottom.

Each optimizer step sees `global_batch` examples split into `accumulation` microbatches. The
loss of a microbatch is the *sum* of its losses (per example for a classifier, per target token
for a causal LM) divided by the same count over the whole accumulated batch, so the accumulated
gradient equals the gradient of one large batch even when microbatches hold different numbers
of target tokens (the normalisation is recorded in the run record).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console

from tunelab.core.errors import TrainingInterrupted, TunelabError
from tunelab.core.files import write_jsonl
from tunelab.core.layout import HEARTBEAT, HISTORY
from tunelab.core.run_files import written_history
from tunelab.core.spec import TrainingSpec
from tunelab.core.store import atomic_write_json, now
from tunelab.data.mixture import MixtureSampler
from tunelab.modeling.checkpoint import load_checkpoint, save_checkpoint
from tunelab.modeling.checkpoint_files import CHECKPOINT_DIR, find_checkpoint
from tunelab.modeling.packing import Packed
from tunelab.modeling.pixels import Pixels
from tunelab.training.distributed import World, check_batch, main_process
from tunelab.training.divergence import diverged, non_finite
from tunelab.training.levers import apply_threads, by_length, compiled
from tunelab.training.memory import peak_mb, start_peak
from tunelab.training.precision import resolve as resolve_precision
from tunelab.training.progress import step_progress
from tunelab.training.step import (
    LOSS_NORMALISATION,
    Example,
    loss_weight,
    make_batch,
    make_optimizer,
    train_mode,
    train_step,
)
from tunelab.training.validate import Validation, window_loss


def total_steps(cfg: TrainingSpec, n_examples: int, sequence_length: int | None = None) -> int:
    """Optimizer steps of the budget: as given, from epochs over `n_examples`, or from tokens
    over global batches of `sequence_length`-token sequences (packed, task pretrain)."""
    if cfg.budget.steps is not None:
        return cfg.budget.steps
    if cfg.budget.tokens is not None:
        if sequence_length is None:
            raise TunelabError(
                "training.budget.tokens counts the tokens of packed sequences (task: pretrain); "
                "give steps or epochs for this task"
            )
        return max(1, math.ceil(cfg.budget.tokens / (cfg.global_batch * sequence_length)))
    return max(1, math.ceil(cfg.budget.epochs * n_examples / cfg.global_batch))


def sequence_length_of(examples: list) -> int | None:
    """The length of packed sequences (all alike), or None for examples of their own length."""
    if examples and isinstance(examples[0], Packed):
        return len(examples[0].input_ids)
    return None


PER_SECOND = {"tokens": "tok/s", "images": "img/s"}


def counted(examples: list) -> str:
    """What `tokens` and `tokens_per_s` count: tokens, or an image lab's images."""
    return "images" if examples and isinstance(examples[0], Pixels) else "tokens"


HEARTBEAT_EVERY_S = 5.0
"""The heartbeat is written at most this often (and at the last step): `runs` calls a run lost
after `ledger.STALE_SECONDS` without one, and two fsyncs a step cost a GPU step's time."""


@dataclass
class Heartbeat:
    """When the next heartbeat is due: the first step, then every `HEARTBEAT_EVERY_S`."""

    last: float | None = None

    def due(self, anyway: bool = False) -> bool:
        now_s = time.monotonic()
        if anyway or self.last is None or now_s - self.last >= HEARTBEAT_EVERY_S:
            self.last = now_s
            return True
        return False


class HistoryFile:
    """The run's loss history, a JSON line a step, appended without waiting for the disk (the
    whole history also goes into the run record at the end); fsynced with each checkpoint,
    which is all that a resume reads back. `path` None: nothing is written."""

    def __init__(self, path: Path | None):
        self.path, self.file = path, None

    def append(self, entry: dict) -> None:
        if self.path is None:
            return
        if self.file is None:
            self.file = self.path.open("a", encoding="utf-8")
        self.file.write(json.dumps(entry) + "\n")
        self.file.flush()

    def sync(self) -> None:
        if self.file is not None:
            os.fsync(self.file.fileno())

    def __enter__(self) -> HistoryFile:
        return self

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()


def resumed_history(run_dir: Path, state: dict) -> list[dict]:
    """The loss history up to the checkpoint's step: appended line by line to the run's
    `history.jsonl` as it was trained (a checkpoint written before that file existed holds it
    in its state). Lines past the checkpoint (steps trained after it, before the stop) go: the
    resumed run trains them again."""
    if "history" in state:
        return state["history"]
    kept = [e for e in written_history(run_dir) if e["step"] <= state["step"]]
    if main_process():
        write_jsonl(run_dir / HISTORY, kept)
    return kept


def lr_factor(schedule: str, warmup: int, steps: int, decay_fraction: float = 0.2):
    """The multiplier of the base learning rate at each step (for LambdaLR)."""
    decay_start = steps - max(1, round(decay_fraction * steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if schedule == "wsd":
            if step < decay_start:
                return 1.0
            return max(0.0, (steps - step) / (steps - decay_start))
        progress = (step - warmup) / max(1, steps - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def example_order(n: int, steps: int, global_batch: int, seed: int) -> Iterator[list[int]]:
    """Seeded epochs of shuffled indices, cut into global batches; epochs run on as needed."""
    if n == 0:
        raise TunelabError("no training examples: nothing to train on")
    gen = torch.Generator().manual_seed(seed)
    buffer: list[int] = []
    for _ in range(steps):
        while len(buffer) < global_batch:
            buffer.extend(torch.randperm(n, generator=gen).tolist())
        yield buffer[:global_batch]
        buffer = buffer[global_batch:]


def _microbatches(examples: list, mine: list[int], cfg: TrainingSpec, pad_id: int, device):
    """This rank's share of a global batch (`mine`, indices into `examples`), in microbatches
    on the device (ordered by length first with `training.group_by_length`)."""
    mine = by_length(mine, examples, cfg.group_by_length)
    return [
        make_batch([examples[j] for j in mine[i : i + cfg.microbatch]], pad_id, device, cfg.packing)
        for i in range(0, len(mine), cfg.microbatch)
    ]


def _validate(validation, model, device, pad_id: int, history: list[dict], console):
    """The validation loss at this step, into its history entry (the last), and the
    overfitting warning when its rise against the training loss says so. The training loss
    beside it is the mean since the last point (or the start: a resumed run's history holds
    the steps before its stop too)."""
    entry = history[-1]
    since = validation.points[-1]["step"] if validation.points else 0
    entry["validation_loss"] = validation.measure(model, device, pad_id)
    warning = validation.record(
        model, entry["step"], entry["validation_loss"], window_loss(history, since)
    )
    if warning and console is not None:
        console.print(f"[yellow]warning[/] overfitting: {warning}")


def _time_cap(cap: float | None, steps: int, planned: int, seconds: float) -> dict | None:
    """What `training.budget.seconds` did: None without one; else the steps trained of those
    the budget laid the schedule over, and what a cut short run did not reach."""
    if cap is None:
        return None
    out = {"seconds": cap, "steps": steps, "of": planned, "cut": steps < planned}
    if steps < planned:
        out["message"] = (
            f"training.budget.seconds {cap:g} ended training after step {steps} of the "
            f"{planned} the schedule was laid out over ({seconds:.0f}s trained): its learning "
            "rate had not finished its decay, and on another machine the same cap trains "
            "another number of steps"
        )
    return out


def _checkpoint(path, model, optimizer, scheduler, state: dict, world, validation, log) -> None:
    """A checkpoint of this step (`state`: step, tokens, seconds), with the history a resume
    reads back on disk first, and `training.keep: best`'s weights and step beside it, for a
    resumed run to keep. One process writes it alone; several write it together (rank 0 the
    files of the whole run, each rank its shards)."""
    log.sync()
    best = validation.saved if validation is not None else None
    if best is not None:
        state["best"] = validation.best
    save_checkpoint(path, model, optimizer, scheduler, state, world, best)


def train(
    model: torch.nn.Module,
    examples: list[Example],
    cfg: TrainingSpec,
    device: torch.device,
    pad_id: int,
    console: Console | None = None,
    run_dir: Path | None = None,
    stop: threading.Event | None = None,
    resume: bool = False,
    sampler: MixtureSampler | None = None,
    world: World | None = None,
    validation: Validation | None = None,
) -> dict:
    """Train in place; return what happened (steps, tokens, speed, memory, loss history).

    With `run_dir`, each step writes a heartbeat and checkpoints go to `run_dir/checkpoint`
    (every `cfg.checkpoint_every` steps, and when `stop` is set: then the loop ends the step it
    is in, saves, and raises TrainingInterrupted, naming the stop's `cause` when it has one, as
    `tunelab.core.stopping.StopRequest` does). `resume` continues from that checkpoint.
    `sampler` (a data mixture) chooses the rows of each batch instead of plain seeded epochs.
    Under `world` (several processes, `model` wrapped by `World.wrap`), each rank takes its
    share of every global batch; rank 0 alone writes heartbeats, every rank takes part in
    writing a checkpoint and reads it on `resume`. `validation` (`training.validate_every`)
    measures the validation loss at its cadence into the step's history entry, warns of
    overfitting, and with `training.keep: best` restores the best step's weights at the end.
    """
    world = world or World()
    check_batch(world, cfg.global_batch, cfg.microbatch)
    precision, chosen = resolve_precision(cfg.precision, device)  # `run` resolved auto already
    levers = {
        "threads": apply_threads(cfg.threads),
        "compile": cfg.compile,
        "group_by_length": cfg.group_by_length,
        "packing": cfg.packing,
    }
    stepping = compiled(model, cfg.compile)
    # dropout's draws: rank 0's are one process's; every other rank draws its own masks (the
    # same seed on every rank had given ranks the same masks for different examples)
    torch.manual_seed(cfg.seed + world.rank)
    steps = total_steps(cfg, len(examples), sequence_length_of(examples))
    params, optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_factor(cfg.schedule, cfg.warmup_steps, steps, cfg.decay_fraction)
    )
    checkpoint = run_dir / CHECKPOINT_DIR if run_dir else None
    history: list[dict] = []
    tokens_seen, done, elapsed_before = 0, 0, 0.0
    if resume:
        state = load_checkpoint(find_checkpoint(checkpoint), model, optimizer, scheduler)
        tokens_seen, done = state["tokens"], state["step"]
        history = resumed_history(run_dir, state)
        if validation is not None:  # its curve, warning and best step (and weights) before
            validation.resume(history, state.get("best"), state.get("best_weights"))
        elapsed_before = state["seconds"]
    elif run_dir is not None and world.main:
        (run_dir / HISTORY).unlink(missing_ok=True)  # a fresh start: no earlier attempt's lines
    heartbeat = Heartbeat()
    cap = cfg.budget.seconds
    peak_source = start_peak(device)  # this run's peak, not an earlier run's in this process
    start = time.perf_counter() - elapsed_before
    started, my_tokens = time.perf_counter(), 0  # this rank, since this process started
    train_mode(model)
    log = HistoryFile(run_dir / HISTORY if run_dir is not None and world.main else None)
    unit = PER_SECOND[counted(examples)]
    with step_progress(console, steps, done, unit) as show, log:
        if sampler is not None:
            order = sampler.order(steps, cfg.global_batch, cfg.seed)
        else:
            order = example_order(len(examples), steps, cfg.global_batch, cfg.seed)
        for step, batch_idx in enumerate(order):
            if step < done:  # resumed: these batches were taken before the stop
                continue
            # the count of the whole global batch (over N ranks, / N where DDP averages them)
            denominator = sum(loss_weight(examples[j]) for j in batch_idx) / world.divisor
            batches = _microbatches(examples, world.share(batch_idx), cfg, pad_id, device)
            lr = scheduler.get_last_lr()[0]
            out = train_step(
                stepping,
                optimizer,
                params,
                batches,
                denominator,
                device,
                precision,
                cfg.max_grad_norm,
                scheduler,
            )
            # the step's one collective and one read: stop, loss, tokens, gradient norm
            asked = stop is not None and stop.is_set()
            late = cap is not None and time.perf_counter() - start >= cap
            totals = world.step_totals(out, asked, late)
            step_loss, stopping = totals.loss, totals.stop
            tokens_seen += totals.tokens
            my_tokens = my_tokens + out.tokens  # this rank's, on the device: read at the end

            elapsed = time.perf_counter() - start
            entry = {
                "step": step + 1,
                "loss": step_loss,
                "lr": lr,
                "grad_norm": totals.grad_norm,
                "tokens": tokens_seen,
                "seconds": round(elapsed, 3),
            }
            if totals.balance is not None:  # a mixture of experts' term, trained on beside it
                entry["balance_loss"] = totals.balance
            history.append(entry)
            trained = step_loss + (totals.balance or 0.0)
            if not math.isfinite(trained):  # every rank read the same sum: all stop here
                if run_dir is not None and world.main:
                    log.append(entry)
                raise non_finite(step + 1, trained, history, cfg.lr, cfg.max_grad_norm)
            ending = step + 1 == steps or totals.out_of_time  # the last step trained
            if validation is not None and (validation.due(step + 1, steps) or ending):
                _validate(validation, model, device, pad_id, history, console)
            show(step + 1, step_loss, tokens_seen / elapsed)
            if run_dir is None:
                if totals.out_of_time:  # `training.budget.seconds`: every rank ends here
                    break
                continue
            if world.main:  # the history line, and at most every few seconds a heartbeat
                log.append(entry)
                if heartbeat.due(ending or stopping):
                    beat = {"step": step + 1, "of": steps, "loss": step_loss, "pid": os.getpid()}
                    atomic_write_json(run_dir / HEARTBEAT, beat | {"time": now()})
            every = cfg.checkpoint_every
            if stopping or (every and (step + 1) % every == 0 and step + 1 < steps):
                state = {"step": step + 1, "tokens": tokens_seen, "seconds": elapsed}
                _checkpoint(checkpoint, model, optimizer, scheduler, state, world, validation, log)
            if stopping:
                raise TrainingInterrupted(step + 1, checkpoint, getattr(stop, "cause", None))
            if totals.out_of_time:
                break
    planned, steps = steps, history[-1]["step"]
    seconds = time.perf_counter() - start
    kept = validation.restore(model, steps) if validation is not None else None
    model.eval()
    my_tokens = int(my_tokens)
    mine = {
        "tokens": my_tokens,
        "tokens_per_s": round(my_tokens / (time.perf_counter() - started), 1),
        "peak_memory_mb": round(peak_mb(device), 1),
    }
    return {
        "steps": steps,
        "global_batch": cfg.global_batch,
        "microbatch": cfg.microbatch,
        "accumulation": cfg.global_batch // (cfg.microbatch * world.size),  # per rank
        "per_rank": world.gather(mine) if world.distributed else None,
        "loss_normalisation": LOSS_NORMALISATION,
        "precision": chosen,
        "levers": levers,
        "examples_seen": steps * cfg.global_batch,
        "tokens": tokens_seen,
        "unit": counted(examples),
        "seconds": round(seconds, 2),
        "tokens_per_s": round(tokens_seen / seconds, 1),
        "peak_memory_mb": round(peak_mb(device), 1),
        "peak_memory_source": peak_source,
        "final_loss": history[-1]["loss"],
        "history": history,
        "mixture": sampler.record(steps) if sampler is not None else None,
        "time_cap": _time_cap(cap, steps, planned, seconds),
        "validation": validation.summary() if validation is not None else None,
        "kept": kept,
        "diverged": diverged(history),
    }
