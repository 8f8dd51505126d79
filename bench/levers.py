"""Speed levers, each measured as its own ablation: on against off, side by side in one run.

Two workloads, each a tunelab lab trained by the run's own code (`stages.run.variant.prepare`,
`build_model`, `training.loop.train`), every run in a fresh process:

- `classify`: BBC News on all-MiniLM-L6-v2 (the stratified split of bench/vs_hf_trainer.py,
  seed 0), tunelab's classification defaults (LoRA r 8 on every linear layer of the blocks)
  with a global batch of 16 cut into 4 microbatches of 4, one epoch. After training, the
  validation split under the shared protocol gives macro-F1.
- `extract`: the extraction demo's lab (SmolLM2-135M, LoRA, manual pages -> JSON), its own
  settings (8 pages a step as 2 microbatches of 4), `--extract-steps` steps. No evaluation
  (generation would dwarf the training): the training loss says whether the numbers moved.

Per workload the reference (every lever off) runs first and last, each lever between them with
that one field changed (`key=value` over the lab's spec, as `tunelab ablate` applies it). A
lever's ratio is its tokens/s over the mean of the two reference runs'; > 1 means faster.

    .venv/bin/python bench/levers.py                       # both workloads, ~25 min on 2 cores
    .venv/bin/python bench/levers.py --workloads classify --base method.head_init=probe \
        --levers training.group_by_length=true training.precision=auto
    .venv/bin/python bench/levers.py --eval-order          # evaluation: length against split order
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

LEVERS = {
    "classify": [
        "training.group_by_length=true",
        "model.attention=eager",
        "training.threads=1",
        "training.compile=true",
        "training.precision=auto",
    ],
    "extract": [
        "training.group_by_length=true",
        "training.packing=true",
        "model.attention=eager",
        "training.precision=auto",
    ],
}
CLASSIFY = {"training.global_batch": 16, "training.microbatch": 4}


def build(workload: str, root: Path, n_train: int) -> Path:
    """The workload's lab (built once; reused when it is there)."""
    lab = root / workload
    if (lab / ".tunelab").exists():
        return lab
    if workload == "extract":
        from check_time import build_lab

        return build_lab("extraction", lab)
    from vs_hf_trainer_setup import build_lab as build_bbc
    from vs_hf_trainer_setup import (
        choose_split,
        distinct,
        lab_spec,
        read_corpus,
        template_sections,
        write_data,
    )

    from tunelab.demo.assets import bbc_news, minilm

    pool, _ = distinct(read_corpus(bbc_news())[0])
    splits = choose_split(pool, n_train, 300, 0)
    files = write_data(splits, root / "data")
    build_bbc(lab, lab_spec(files, minilm(), template_sections()), splits)
    return lab


def worker(job: dict) -> dict:
    """One training of the lab with the job's overrides (this process is fresh)."""
    from tunelab.core.lab import open_lab
    from tunelab.core.overrides import parse_value
    from tunelab.modeling.head_init import init_from_probe
    from tunelab.stages.run.variant import build_model, prepare
    from tunelab.training.evaluate import evaluate_rows
    from tunelab.training.loop import train

    overrides = {k: parse_value(v) if isinstance(v, str) else v for k, v in job["base"].items()}
    for pair in job["overrides"]:
        key, value = pair.split("=", 1)
        overrides[key] = parse_value(value)
    lab = open_lab(Path(job["lab"]), overrides, device="cpu")
    version = lab.store.current_data()
    renderer, train_set, _, _ = prepare(lab, version, "bench")
    model, _ = build_model(lab, renderer.labels, version)
    if lab.spec.method.head_init == "probe":  # LP-FT, as `run_variant` starts it
        batch, pad = lab.spec.evaluation.batch_size, renderer.pad_id
        init_from_probe(model, train_set, renderer.labels, batch, pad, lab.device)
    training = train(model, train_set, lab.spec.training, lab.device, renderer.pad_id)
    out = {k: training[k] for k in ("steps", "tokens", "seconds", "tokens_per_s", "final_loss")}
    out |= {"peak_mb": training["peak_memory_mb"], "levers": training["levers"]}
    out["precision"] = training["precision"]
    out["attention"] = getattr(model.config, "_attn_implementation", None)
    if job["evaluate"]:
        e = lab.spec.evaluation
        rows = lab.store.read_split(version, "validation")
        device = lab.device
        _, metrics = evaluate_rows(model, renderer, rows, e.batch_size, e.max_new_tokens, device)
        out["macro_f1"] = metrics["macro_f1"]
    return out


