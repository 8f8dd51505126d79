"""tunelab against TRL's `SFTTrainer` (+ PEFT) on the extraction demo, side by side, in one run.

The work: the extraction demo's LoRA (Debian manual pages to JSON on SmolLM2-135M-Instruct) on
the CPU. Every run is a fresh subprocess (`vs_trl_peer.py`); the tools alternate (TRL, tunelab,
TRL, tunelab, ...) so that both see the same machine load; nothing is downloaded.

The lab: the demo's own (`--lab`, e.g. one `tunelab demo extraction` made), or one built here as
the demo builds it (`tunelab.demo.extraction.SPEC` with the installed data and GGUF base, its
forgetting set, its data version). Every setting of both sides comes from that lab's spec: LoRA
r, alpha, dropout, target modules; AdamW (torch's fused kernel on both), lr, weight decay,
clipping, schedule and warmup, microbatch x accumulation, seed, steps (`--steps` overrides the
budget for both), fp32, no activation checkpointing, max length; the evaluation's batch size and
new tokens. The base: transformers' Trainer refuses to train a model loaded from a GGUF file
("quantization method does not support training") and cannot save one, so TRL loads the float32
folder tunelab dequantized the GGUF into, once, in the lab's store (`.tunelab/cache/gguf/<sha>`).

The data and the loss mask. The train split, rendered once by tunelab's renderer (chat template,
the page cut so that the answer and its end-of-turn token fit the max length), goes to TRL as a
processed prompt-completion dataset, `input_ids` + `completion_mask` (tunelab's loss mask: the
answer and `<|im_end|>`), with `completion_only_loss=True`. Not as text: TRL tokenises prompt and
completion as one string, where tunelab tokenises the filled prompt whole and the answer apart;
where those meet, a row could train on other tokens (the notes count the rows: "text path";
before tunelab tokenised the prompt whole, SmolLM2's `\\n\\n` before the page made it every
row). Before each
TRL run trains, `vs_trl_peer.check_masks` stops it unless every row's labels equal tunelab's (the
token on the loss mask, -100 elsewhere) and the first global batch TRL's collator builds equals
tunelab's `collate_causal` (ids, attention mask, labels). The schedule: transformers' cosine
warmup is s / w (the first step at lr 0), tunelab's (s + 1) / w, so TRL gets tunelab's factor
function (`create_scheduler`); the per-step rates are compared. Both tools draw the first epoch's
batches as torch.randperm from a generator seeded with the seed (accelerate's seedable sampler
and tunelab's `example_order`), so they train on the same batches (the notes compare the
per-step token counts); their dropout masks differ.

The evaluation: the first `--validation` pages of the validation split (all 60 by default),
greedy with the KV cache at the lab's batch size and new tokens, by tunelab's `evaluate_rows` on
both sides (tunelab: its run's own evaluation, restricted to those pages; TRL: the same call on
its PeftModel); this process then scores both sides' raw outputs with one function, tunelab's
`tasks.score_outputs` (exact match: every required field right; JSON valid: one JSON object).

The columns, each from the run's own subprocess (as bench/vs_hf_trainer.py): train s, the
training alone (tunelab: its record's `training.seconds`, from after the optimizer is built to
the last step; TRL: the wall time of `trainer.train()`); tok/s, non-pad tokens / train s
(tunelab: `training.tokens`; TRL: its logged `num_tokens`); peak MiB, the peak resident set
during training (VmHWM reset when it starts) and Δ MiB, that peak minus the resident set at the
start; exact match and JSON valid. Ratios: median tunelab / median TRL (train s < 1: tunelab is
faster; the goal: the same or better exact match in <= 0.70x TRL's time); metrics in points.

Time to reach. A curve from per-step evaluation is not cheap: one evaluation of the 60 pages
costs about as much as 6 training steps on two cores, so 23 more would cost about 5x the
training. Instead both sides copy their trainable (LoRA) weights after every `--curve-every`
steps (default 6; under a millisecond each, inside the timed training of both) and evaluate the
copies after training, off the clock. A level is reached at the training seconds of the first
copy (or the final weights) that scores it: the resolution is `--curve-every` steps. Per
repeat: each tool's time to the other's final exact match, and both tools' time to the best
level both reach (the lower of their best points), with the ratio. `--curve-every 0`: the final
points only.

    .venv/bin/python bench/vs_trl.py --json vs_trl.json           # 2 repeats, ~45 min, 2 cores
    .venv/bin/python bench/vs_trl.py --lab demo-lab --repeats 3  # a lab the demo made
    .venv/bin/python bench/vs_trl.py --repeats 1 --steps 2 --validation 4 --curve-every 1  # smoke

This file runs the benchmark; TRL's side and tunelab's run in vs_trl_peer.py (a fresh process
each), the numbers and tables are in vs_trl_report.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from machine import machine  # noqa: E402
from vs_hf_trainer_setup import OFFLINE  # noqa: E402
from vs_trl_report import check_same_work, markdown, notes, pct, ratios, reach, summarise  # noqa: E402

TOOLS = ("trl", "tunelab")
TITLE = "manual pages to JSON on SmolLM2-135M-Instruct (bench/vs_trl.py)"


# --- the lab -------------------------------------------------------------------------------


def demo_lab(path: Path) -> None:
    """The extraction demo's lab as the demo writes it: spec (installed data and GGUF base
    filled in) and its forgetting set."""
    from tunelab.demo.assets import manpages, smollm2_gguf
    from tunelab.demo.extraction import SPEC, news_guard
    from tunelab.demo.report import write_spec

    write_spec(path, SPEC, TITLE, {"data": manpages(), "model": smollm2_gguf()})
    news_guard(path)


def prepare(args, work: Path) -> dict:
    """The lab (given or built), its data version, the pages both tools see, the steps, the
    dequantized base folder."""
    from tunelab.core.lab import open_records_lab
    from tunelab.core.store import StoreError
    from tunelab.data import build_data
    from tunelab.modeling.model import resolve_path

    path = Path(args.lab).resolve() if args.lab else work / "lab"
    if not args.lab and not path.exists():
        demo_lab(path)
    overrides = {"training.budget": {"steps": args.steps}} if args.steps else {}
    lab = open_records_lab(path, overrides)
    spec = lab.spec
    if spec.task.type != "extraction" or spec.method.type != "lora" or spec.model.scratch:
        raise SystemExit(f"{path}: not an extraction lab with a LoRA on a pretrained base")
    if spec.method.target_modules is None:  # tunelab's default and PEFT's are not the same
        raise SystemExit(f"{path}: name method.target_modules (both tools then adapt them)")
    steps = spec.training.budget.steps
    if steps is None:
        raise SystemExit(f"{path}: the budget is not in steps; give --steps")
    data_version = None
    if args.lab:  # a lab the demo made holds its data version already
        with contextlib.suppress(StoreError):
            data_version = lab.store.current_data()
    if data_version is None:
        data_version = build_data(spec, lab.path, lab.store)["version"]
    validation = lab.store.read_split(data_version, "validation")
    every = args.curve_every
    return {
        "lab": str(path),
        "version": data_version,
        "overrides": overrides,
        "steps": steps,
        "curve_steps": list(range(every, steps, every)) if every else [],
        "train_ids": [r["id"] for r in lab.store.read_split(data_version, "train")],
        "validation_ids": [r["id"] for r in validation[: args.validation]],
        "validation_total": len(validation),
        "model": spec.model.path,
        "base": str(resolve_path(spec.model, path)),  # dequantized once, cached in the store
    }


def scorer(lab_path: str):
    """tunelab's scoring of extraction outputs (`tasks.score_outputs`), for both tools."""
    from tunelab.core.lab import open_records_lab
    from tunelab.tasks import load_schema, score_outputs

    spec = open_records_lab(Path(lab_path)).spec
    schema = load_schema(spec.task, Path(lab_path))

    def score(outputs: list[dict]) -> dict:
        metrics = score_outputs(spec.task, schema, [dict(o) for o in outputs])
        return {k: metrics[k] for k in ("exact_match", "json_valid")}

    return score


