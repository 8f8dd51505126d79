"""`tunelab export RUN`: the handover bundle, bound to the exact base model it was trained on.

A bundle is a folder a team can take away and open with the tools they know:

    adapter_config.json, adapter_model.safetensors   LoRA, in PEFT's own format
      (or config.json, model.safetensors             full fine-tuning)
    merged/                                          --merge: LoRA folded into the weights
    tokenizer files, template.json                   what the model was trained with (a
                                                     generative run's: the decoding too)
      (preprocessor_config.json                      an image classifier: its processor, and
                                                     template.json its recorded preprocessing)
    base/                                            a model trained from scratch: its base,
                                                     config.json and tokenizer/, hashed
    tunelab.json                                     base identity, spec, data manifest,
                                                     environment, comparison, final, test
                                                     access log, observed limitations
    verify/sample.jsonl                              validation rows and the run's predictions
    verify/images/                                   an image lab: the sample's images
    README.md                                        the model card (Hugging Face front matter)
    SHA256SUMS                                       every file above

The limitations are derived from the records, never written by hand (`limitations.py`).
Each export is recorded in `.tunelab/exports/` with an event. The bundle folder appears only
when it is whole; the hidden temporary folders that killed exports left in `bundles/` are
removed by the next export, which names them in its result (`leftovers.py`).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tunelab.core.chain import verify
from tunelab.core.digest import sha256_file
from tunelab.core.env import fingerprint
from tunelab.core.errors import Interrupted, no_permission, stop_cause
from tunelab.core.exports import BUNDLE_FILE, SCRATCH_BASE, recorded_export
from tunelab.core.lab import Lab, recorded_spec
from tunelab.core.layout import BUNDLES, EXPORTS, FINALS, PREDICTIONS, chained_from
from tunelab.core.run_files import require_intact_run
from tunelab.core.seal import final_accesses
from tunelab.core.store import (
    atomic_write_json,
    atomic_write_text,
    now,
    read_jsonl,
    write_jsonl,
)
from tunelab.core.sums import SUMS, write_sums
from tunelab.stages.export.card import model_card
from tunelab.stages.export.exportable import ExportError, check_exportable
from tunelab.stages.export.leftovers import remove_leftovers, writing
from tunelab.stages.export.limitations import limitations
from tunelab.stages.export.serving import serving
from tunelab.stages.export.template_file import template_record
from tunelab.stages.export.truncation import truncation

WHOLE_SPLIT = {"encoder": 500, "image": 200, "causal": 100}
"""Up to this many validation rows, the bundle stores them all: `verify` then predicts them in
the run's own batches, so on the same device in float32 every prediction must agree exactly.
A generative run stores one whole evaluation batch instead (`first_generation_batch`): the same
exactness, at a fraction of the decoding."""
SAMPLE = {"encoder": 32, "image": 32, "causal": 16}
"""Rows stored from a larger split (other batches: a classifier's confidence may move a
little, see `verify.CONFIDENCE_TOLERANCE`)."""


def export_run(
    lab: Lab,
    run_id: str,
    out: Path | None = None,
    merge: bool = False,
    gguf: str | None = None,
    base: Path | None = None,
) -> dict:
    """Write the bundle of `run_id` (its base at `base` when it moved: `--base`) and return
    what it holds.

    The bundle is written into a hidden folder beside `out` and renamed into place when it is
    whole (`atomic_dir`): a kill, an error or Ctrl-C never leaves a bundle that looks complete.
    Such folders left in the lab's `bundles/` by killed exports are removed first and named in
    the result (`leftovers_removed`).
    """
    start = time.perf_counter()
    store = lab.store
    store.require_intact_log("export")
    record = store.read_record(run_id)
    check_exportable(record, store.run_dir(run_id))
    require_intact_run(store.run_dir(run_id), record, "export")
    spec = recorded_spec(record, base)
    # recorded absolute: a relative --out was read from the shell's folder, not the lab's
    bundle = Path(out).expanduser().resolve() if out else lab.path / BUNDLES / run_id
    if bundle.exists() and not bundle.is_dir():
        raise ExportError(f"{bundle} is a file, not a folder; give --out a folder to write into.")
    if bundle.exists() and any(bundle.iterdir()):
        unrecorded = (bundle / BUNDLE_FILE).is_file() and not recorded_export(store, bundle)
        why = (
            " It holds a bundle that no export record names: an export stopped after writing "
            "it, before recording it. Remove it and export again."
            if unrecorded
            else ""
        )
        raise ExportError(
            f"{bundle} exists and is not empty; give another --out"
            f"{f' (--out {bundle}-merged)' * merge} or remove it.{why}"
        )
    removed = remove_leftovers(lab.path / BUNDLES)
    if bundle.parent != lab.path / BUNDLES:  # --out elsewhere: a killed export's of this bundle
        removed += remove_leftovers(bundle.parent, bundle.name)
    try:
        with writing(bundle) as folder:
            info, base = _write_bundle(folder, lab, record, spec, merge, gguf, bundle)
            sums = write_sums(folder)
            digest = sha256_file(folder / SUMS)  # the whole bundle in one hash
    except KeyboardInterrupt as err:
        raise Interrupted(
            stop_cause(err),
            f"no bundle was written (what was begun is removed); run `tunelab export {run_id}"
            f"{f' --out {out}' if out else ''}` again.",
            run=run_id,
        ) from err
    logged = _export_lines(store, bundle)
    try:
        result = {
            "run": run_id,
            "bundle": str(bundle),
            "files": sorted(sums),
            "sums_sha256": digest,
            "merged": merge,
            "merge_check": info["merge_check"],
            "serving": info["serving"],
            "gguf": info.get("gguf"),
            "base_model": {k: base[k] for k in ("name", "path", "weights_sha256")},
            "limitations": info["limitations"],
            "leftovers_removed": removed,
            "created": info["created"],
            "seconds": round(time.perf_counter() - start, 2),
        }
        _record(store, result)
    except KeyboardInterrupt as err:  # the bundle is whole: recorded, or not there at all
        if _export_lines(store, bundle) > logged:
            raise  # its record's line is written (a cut rename is finished by the next command)
        shutil.rmtree(bundle, ignore_errors=True)
        raise Interrupted(
            stop_cause(err),
            f"no bundle was recorded (the one written is removed); run `tunelab export {run_id}"
            f"{f' --out {out}' if out else ''}` again.",
            run=run_id,
        ) from err
    except OSError as err:  # a read-only lab: a bundle no record names is not left behind
        if no_permission(err) is not None:
            shutil.rmtree(bundle, ignore_errors=True)
        raise
    return result


def _log_anchor(store) -> dict:
    """The lab's event log as this bundle saw it: its lines and the hash of the last one (the
    chain's head), so a later rewrite of the lab's past can be told from the bundle."""
    state = verify(store.log_path, chained_from(store.format))
    return {"lines": state["lines"], "head": state["head"], "unchained": state["unchained"]}


def _verify_sample(spec, lab: Lab, rows: list[dict], tokenizer, labels: list[str]) -> list[str]:
    """Ids of the validation rows `verify` predicts again, in the split's order."""
    ids = [r["id"] for r in rows]
    pretrain = spec.task.type == "pretrain"  # documents scored alone: no generation batch
    if spec.task.generative and not pretrain and len(rows) > spec.evaluation.batch_size:
        from tunelab.modeling.render import make_renderer
        from tunelab.training.evaluate import first_generation_batch

        renderer = make_renderer(spec, tokenizer, labels, lab.path)
        return [ids[i] for i in first_generation_batch(renderer, rows, spec.evaluation.batch_size)]
    kind = spec.model_kind
    return ids if len(ids) <= WHOLE_SPLIT[kind] else ids[: SAMPLE[kind]]


