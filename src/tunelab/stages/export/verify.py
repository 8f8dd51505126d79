"""`tunelab verify BUNDLE`: reload a bundle in a fresh process and reproduce its predictions.

The checklist:
- `files`: every file listed in SHA256SUMS is there with its hash, and no file is unlisted (a
  tampered or missing file is named);
- `base`: the base model (`--base`, or the recorded path) has the recorded weight hashes; a
  model trained from scratch, its config and tokenizer (the bundle's `base/`) their hashes;
- `load`: the model loads the way a user loads it (`tunelab.load_bundle`);
- `preprocessing` (an image classifier): the bundle's image processor and the base's own do
  what the run recorded (`modeling.pixels.preprocessing`), or the difference is named;
- `predictions`: the stored validation sample is predicted again and compared with the run's
  own predictions: exactly on the device type the run was evaluated on in float32; on another
  device or dtype up to DEVICE_TOLERANCE of the examples may differ (said in the result). A
  language model's documents (task pretrain) are scored again, their NLL equal within
  NLL_TOLERANCE.

`verify_bundle` runs `python -m tunelab.stages.export.verify` in a new interpreter, so nothing
of the exporting process (a model in memory, a patched module) can make a bundle look sound.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
from pathlib import Path

from tunelab.core import sums as contents
from tunelab.core.env import child_env, run_child
from tunelab.core.errors import TunelabError
from tunelab.stages.export.gguf_file import GGUF_DIR, GGUF_FILE
from tunelab.stages.export.load import check_base, default_base, is_scratch, read_bundle
from tunelab.stages.export.serving import MERGED_CLASS
from tunelab.stages.export.verify_gguf import check_gguf

DEVICE_TOLERANCE = 0.05
"""Share of the sample that may be predicted differently on another device type or dtype."""
TIMEOUT_S = 1800


def item(name: str, passed: bool, detail: str, **data) -> dict:
    """One line of the checklist; one that did not run (`not_checked`) has `passed` null."""
    outcome = None if data.get("not_checked") else bool(passed)
    return {"name": name, "passed": outcome, "detail": detail, **data}


def verify_bundle(bundle: Path, base: Path | None = None, device: str = "cpu") -> dict:
    """Verify `bundle` in a fresh Python process; returns its checklist."""
    bundle = Path(bundle).resolve()
    read_bundle(bundle)  # not a bundle at all: a usage error, before any process starts
    command = [sys.executable, "-m", "tunelab.stages.export.verify", str(bundle), device]
    if base:
        command.append(str(Path(base).resolve()))
    done = run_child(
        command,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=TIMEOUT_S,
    )
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        how = f"exited {done.returncode}"
        if done.returncode < 0:
            name = signal.Signals(-done.returncode).name
            oom = " (most often the out-of-memory killer: free memory and verify again)"
            how = f"was killed by {name}{oom if name == 'SIGKILL' else ''}"
        raise RuntimeError(
            f"the verify process {how} without a result; its last words: {done.stderr[-2000:]}"
        ) from None
    return result | {"process": {"returncode": done.returncode, "fresh": True}}


def run_checks(bundle: Path, device: str, base: Path | None) -> dict:
    start = time.perf_counter()
    info = read_bundle(bundle)
    base = Path(base or default_base(info, bundle))
    items = [check_files(bundle)]
    files = items[0]
    items.append(_guarded("base", lambda: _base(info, base)))
    # a listing that points outside the bundle: nothing it lists is opened, merged/ and gguf/
    # included; missing files: a load would fail on them, and say something else
    outside = (  # missing, unreadable, or listing a path outside the bundle: `files` says which
        "SHA256SUMS cannot be followed (see files), so nothing it lists is opened"
    )
    loaded: dict = {}
    if files.get("unsafe"):
        items.append(_not_run("load", outside))
    elif files.get("missing"):
        missing = ", ".join(files["missing"])
        items.append(_not_run("load", f"listed files are missing ({missing}); see files"))
    elif items[-1]["passed"]:
        items.append(_guarded("load", lambda: _load(bundle, base, device, loaded)))
    if loaded and info["kind"] == "image":
        items.append(_guarded("preprocessing", lambda: _preprocessing(info, loaded, base)))
    if loaded:
        items.append(_guarded("predictions", lambda: _predictions(bundle, info, loaded, device)))
    forms = (  # the servable form, with transformers alone; llama.cpp's form, read back
        ("merged", (bundle / "merged").is_dir(), lambda: _merged(bundle, info, device)),
        (
            "gguf",
            (bundle / GGUF_DIR / GGUF_FILE).is_file(),
            lambda: check_gguf(bundle, info, device, _predictions, item),
        ),
    )
    for name, present, check in forms:
        if present:
            items.append(_not_run(name, outside) if files.get("unsafe") else _guarded(name, check))
    names = [i["name"] for i in items]
    later_checks = ("base", "load", *(("preprocessing",) if info["kind"] == "image" else ()))
    for later in (*later_checks, "predictions"):
        if later not in names:
            items.append(_not_run(later, "an earlier check failed"))
    fixable = [
        i["name"] for i in items if i["name"] in FIXES and not (i["passed"] or i.get("not_checked"))
    ]
    return {
        "bundle": str(bundle),
        "run": info["run"],
        "base": str(base),
        # a check that did not run (`not_checked`: llama.cpp not built) is said, not passed
        "passed": all(i["passed"] or i.get("not_checked") for i in items),
        "not_checked": [f"{i['name']} ({i['not_checked']})" for i in items if i.get("not_checked")],
        "items": items,
        "fix": FIXES[fixable[0]].format(run=info["run"]) if fixable else None,
        "seconds": round(time.perf_counter() - start, 2),
    }


FIXES = {
    "files": "the bundle is not as it was exported: get it again from where it came, or export "
    "the run again in its lab (`tunelab export {run}`)",
    "base": "the base was not found, or is not the one the run was trained on (the base line "
    "says which): give that exact base with --base (its name and weights' sha256 are in "
    "tunelab.json and the model card)",
}
"""What to do when verify fails, by the first failed check that says it."""


def check_files(bundle: Path) -> dict:
    """Every listed file there with its hash, none unlisted; a listing that points outside the
    bundle fails before anything listed is opened, and a link counts as changed
    (`contents`)."""
    try:
        sums = contents.listed(bundle)
    except contents.BundleError as err:
        return item("files", False, str(err), unsafe=True)
    found = contents.compare(bundle, sums)
    tampered, missing, unlisted = found["changed"], found["missing"], found["unlisted"]
    problems = [
        f"{what}: {names}"
        for what, names in (("changed", tampered), ("missing", missing), ("not listed", unlisted))
        if names
    ]
    detail = "; ".join(problems) or f"all {len(sums)} files match SHA256SUMS"
    return item("files", not problems, detail, changed=tampered, missing=missing, unlisted=unlisted)


def _not_run(name: str, why: str) -> dict:
    return item(name, False, f"not run: {why}", skipped=True)


def _guarded(name: str, check) -> dict:
    try:
        return check()
    except TunelabError as err:
        return item(name, False, str(err))
    except Exception as err:  # a broken bundle is a finding, with where it broke
        return item(
            name, False, f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-1500:]
        )


def _base(info: dict, base: Path) -> dict:
    found = check_base(info, base)
    what = "config and tokenizer" if is_scratch(info) else "weights"
    detail = f"{found['path']}: {what} sha256 {found['weights_sha256'][:16]}… as recorded"
    if differs := found.get("tokenizer_differs"):
        verb = "differs" if len(differs) == 1 else "differ"
        detail += f" ({', '.join(differs)} {verb} from the base's at export: the bundle's own used)"
    return item("base", True, detail)


def _load(bundle: Path, base: Path, device: str, loaded: dict) -> dict:
    from tunelab.stages.export.load import load_bundle

    loaded["model"], loaded["tokenizer"], _ = load_bundle(bundle, base, device)
    kind = type(loaded["model"]).__name__
    return item("load", True, f"loaded as {kind} on {device} with tunelab.load_bundle")


def _preprocessing(info: dict, loaded: dict, base: Path) -> dict:
    """An image classifier's processor, as the bundle holds it and as the base folder has it,
    against what the run recorded: a difference is named (a resize rule, a crop, a mean and
    std that are not the run's silently change every input)."""
    from transformers import AutoImageProcessor

    from tunelab.modeling.image_model import IMAGE_BACKEND
    from tunelab.modeling.pixels import differences, preprocessing

    recorded = info.get("preprocessing") or {}
    found = {
        "the bundle's processor": differences(recorded, preprocessing(loaded["tokenizer"])),
        "the base's own processor": differences(
            recorded, preprocessing(AutoImageProcessor.from_pretrained(base, backend=IMAGE_BACKEND))
        ),
    }
    problems = [f"{where}: {'; '.join(d)}" for where, d in found.items() if d]
    if not recorded:
        problems.insert(0, "the run recorded no preprocessing")
    detail = "; ".join(problems) or (
        f"{recorded['processor']} as the run recorded it, in the bundle and in the base"
    )
    return item("preprocessing", not problems, detail, differences=found)


def _predictions(bundle: Path, info: dict, loaded: dict, device: str) -> dict:
    import torch

    from tunelab.core.spec import validate_spec
    from tunelab.modeling.pixels import ImageRenderer
    from tunelab.modeling.render import make_renderer
    from tunelab.training.evaluate import evaluate_rows

    sample = [
        json.loads(line)
        for line in (bundle / "verify" / "sample.jsonl").read_text().splitlines()
        if line
    ]
    spec = validate_spec(info["spec"])
    if spec.images:  # the sample's images lie in verify/, as in the data version
        renderer = ImageRenderer(
            loaded["tokenizer"],
            spec.task,
            info["labels"],
            bundle / "verify",
            max_pixels=spec.data.images.max_pixels,
        )
    else:
        renderer = make_renderer(spec, loaded["tokenizer"], info["labels"], bundle)
    e = spec.evaluation
    rows = [s["row"] for s in sample]
    # task multilabel: the threshold the run chose on validation, applied (a sample of the
    # split must not choose its own)
    threshold = ((info.get("validation_metrics") or {}).get("threshold") or {}).get("value")
    predicted, _ = evaluate_rows(
        loaded["model"],
        renderer,
        rows,
        e.batch_size,
        e.max_new_tokens,
        torch.device(device),
        threshold if spec.task.type == "multilabel" else None,
    )
    stored = [s["prediction"] for s in sample]
    differ = [s["id"] for s, p in zip(stored, predicted, strict=True) if not _same(s, p)]
    recorded = ((info.get("environment") or {}).get("device") or {}).get("type")
    exact = recorded == torch.device(device).type and spec.model.dtype == "float32"
    allowed = 0 if exact else int(DEVICE_TOLERANCE * len(sample))
    rule = (
        "every one must (same device type, float32)"
        if exact
        else f"up to {allowed} may differ (evaluated on {recorded}, now {device})"
    )
    n = (info.get("validation_metrics") or {}).get("n")
    part = f" (the bundle's sample of the split's {n:,})" if n and n > len(sample) else ""
    detail = (
        f"{len(sample) - len(differ)} of {len(sample)} validation predictions reproduced{part}; "
        f"{rule}"
    )
    if differ:
        detail += f"; differ: {differ[:5]}"
    return item("predictions", len(differ) <= allowed, detail, differ=differ, exact=exact)


def _merged(bundle: Path, info: dict, device: str) -> dict:
    """`merged/` (`export --merge`) opened with transformers' Auto classes alone (no PEFT, no
    tunelab loader, no base folder), as a serving engine opens it, and the run's predictions
    on the stored sample reproduced from it under the same rule as the adapter's. An
    EfficientNet-Lite (`modeling/lite.py`) is the one model transformers does not know: its
    class is registered first, and the detail says so."""
    import transformers

    from tunelab.modeling.image_model import IMAGE_BACKEND
    from tunelab.modeling.safety import PICKLE_SUFFIXES, WEIGHT_SUFFIXES

    folder = bundle / "merged"
    kind = info["kind"]
    auto = getattr(transformers, MERGED_CLASS[kind])
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    how = f"transformers' {auto.__name__} alone"
    if config.get("model_type") == "efficientnet_lite":
        from tunelab.modeling.lite import register

        register()
        how += " (EfficientNet-Lite's class registered from tunelab.modeling.lite)"
    if not any(f.suffix in WEIGHT_SUFFIXES for f in folder.iterdir()):  # never a sender's pickle
        held = ", ".join(sorted(f.name for f in folder.iterdir() if f.suffix in PICKLE_SUFFIXES))
        raise TunelabError(
            f"{folder} holds no .safetensors weights{f' ({held}: pickles)' if held else ''}: "
            "tunelab opens weights from safetensors only, never a pickle a bundle carries; ask "
            "for the bundle as `tunelab export --merge` writes it"
        )
    model = auto.from_pretrained(folder, use_safetensors=True).to(device).eval()
    if kind == "image":
        inputs = transformers.AutoImageProcessor.from_pretrained(folder, backend=IMAGE_BACKEND)
    else:
        inputs = transformers.AutoTokenizer.from_pretrained(folder)
    found = _predictions(bundle, info, {"model": model, "tokenizer": inputs}, device)
    detail = f"merged/ loaded with {how}: {found['detail']}"
    return item("merged", found["passed"], detail, differ=found["differ"], exact=found["exact"])


CONFIDENCE_TOLERANCE = 1e-3
"""A classifier's confidence may move this much with the batch's padding (the run evaluated
the whole split in length-sorted batches, verify only the sample)."""
NLL_TOLERANCE = 1e-4
"""A scored document's NLL may move this much, relative to itself, when the sample's windows
are batched otherwise than the whole split's were."""


def _same(stored: dict, now: dict) -> bool:
    """The label (and its confidence, within CONFIDENCE_TOLERANCE), the generated text, or a
    scored document's NLL (within NLL_TOLERANCE of it)."""
    if "nll" in stored:
        return abs(stored["nll"] - now["nll"]) <= NLL_TOLERANCE * max(1.0, abs(stored["nll"]))
    if "predicted" in stored:
        close = abs(stored.get("confidence", 0) - now.get("confidence", 0)) <= CONFIDENCE_TOLERANCE
        return stored["predicted"] == now["predicted"] and close
    return stored.get("output") == now.get("output")


def main(argv: list[str]) -> int:
    bundle, device = Path(argv[1]), argv[2]
    base = Path(argv[3]) if len(argv) > 3 else None
    result = run_checks(bundle, device, base)
    print(json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