# --- one run, in a fresh subprocess --------------------------------------------------------


def run_job(job: dict) -> dict:
    """Run one job in a fresh interpreter (`vs_trl_peer.py`); its result."""
    command = [sys.executable, str(HERE / "vs_trl_peer.py"), json.dumps(job)]
    proc = subprocess.run(command, capture_output=True, text=True, env=os.environ | OFFLINE)
    if proc.returncode or not Path(job["result"]).exists():
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise SystemExit(f"{job['tool']} #{job['repeat']} failed:\n{tail}")
    return json.loads(Path(job["result"]).read_text())


# --- the benchmark -------------------------------------------------------------------------


def bench(args) -> dict:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="vs_trl-")).resolve()
    print(f"working in {work}", file=sys.stderr)
    info = machine()
    info["versions"]["trl"] = version("trl")
    prepared = prepare(args, work)
    score, rows, trl_rejected = scorer(prepared["lab"]), [], None
    for repeat in range(1, args.repeats + 1):
        for tool in TOOLS:
            print(f"#{repeat}: {tool} …", file=sys.stderr, end=" ", flush=True)
            job = {
                **{k: prepared[k] for k in ("lab", "version", "overrides", "curve_steps")},
                "validation_ids": prepared["validation_ids"],
                "tool": tool,
                "repeat": repeat,
                "threads": args.threads,
                "name": f"vs-trl-{repeat}",
                "output_dir": str(work / "trl" / str(repeat)),
                "result": str(work / "results" / f"{repeat}-{tool}.json"),
            }
            Path(job["result"]).parent.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            result = run_job(job)
            result["process_s"] = round(time.perf_counter() - started, 1)  # load, train, evaluate
            check_same_work(result, tool, prepared, trl_rejected)
            if tool == "trl":
                trl_rejected = result["rejected_train"]
            row = {"tool": tool, "repeat": repeat, **summarise(result, score)}
            print(
                f"trained in {row['train_s']:.1f} s (the whole run {result['process_s']:.0f} s), "
                f"exact match {pct(row['exact_match'])}",
                file=sys.stderr,
            )
            drop = ("outputs", "curve_outputs", "train_ids")
            rows.append(row | {"raw": {k: v for k, v in result.items() if k not in drop}})
    command = [".venv/bin/python", "bench/vs_trl.py", *sys.argv[1:]]
    return {
        "command": " ".join(shlex.quote(a) for a in command),
        "machine": info,
        "load_after": os.getloadavg()[0],
        "prepared": prepared,
        "workdir": str(work),
        "runs": rows,
        "ratios": ratios(rows),
        "reach": reach(rows),
        "notes": notes(rows, prepared),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", help="an extraction demo lab to use (default: build one in workdir)")
    p.add_argument("--repeats", type=int, default=2, help="runs per tool, alternating (2)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: the lab's budget)")
    p.add_argument("--validation", type=int, default=10**9, help="score the first N pages (all)")
    p.add_argument("--curve-every", type=int, default=6, help="copy weights every N steps (6)")
    p.add_argument("--threads", type=int, help="torch threads in every run (torch's default)")
    p.add_argument("--workdir", help="for the lab, TRL's output and results (a new temp dir)")
    p.add_argument("--json", type=Path, help="also write the whole result here")
    args = p.parse_args(argv)
    for name in ("repeats", "steps", "validation"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.curve_every < 0:
        p.error("--curve-every must be 0 (off) or more")
    return args


def main(argv: list[str]) -> None:
    args = parse(argv)
    result = bench(args)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