def _write_bundle(
    bundle: Path,
    lab: Lab,
    record: dict,
    spec,
    merge: bool,
    gguf: str | None = None,
    final: Path | None = None,
) -> tuple[dict, dict]:
    """Every file of the bundle but SHA256SUMS, written into `bundle` (renamed to `final` once
    whole); returns `tunelab.json`'s content and the base model's identity."""
    from tunelab.modeling.image_model import load_processor
    from tunelab.modeling.model import load_tokenizer
    from tunelab.tasks import load_schema

    store, run_id = lab.store, record["id"]
    version = record["data_version"]
    weights = store.run_dir(run_id) / record["weights"]["dir"]
    for file in sorted(weights.iterdir()):
        if file.name != "README.md":  # PEFT's stub card; ours replaces it
            shutil.copy2(file, bundle / file.name)
    base = _base(bundle, lab, record, spec)
    _bind_adapter(bundle, base)
    if spec.images:  # the base's image processor, as the run used it
        tokenizer = load_processor(spec.model, lab.path)
    else:
        tokenizer = load_tokenizer(spec.model, lab.path, version)
    tokenizer.save_pretrained(bundle)
    resolved = record["spec"] | {
        "task": record["spec"]["task"] | _inline_schema(spec, load_schema, lab.path)
    }
    template = template_record(spec, tokenizer, record)
    atomic_write_json(bundle / "template.json", template)

    manifest = store.data_manifest(version)
    val_rows = {r["id"]: r for r in store.read_split(version, "validation")}
    predictions = read_jsonl(store.run_dir(run_id) / PREDICTIONS)
    by_id = {p["id"]: p for p in predictions}
    kept = _verify_sample(spec, lab, list(val_rows.values()), tokenizer, manifest["labels"])
    sample = [{"row": val_rows[i], "prediction": by_id[i]} for i in kept]  # the split's order
    write_jsonl(bundle / "verify" / "sample.jsonl", sample)
    if spec.images:  # the sample's images, under the same names, so verify reads them there
        for s in sample:
            target = bundle / "verify" / s["row"]["image"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store.data_dir(version) / s["row"]["image"], target)

    comparison = _comparison_of(store, run_id)
    finals = [f for f in _finals(store) if f["run"] == run_id]
    info = {
        "format": "tunelab-bundle/1",
        "run": run_id,
        "created": now(),
        "lab_log": _log_anchor(store),
        "method": spec.method.type,
        "kind": spec.model_kind,
        "task": spec.task.type,
        "labels": manifest["labels"],
        "preprocessing": record.get("preprocessing"),
        "decoding": template.get("decoding"),
        "base_model": base,
        "spec": resolved,
        "data_version": version,
        "data_manifest": handed_manifest(manifest),
        "training": {k: v for k, v in record["training"].items() if k != "history"},
        "validation_metrics": record["metrics"],
        "environment": record.get("env"),
        "exported_with": fingerprint(lab.device),
        "comparison": comparison,
        "final": finals[-1] if finals else None,
        "test_access_log": final_accesses(store),
        "limitations": limitations(
            record,
            comparison,
            predictions,
            val_rows,
            truncation(spec, lab, manifest, val_rows, tokenizer),
        ),
        "merge_check": None,
    }
    if merge:
        info["merge_check"] = _merge(bundle, spec, lab, info, sample)
    info["serving"] = serving(bundle, spec.method.type, merge, record["id"], lab.path, final)
    if gguf:
        from tunelab.stages.export.gguf_file import write_bundle_gguf

        name = f"{record['id']} ({info['base_model']['name']}, fine-tuned by tunelab)"
        info["gguf"] = write_bundle_gguf(bundle, spec, lab, gguf, name)
    atomic_write_json(bundle / BUNDLE_FILE, info)
    atomic_write_text(bundle / "README.md", model_card(info))
    return info, base


