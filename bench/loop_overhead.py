"""What the training loop costs around the model: host reads and collectives per step, and steps
per second on a model so small that the loop's own overhead is most of a step.

Each measurement runs `tunelab.training.loop.train` in a fresh process, under `torchrun` with
two gloo processes when `--ranks 2`, with a checkpoint-free run folder (heartbeat and history
written as in a real run). It counts, per optimizer step:

- reads of a tensor to the host made by tunelab's own code (`item`, `tolist`, `float()`,
  `int()`, `bool()` called from a file under tunelab's package; on a GPU each one waits for the
  device to finish everything queued before it);
- collectives (`torch.distributed.all_reduce`, `all_gather_object`, `broadcast` calls);
- on a GPU, every operation that makes the host wait for the device, whoever calls it (torch,
  transformers or tunelab): CUDA's own sync debug mode (`torch.cuda.set_sync_debug_mode`)
  warns once per such call, and the warnings are counted (`-` on a CPU, where none exist);
- with `--ops`, on any device, the operators whose result's size or value is data (`nonzero`,
  `item`'s `_local_scalar_dense`, `masked_select`, an index of booleans...): each one waits
  for the device on a GPU, so on a CPU this counts the waits a GPU would have, by the tunelab
  or transformers file that led to each. Every operator then passes through Python, so the
  milliseconds of such a run are not comparable (marked `*`);
- milliseconds per step, from the second step to the last.

`--model causal` trains a tiny Llama-style causal LM on prompt-and-answer examples instead of
the default classifier, so the causal path's own operations are in the count: the loss on the
answer tokens alone (`training.step.summed_loss`, at positions found on the host).

`--before REV` measures the same in a git worktree of REV (the loop as it was), alternating
with this tree, in one run:

    .venv/bin/python bench/loop_overhead.py --before 14d87c6 --ranks 1
    .venv/bin/python bench/loop_overhead.py --before 14d87c6 --ranks 2

On a GPU (one process; `--before-src` where the copy has no git history):

    git archive 14d87c6 src | tar -x -C .before
    python bench/loop_overhead.py --before-src .before/src --device cuda
    python bench/loop_overhead.py --device cuda --model causal --repeats 1   # syncs by source

The waits a GPU would have, counted on a CPU (the causal loss's selections, before and after):

    .venv/bin/python bench/loop_overhead.py --before 013d536 --model causal --ops --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")
HOST_SIDE = {"example_order", "target_index"}
"""Functions whose tensors are on the host by design, wherever training runs: the seeded order
of the examples, and where a batch's targets are (found while the batch is built)."""
COLLECTIVES = ("all_reduce", "all_gather_object", "broadcast", "broadcast_object_list")


