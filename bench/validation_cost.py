"""What one validation-loss measurement (`training.validate_every`) costs, in training steps.

It loads a completed run of a lab (its trained weights, the lab's renderer and validation
split), times `Validation.measure` on the whole validation split (after one untimed warm-up),
and sets it beside the run's own seconds per training step, so the cadence a user picks can be
read as a share of the training time:

    .venv/bin/python bench/validation_cost.py demo-lab/extraction r002-lora
    .venv/bin/python bench/validation_cost.py demo-lab/classification r003-lora

Run it on an idle machine; the ratio is what travels between machines, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", type=Path)
    parser.add_argument("run")
    args = parser.parse_args()

    from tunelab.core.lab import open_lab
    from tunelab.modeling.model import load_trained
    from tunelab.modeling.render import lab_renderer
    from tunelab.training.validate import Validation

    lab = open_lab(args.lab)
    record = lab.store.read_record(args.run)
    version = record["data_version"]
    labels = lab.store.data_manifest(version)["labels"]
    renderer = lab_renderer(lab.spec, lab.path, labels, version)
    classifier = lab.spec.model_kind != "causal"
    weights = lab.store.run_dir(args.run) / record["weights"]["dir"]
    model = load_trained(
        lab.spec.model,
        lab.path,
        weights,
        lab.device,
        labels if classifier else None,
        lab.spec.model_kind,
    )
    examples, _ = renderer.training(lab.store.read_split(version, "validation"))
    validation = Validation(examples, 1, batch_size=lab.spec.evaluation.batch_size)
    validation.measure(model, lab.device, renderer.pad_id)  # warm-up
    start = time.perf_counter()
    loss = validation.measure(model, lab.device, renderer.pad_id)
    seconds = time.perf_counter() - start
    step_s = record["training"]["seconds"] / record["training"]["steps"]
    print(
        json.dumps(
            {
                "lab": str(args.lab),
                "run": args.run,
                "validation_examples": len(examples),
                "batch_size": lab.spec.evaluation.batch_size,
                "measure_s": round(seconds, 2),
                "validation_loss": round(loss, 4),
                "training_step_s": round(step_s, 2),
                "measure_in_steps": round(seconds / step_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