def handed_manifest(manifest: dict) -> dict:
    """The data version's manifest as a bundle hands it over: each source as the lab names it
    (relative to the lab), its hashes and counts, without where the exporter's machine read it
    (`resolved`, `links`: absolute paths, a home folder and user name among them, wrong on any
    other machine)."""
    sources = [
        {k: v for k, v in s.items() if k not in ("resolved", "links")} if isinstance(s, dict) else s
        for s in manifest.get("sources") or []
    ]
    return manifest | {"sources": sources} if "sources" in manifest else manifest


def _base(bundle: Path, lab: Lab, record: dict, spec) -> dict:
    """The identity of the run's base. A model trained from scratch has no weights to bind to:
    its base, the config and the tokenizer of the run's data version, is written into `base/`
    and must hash as the run recorded it."""
    from tunelab.modeling.identity import identity, require_recorded_base
    from tunelab.tasks.pretrain import sequence_length

    version = record["data_version"]
    length = sequence_length(spec) if spec.task.type == "pretrain" else None
    if not spec.model.scratch:  # the very base it trained on (a changed one had verified)
        return require_recorded_base(spec.model, lab.path, record) or identity(spec.model, lab.path)
    from tunelab.modeling.scratch_identity import write_base

    base = identity(spec.model, lab.path, length, version)
    recorded = record["base_model"]["weights_sha256"]
    if base["weights_sha256"] != recorded:
        raise ExportError(
            f"{record['id']} was trained from scratch on a config and tokenizer hashing to "
            f"{recorded}, but the lab now gives {base['weights_sha256']} for data version "
            f"{version} (the tokenizer in .tunelab/cache/tokenizers or model.tokenizer changed):"
            " restore it, or train the run again."
        )
    write_base(spec.model, lab.path, version, base, bundle / SCRATCH_BASE)
    return base