def eval_order(job: dict) -> dict:
    """Evaluation in length order (what `evaluate_rows` does) against split order, alternated
    twice on the lab's untrained model: seconds each, and whether the predictions agree."""
    import time

    import tunelab.training.evaluate as evaluate
    from tunelab.core.lab import open_lab
    from tunelab.stages.run.variant import build_model, prepare

    lab = open_lab(Path(job["lab"]), {}, device="cpu")
    version = lab.store.current_data()
    renderer, _, _, _ = prepare(lab, version, "bench")
    model, _ = build_model(lab, renderer.labels, version)
    rows = lab.store.read_split(version, "validation")
    e, by_length = lab.spec.evaluation, evaluate._length_order
    out: dict = {"length": [], "split": [], "rows": len(rows), "batch": e.batch_size}
    answers = {}
    for order in ("length", "split", "length", "split"):
        evaluate._length_order = by_length if order == "length" else lambda n: list(range(len(n)))
        start = time.perf_counter()
        predictions, _ = evaluate.evaluate_rows(
            model, renderer, rows, e.batch_size, e.max_new_tokens, lab.device
        )
        out[order].append(round(time.perf_counter() - start, 2))
        answers[order] = [p["predicted"] for p in predictions]
    out["same_predictions"] = answers["length"] == answers["split"]
    return out


def run(job: dict) -> dict:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TUNELAB_DEVICE": "cpu"}
    command = [sys.executable, __file__, "_worker", json.dumps(job)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"{job['overrides']} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench(args) -> list[dict]:
    rows = []
    for workload in args.workloads:
        lab = build(workload, args.root, args.train)
        base = CLASSIFY if workload == "classify" else {"training.budget.steps": args.extract_steps}
        base = base | dict(pair.split("=", 1) for pair in args.base)
        levers = args.levers or LEVERS[workload]
        plan = [[], *([lever] for lever in levers), []]
        for i, overrides in enumerate(plan):
            job = {
                "lab": str(lab),
                "base": base,
                "overrides": overrides,
                "evaluate": workload == "classify",
            }
            result = run(job)
            name = overrides[0] if overrides else f"reference ({'first' if i == 0 else 'last'})"
            print(f"{workload} {name}: {result['tokens_per_s']:,.0f} tok/s", file=sys.stderr)
            rows.append({"workload": workload, "lever": name, **result})
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| workload | lever | train s | tok/s | ratio | peak MiB | final loss | macro-F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        refs = [r for r in mine if r["lever"].startswith("reference")]
        ref = sum(r["tokens_per_s"] for r in refs) / len(refs)
        for r in mine:
            ratio = "" if r in refs else f"{r['tokens_per_s'] / ref:.2f}x"
            f1 = f"{100 * r['macro_f1']:.1f}" if "macro_f1" in r else "–"
            note = ""
            if r["lever"] == "training.precision=auto":
                note = f" (chose {r['precision']['used']})"
            lines.append(
                f"| {workload} | {r['lever']}{note} | {r['seconds']:.1f} | "
                f"{r['tokens_per_s']:,.0f} | {ratio} | {r['peak_mb']:,.0f} | "
                f"{r['final_loss']:.4f} | {f1} |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv[:1] == ["_worker"]:
        job = json.loads(argv[1])
        print(json.dumps(eval_order(job) if job.get("eval_order") else worker(job)))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="classify,extract")
    p.add_argument("--train", type=int, default=400, help="classify: train rows (400)")
    p.add_argument("--extract-steps", type=int, default=6, help="extract: steps per run (6)")
    p.add_argument("--base", nargs="*", default=[], help="key=value over every run's spec")
    p.add_argument("--levers", nargs="*", help="key=value levers (default: the workload's)")
    p.add_argument("--root", type=Path, help="where the labs go (kept; default a temp dir)")
    p.add_argument("--json", type=Path, help="also write the rows here")
    p.add_argument(
        "--eval-order", action="store_true", help="time evaluation in length and split order"
    )
    args = p.parse_args(argv)
    args.workloads = args.workloads.split(",")
    args.root = (args.root or Path(tempfile.mkdtemp(prefix="levers-"))).resolve()
    if args.eval_order:
        lab = build("classify", args.root, args.train)
        print(json.dumps(run({"lab": str(lab), "eval_order": True, "overrides": []})))
        return
    rows = bench(args)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
