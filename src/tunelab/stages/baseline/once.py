"""A baseline is measured once: one already completed with the same method and name, on the same
data version, base model (weights, config and tokenizer hashes), dtype, evaluation protocol and
rules (hypothesis and guardrails: a reference compare judges by) is not measured again. When
every baseline the lab has is already there, `tunelab baseline` is refused; `--name NAME`
records another one (`r007-probe-NAME`) on purpose. This is read from the records and the base's
identity alone (the hashes of its files), without torch, so the command refuses a second
identical measurement before any model code loads (it took 6.5 s when this came after the
stage's imports)."""

from __future__ import annotations

import json

from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.run_names import check_run_name
from tunelab.core.sections import recorded_rules
from tunelab.modeling.identity import identity
from tunelab.training.protocol import protocol

BASELINES = {
    "encoder": ("majority", "probe"),
    "image": ("majority", "probe"),
    "causal": ("zero-shot",),
}
"""The baselines of each model kind, in the order they are measured."""
IDENTITY_LOCATION = ("path", "name")
"""Identity fields that say where the base model is, not what it is."""


class DuplicateBaselineError(TunelabError):
    """Every baseline of the lab is already recorded under the same conditions."""


def run_name(method: str, name: str | None) -> str:
    """A baseline's run name: its method, then `-NAME` when given one."""
    return method if name is None else f"{method}-{name}"


def not_measured_yet(lab: Lab, name: str | None) -> tuple[dict, dict[str, dict]]:
    """The base's identity and the baselines already measured as these would be
    (`identical_baselines`); refused (DuplicateBaselineError) when every one was."""
    if name is not None:  # as the runs are named: `majority-NAME`, the longest method first
        longest = max(BASELINES[lab.spec.model_kind], key=len)
        check_run_name(run_name(longest, name), given=name)
    version = lab.data_version
    base = identity(lab.spec.model, lab.path, pack_length(lab.spec), version)
    found = identical_baselines(lab, version, base, name)
    already = [found[m] for m in BASELINES[lab.spec.model_kind] if m in found]
    if len(already) == len(BASELINES[lab.spec.model_kind]):
        raise DuplicateBaselineError(_duplicate_message(already, version, base))
    return base, found


def pack_length(spec) -> int | None:
    """The sequence length a pretrain lab packs to (a scratch base's identity holds it)."""
    from tunelab.tasks.pretrain import sequence_length

    return sequence_length(spec) if spec.task.type == "pretrain" else None


def identical_baselines(lab: Lab, version: str, base: dict, name: str | None) -> dict[str, dict]:
    """The newest completed baseline per method measured as this one would be: same method and
    run name, data version, base model (not where it lies), dtype and protocol. As
    `{method: {"id", "method"}}`."""
    spec = lab.spec
    wanted = {
        "data_version": version,
        "base": _what(base),
        "dtype": spec.model.dtype,
        "protocol": json.loads(json.dumps(protocol(spec))),  # as a record holds it
        "rules": recorded_rules(spec.model_dump(mode="json")),
    }
    names = {m: run_name(m, name) for m in BASELINES[spec.model_kind]}
    found: dict[str, dict] = {}
    for record in lab.store.runs():
        method = record.get("method")
        if (
            record.get("kind") == "baseline"
            and record.get("status") == "completed"
            and names.get(method) == record.get("name")
            and _conditions(record) == wanted
        ):
            found[method] = {"id": record["id"], "method": method}
    return found


def _conditions(record: dict) -> dict:
    return {
        "data_version": record.get("data_version"),
        "base": _what(record.get("base_model") or {}),
        "dtype": record.get("spec", {}).get("model", {}).get("dtype", "float32"),
        "protocol": record.get("protocol"),
        "rules": recorded_rules(record.get("spec") or {}),
    }


def _what(base: dict) -> dict:
    """A base model's identity without its location: the same model moved is the same."""
    return {k: v for k, v in base.items() if k not in IDENTITY_LOCATION}


def _duplicate_message(already: list[dict], version: str, base: dict) -> str:
    ids = ", ".join(a["id"] for a in already)
    return (
        f"the baselines of data version {version} are already recorded ({ids}), with the same "
        f"base model (weights sha256 {base['weights_sha256'][:12]}…), dtype and evaluation "
        "protocol: measuring them again adds nothing. To record another one on purpose, give "
        "it a name not used yet: `tunelab baseline --name NAME`."
    )