def _bind_adapter(bundle: Path, base: dict) -> None:
    """PEFT's config names the base; tunelab also records its revision there."""
    config = bundle / "adapter_config.json"
    if not config.exists():
        return
    raw = json.loads(config.read_text(encoding="utf-8"))
    raw["base_model_name_or_path"] = base["path"]
    raw["revision"] = base.get("revision")
    atomic_write_json(config, raw)


def _inline_schema(spec, load_schema, lab_path: Path) -> dict:
    """The task's JSON Schema inlined, so the bundle does not depend on the lab's files."""
    schema = load_schema(spec.task, lab_path)
    return {"json_schema": schema} if schema is not None else {}


def _comparison_of(store, run_id: str) -> dict | None:
    """This run's row of the newest comparison that judged it, with that comparison's id
    and rules."""
    found = store.judgement(run_id, strongest=True) or store.judgement(run_id)
    if found is None:
        return None
    record, row = found
    return {
        "id": record["id"],
        "reference": record["reference"],
        "rules": record["rules"],
        "row": row,
    }


def _finals(store) -> list[dict]:
    """Every final's result, in the order of their numbers (`2-…` before `10-…`)."""
    return store.records(FINALS)


def _merge(bundle: Path, spec, lab: Lab, info: dict, sample: list[dict]) -> dict:
    """LoRA folded into the base weights (`merged/`), and a check that the merged model and
    the adapter give the same outputs on the stored sample."""
    from tunelab.stages.export.merge import merge_and_check

    if spec.method.type != "lora":
        raise ExportError(
            "--merge folds a LoRA adapter into its base; this run is full fine-tuning, its "
            "weights already whole: export it without --merge"
        )
    return merge_and_check(bundle, spec, lab, info["labels"], sample)


def _export_lines(store, bundle: Path) -> int:
    """The log's lines that recorded an export into `bundle`."""
    return sum(
        e.get("event") == "export" and e.get("bundle") == str(bundle) for e in store.events()
    )


def _record(store, result: dict) -> None:
    def build(path):
        result["file"] = str(path.relative_to(store.lab))
        result.setdefault("created", now())
        return result | {"verified": None}

    store.save_new(
        EXPORTS,
        build,
        "export",
        suffix=f"-{result['run']}",
        width=0,
        run=result["run"],
        bundle=result["bundle"],
    )