def child(
    steps: int, micro: int, accumulation: int, device_name: str, kind: str, ops: bool
) -> dict:
    """One measurement, in this process (a rank of torchrun's, or alone)."""
    import time

    import torch

    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())

    from tunelab.core.spec import TrainingSpec
    from tunelab.modeling.classifier_inputs import Encoded
    from tunelab.training.distributed import world_from_env
    from tunelab.training.process_group import joined

    source = str(Path(sys.modules["tunelab"].__file__).parent)
    counts = {"reads": 0, "collectives": 0}

    def counting(kind, original, check=None):
        def wrapped(*args, **kwargs):
            caller = sys._getframe(1).f_code
            if check is None or check(caller):
                counts[kind] += 1
            return original(*args, **kwargs)

        return wrapped

    def ours(code) -> bool:
        return code.co_filename.startswith(source) and code.co_name not in HOST_SIDE

    for name in READS:
        setattr(torch.Tensor, name, counting("reads", getattr(torch.Tensor, name), ours))

    class Tiny(torch.nn.Module):
        """Embedding bag and a head: a step's model time is a fraction of a millisecond."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(64, 16, mode="sum")
            self.head = torch.nn.Linear(16, 4)

        def forward(self, input_ids, attention_mask):
            weights = attention_mask.float()
            logits = self.head(self.emb(input_ids, per_sample_weights=weights))
            return type("Out", (), {"logits": logits})()

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    world = world_from_env("ddp")
    per_rank = micro * accumulation
    n = 4 * per_rank * world.size
    if kind == "causal":
        net, examples = _causal(n, gen)
    else:
        net = Tiny()
        examples = [
            Encoded(str(i), torch.randint(1, 64, (8,), generator=gen).tolist(), i % 4, False)
            for i in range(n)
        ]
    cfg = TrainingSpec(
        lr=1e-3,
        global_batch=per_rank * world.size,
        microbatch=micro,
        budget={"steps": steps},
        max_grad_norm=1.0,
        schedule="constant",
    )
    from tunelab.training import loop

    with tempfile.TemporaryDirectory() as run_dir, joined(world, device) as world:
        model, _ = world.wrap(net.to(device), device, "fp32")
        import torch.distributed as dist

        if world.distributed:
            for name in COLLECTIVES:
                setattr(dist, name, counting("collectives", getattr(dist, name)))
        start = time.perf_counter()
        with _syncs_counted(device) as syncs, _data_sized_counted(ops) as sized:
            out = loop.train(
                model,
                examples,
                cfg,
                device,
                0,
                run_dir=Path(run_dir) if world.main else None,
                world=world,
            )
        seconds = time.perf_counter() - start
    history = out["history"]  # the first step (AdamW's state is made there) left out
    per_step = (history[-1]["seconds"] - history[0]["seconds"]) / (len(history) - 1)
    return {
        "rank": world.rank,
        "steps": steps,
        "reads_per_step": counts["reads"] / steps,
        "collectives_per_step": counts["collectives"] / steps,
        "syncs_per_step": None if syncs["where"] is None else len(syncs["where"]) / steps,
        "syncs_by_source": dict(Counter(syncs["where"] or []).most_common(8)),
        "data_sized_per_step": None if sized is None else sized.total() / steps,
        "data_sized_by_source": dict((sized or Counter()).most_common(8)),
        "step_ms": 1000 * per_step,
        "seconds": seconds,
        "final_loss": out["history"][-1]["loss"],
    }


def _causal(n: int, gen):
    """A tiny Llama-style causal LM and `n` examples of a 10-token prompt and a 3-token answer
    (the loss on the answer and the end token alone, as tunelab renders them)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tunelab.modeling.render import Rendered

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    examples = []
    for i in range(n):
        ids = torch.randint(1, 64, (14,), generator=gen).tolist()
        mask = [0] * 10 + [1] * 4
        examples.append(Rendered(str(i), ids, mask, 10, 0, None, "", "x"))
    return LlamaForCausalLM(config), examples


@contextmanager
def _syncs_counted(device):
    """On a GPU, each synchronizing CUDA call under the block, by the innermost frame in tunelab
    or transformers that made it (`where`: None on a CPU, where nothing is counted)."""
    import torch

    found = {"where": None}
    if device.type != "cuda":
        yield found
        return
    found["where"] = []
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():  # restores the filters and showwarning on the way out
            warnings.filterwarnings("always", message=".*synchroniz")
            shown = warnings.showwarning

            def record(message, category, filename, lineno, file=None, line=None):
                if "synchroniz" in str(message):
                    found["where"].append(_caller())
                else:
                    shown(message, category, filename, lineno, file, line)

            warnings.showwarning = record
            yield found
    finally:
        torch.cuda.set_sync_debug_mode("default")


DATA_SIZED = {"nonzero", "masked_select", "_local_scalar_dense", "unique", "_unique2"}


@contextmanager
def _data_sized_counted(on: bool):
    """With `on`, a Counter of the operators under the block whose result's size or value the
    host must read from the device (`DATA_SIZED`, and `index` or `index_put` with booleans),
    by operator and the innermost tunelab or transformers frame; else None."""
    if not on:
        yield None
        return
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    found: Counter = Counter()

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__.split(".")[0]
            indices = args[1] if name.startswith(("index", "_index_put")) and len(args) > 1 else ()
            boolean = any(
                isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in indices or ()
            )
            if name in DATA_SIZED or boolean:
                where = _caller(1)
                if where.split()[-1] not in HOST_SIDE:
                    found[f"{name}: {where}"] += 1
            return func(*args, **(kwargs or {}))

    with Counting():
        yield found


