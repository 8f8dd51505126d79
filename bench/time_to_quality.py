"""Time to quality: tunelab's best fine-tune against the frozen-embedding probe, and the time
it takes, beside transformers' Trainer fine-tuning the whole model, on one split in one run.

The split and model of bench/vs_hf_trainer.py (BBC News, stratified 800 train / 300
validation, seed 0, all-MiniLM-L6-v2, max length 256, batch 16, one epoch, fp32). tunelab,
through its stages' Python API in this process, in a lab of its own defaults
(`templates/classification.yaml`):

1. `baseline`: the majority class and the linear probe on frozen mean-pooled embeddings.
2. `lora-lpft`: LoRA on every linear layer, its new head started from a linear probe
   (`method.head_init: probe`, LP-FT), lr 5e-4.
3. `full-lpft`: the whole model fine-tuned from the same start, lr 5e-5.
4. `compare`: each run against the probe, paired per article (bootstrap 95% interval).

Then the Trainer's full fine-tuning (bench/vs_hf_trainer.py's `equal` settings, lr 5e-5, a new
head) in a fresh process on the same two files. Time to quality: for a fine-tune, the head's probe
(LP-FT) plus the training, without model loading or the evaluation pass; for the probe baseline,
the whole `baseline` command's wall time (it embeds validation too, so it reads high).

    .venv/bin/python bench/time_to_quality.py            # ~15 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from vs_hf_trainer import run_job  # noqa: E402
from vs_hf_trainer_report import summarise  # noqa: E402
from vs_hf_trainer_setup import (  # noqa: E402
    build_lab,
    choose_split,
    distinct,
    lab_spec,
    read_corpus,
    template_sections,
    write_data,
)

VARIANTS = {
    "lora-lpft": {"method.head_init": "probe"},
    "full-lpft": {"method": {"type": "full", "head_init": "probe"}, "training.lr": 5e-5},
}


def tunelab_side(lab_path: Path) -> dict:
    from tunelab.core.lab import open_lab
    from tunelab.stages.baseline.measure import run_baseline
    from tunelab.stages.compare.verdicts import compare
    from tunelab.stages.run.variant import run_variant

    lab = open_lab(lab_path, {}, device="cpu")
    started = time.perf_counter()
    base = run_baseline(lab)  # the majority class is instant; the probe is the time
    seconds = {r["id"]: time.perf_counter() - started for r in base["runs"] if "probe" in r["id"]}
    for name, overrides in VARIANTS.items():
        record = run_variant(open_lab(lab_path, overrides, device="cpu"), name, reason="bench")
        probe = (record["trainable"].get("head_init") or {}).get("seconds", 0.0)
        seconds[record["id"]] = probe + record["training"]["seconds"]
    result = compare(open_lab(lab_path, {}, device="cpu"))
    return {"compare": result, "seconds": seconds, "baseline": base}


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="ttq-"))).resolve()
    from tunelab.demo.assets import bbc_news, minilm

    pool, _ = distinct(read_corpus(bbc_news())[0])
    splits = choose_split(pool, 800, 300, 0)
    files = write_data(splits, work / "data")
    lab = work / "lab"
    build_lab(lab, lab_spec(files, minilm(), template_sections()), splits)
    ours = tunelab_side(lab)

    job = {
        "tool": "trainer",
        "mode": "equal",
        "method": "full",
        "repeat": 1,
        "threads": None,
        "lab": str(lab),
        "model": str(minilm()),
        "files": files,
        "output_dir": str(work / "trainer"),
        "result": str(work / "trainer.json"),
    }
    labels = sorted({r["label"] for r in splits["train"]})
    trainer = summarise(run_job(job), labels)

    rows = []
    for r in ours["compare"]["runs"]:
        vs = r.get("vs_reference") or {}
        boot = vs.get("bootstrap") or {}
        rows.append(
            {
                "run": r["id"],
                "macro_f1": r["macro_f1"],
                "delta": boot.get("delta"),
                "low": boot.get("low"),
                "high": boot.get("high"),
                "verdict": r.get("verdict"),
                "seconds": ours["seconds"].get(r["id"]),
            }
        )
    print(f"reference: {ours['compare']['reference']}")
    print("| run | macro-F1 | Δ vs probe (95% CI) | verdict | seconds to it |")
    print("|---|---|---|---|---|")
    for r in rows:
        ci = (
            f"{100 * r['delta']:+.1f} ({100 * r['low']:+.1f}, {100 * r['high']:+.1f})"
            if r["delta"] is not None
            else ""
        )
        secs = f"{r['seconds']:.0f}" if r["seconds"] else "–"
        print(f"| {r['run']} | {100 * r['macro_f1']:.1f} | {ci} | {r['verdict'] or ''} | {secs} |")
    print(
        f"| Trainer, full fine-tuning | {100 * trainer['macro_f1']:.1f} | | | "
        f"{trainer['train_s']:.0f} |"
    )
    if args.json:
        args.json.write_text(json.dumps({"tunelab": rows, "trainer": trainer}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
