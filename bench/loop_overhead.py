"""What the training loop costs around the model: host reads and collectives per step, and steps
per second on a model so small that the loop's own overhead is most of a step.

Each measurement runs `tunelab.training.loop.train` in a fresh process, under `torchrun` with
two gloo processes when `--ranks 2`, with a checkpoint-free run folder (heartbeat and history
written as in a real run). It counts, per optimizer step:

- reads of a tensor to the host made by tunelab's own code (`item`, `tolist`, `float()`,
  `int()`, `bool()` called from a file under tunelab's package; on a GPU each one waits for the
  device to finish everything queued before it);
- collectives (`torch.distributed.all_reduce`, `all_gather_object`, `broadcast` calls);
- milliseconds per step, from the second step to the last.

`--before REV` measures the same in a git worktree of REV (the loop as it was), alternating
with this tree, in one run:

    .venv/bin/python bench/loop_overhead.py --before 14d87c6 --ranks 1
    .venv/bin/python bench/loop_overhead.py --before 14d87c6 --ranks 2

On a GPU (one process; `--before-src` where the copy has no git history):

    git archive 14d87c6 src | tar -x -C .before
    python bench/loop_overhead.py --before-src .before/src --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")
HOST_SIDE = {"example_order"}  # host tensors by design: the seeded order of the examples
COLLECTIVES = ("all_reduce", "all_gather_object", "broadcast", "broadcast_object_list")


def child(steps: int, micro: int, accumulation: int, device_name: str) -> dict:
    """One measurement, in this process (a rank of torchrun's, or alone)."""
    import time

    import torch

    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())

    from tunelab.core.spec import TrainingSpec
    from tunelab.modeling.render import Encoded
    from tunelab.training.distributed import joined, world_from_env

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
    examples = [
        Encoded(str(i), torch.randint(1, 64, (8,), generator=gen).tolist(), i % 4, False)
        for i in range(4 * per_rank * world.size)
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
        model, _ = world.wrap(Tiny().to(device), device, "fp32")
        import torch.distributed as dist

        if world.distributed:
            for name in COLLECTIVES:
                setattr(dist, name, counting("collectives", getattr(dist, name)))
        start = time.perf_counter()
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
        "step_ms": 1000 * per_step,
        "seconds": seconds,
        "final_loss": out["history"][-1]["loss"],
    }


def measure(src: Path, ranks: int, steps: int, micro: int, accumulation: int, device: str) -> dict:
    """One fresh-process measurement of the loop under `src` (rank 0's figures)."""
    path = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = os.environ | {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    args = ["--child", str(steps), str(micro), str(accumulation), device]
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
        print(json.dumps(child(steps, micro, accumulation, sys.argv[5])), flush=True)
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
                r = measure(src, args.ranks, args.steps, args.micro, args.accumulation, args.device)
                rows.append({"tree": name, "repeat": repeat + 1, **r})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT)
    print(
        f"\n{args.ranks} process(es) on {args.device}, {args.steps} steps of "
        f"{args.accumulation} microbatches of {args.micro}\n"
    )
    print("| tree | # | host reads / step | collectives / step | ms / step | final loss |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['tree']} | {r['repeat']} | {r['reads_per_step']:.2f} | "
            f"{r['collectives_per_step']:.2f} | {r['step_ms']:.2f} | {r['final_loss']:.6f} |"
        )


if __name__ == "__main__":
    main()