def _caller(skip: int = 2) -> str:
    """`file:line function` of the innermost frame in tunelab or transformers."""
    frame = sys._getframe(skip)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/tunelab/" in name or "/transformers/" in name:
            return f"{Path(name).name}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "elsewhere"


def measure(
    src: Path,
    ranks: int,
    steps: int,
    micro: int,
    accumulation: int,
    device: str,
    kind: str,
    ops: bool,
) -> dict:
    """One fresh-process measurement of the loop under `src` (rank 0's figures)."""
    path = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = os.environ | {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    args = ["--child", str(steps), str(micro), str(accumulation), device, kind, str(int(ops))]
    if ranks == 1:
        command = [sys.executable, __file__, *args]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={ranks}",
            __file__,
            *args,
        ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"measurement failed ({src}):\n{done.stderr[-3000:]}")
    return min((json.loads(line) for line in lines), key=lambda r: r["rank"])


def worktree(rev: str) -> Path:
    """A detached checkout of `rev` beside the system's temporary files."""
    path = Path(tempfile.mkdtemp(prefix="tunelab-before-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True)
    return path


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        steps, micro, accumulation = map(int, sys.argv[2:5])
        device, kind, ops = sys.argv[5:8]
        print(json.dumps(child(steps, micro, accumulation, device, kind, ops == "1")), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git revision to measure beside this tree")
    parser.add_argument(
        "--before-src",
        type=Path,
        help="the src folder of the loop as it was, already checked out (where there is no git "
        "history: `git archive REV src | tar -x -C DIR`, then DIR/src)",
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda (one process)")
    parser.add_argument("--ranks", type=int, default=1, choices=(1, 2))
    parser.add_argument(
        "--model",
        choices=("tiny", "causal"),
        default="tiny",
        help="tiny: a classifier whose step is mostly the loop (default); causal: a tiny "
        "causal LM, its loss on the answer tokens",
    )
    parser.add_argument(
        "--ops",
        action="store_true",
        help="count the operators that would make the host wait on a GPU, on any device (the "
        "milliseconds of such a run are not comparable)",
    )
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--micro", type=int, default=1)
    parser.add_argument("--accumulation", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    trees = {"now": ROOT / "src"}
    made = None
    if args.before:
        made = worktree(args.before)
        trees = {"before": made / "src", **trees}
    elif args.before_src:
        trees = {"before": args.before_src, **trees}
    if args.device != "cpu" and args.ranks != 1:
        parser.error("--device cuda measures one process (--ranks 1)")
    rows = []
    try:
        for repeat in range(args.repeats):
            for name, src in trees.items():
                r = measure(
                    src,
                    args.ranks,
                    args.steps,
                    args.micro,
                    args.accumulation,
                    args.device,
                    args.model,
                    args.ops,
                )
                rows.append({"tree": name, "repeat": repeat + 1, **r})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT)
    print(
        f"\n{args.ranks} process(es) on {args.device}, {args.steps} steps of "
        f"{args.accumulation} microbatches of {args.micro}\n"
    )
    print(
        "| tree | # | host reads / step | collectives / step | device syncs / step "
        "| data-sized ops / step | ms / step | final loss |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        syncs, sized = r.get("syncs_per_step"), r.get("data_sized_per_step")
        print(
            f"| {r['tree']} | {r['repeat']} | {r['reads_per_step']:.2f} | "
            f"{r['collectives_per_step']:.2f} | {'-' if syncs is None else f'{syncs:.2f}'} | "
            f"{'-' if sized is None else f'{sized:.2f}'} | "
            f"{r['step_ms']:.2f}{'*' if args.ops else ''} | {r['final_loss']:.6f} |"
        )
    for key, what in (("syncs_by_source", "syncs"), ("data_sized_by_source", "data-sized ops")):
        for r in rows:
            if r.get(key):
                print(f"\n{r['tree']} #{r['repeat']}, {what} by where they were made (all steps):")
                for where, count in r[key].items():
                    print(f"  {count:6d}  {where}")


if __name__ == "__main__":
    main()
