"""`tunelab verify`'s outcome in the lab: written into the record of the export that made the
bundle (`verified`: passed, seconds, base, what was not checked), which the report and the plan
read."""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.errors import no_permission
from tunelab.core.exports import relisted
from tunelab.core.layout import EXPORTS


def record_verification(store, export: dict, verified: dict) -> None:
    """Write `verify`'s outcome into the export's record (the report and the plan read it)."""
    path = store.lab / export["file"]
    summary = {k: verified[k] for k in ("passed", "seconds", "base")}
    if verified.get("not_checked"):
        summary["not_checked"] = verified["not_checked"]
    store.save(
        path,
        store.load(path) | {"verified": summary},
        "verify",
        run=export["run"],
        bundle=export["bundle"],
        passed=verified["passed"],
    )


def verify_and_record(bundle: Path, base: Path | None = None, device: str = "cpu") -> dict:
    """`tunelab verify`: the bundle verified in a fresh process (`verify.verify_bundle`), and
    its outcome written into the export's record when the bundle lies in the lab that exported
    it (the report and the plan read it there); `recorded` names that record (None where there
    is none, or `not_recorded` says why it could not be written). A bundle elsewhere is
    verified all the same."""
    from tunelab.core.store import Store
    from tunelab.stages.export.load import lab_of
    from tunelab.stages.export.verify import verify_bundle

    _require_base(Path(bundle), base)
    result = verify_bundle(bundle, base, device)
    lab = lab_of(Path(bundle))
    if lab is None:
        return result | {"recorded": None, "not_recorded": OUTSIDE}
    store = Store(lab)
    here = Path(bundle).resolve()
    exports = [p for p in store.numbered(EXPORTS) if _same_bundle(_bundle_of(p, lab), here, lab)]
    if not exports:
        return result | {"recorded": None, "not_recorded": f"no export of {lab} wrote it"}
    export = store.load(exports[-1])
    if why := relisted(export, Path(bundle)):
        result = _relisted(result, why)
    try:
        record_verification(store, export, result)
    except OSError as err:  # a lab this user may only read, or a read-only one: the verdict stands
        if no_permission(err) is None:
            raise
        return result | {"recorded": None, "not_recorded": f"{export['file']} may not be written"}
    return result | {"recorded": export["file"]}


def _relisted(result: dict, why: str) -> dict:
    """The verification failed at `files`: the bundle's own listing was rewritten with it."""
    from tunelab.stages.export.verify import FIXES

    items = [
        i | {"passed": False, "detail": why} if i["name"] == "files" and i["passed"] else i
        for i in result["items"]
    ]
    return result | {
        "passed": False,
        "items": items,
        "fix": result.get("fix") or FIXES["files"].format(run=result["run"]),
    }


def _require_base(bundle: Path, base: Path | None) -> None:
    """A base that is nowhere to be found is refused (exit 2) before anything is verified or
    recorded: nothing about the bundle was checked, and recording it as a failed verification
    had overwritten the pass its export record held."""
    from tunelab.stages.export.load import default_base, read_bundle, require_present

    info = read_bundle(bundle)
    require_present(info, base or default_base(info, bundle), "; nothing was verified or recorded")


OUTSIDE = (
    "the bundle lies in no lab, so there is no export record to write into (verify records "
    "where a bundle lies inside the lab that exported it)"
)


def _same_bundle(recorded: Path | None, here: Path, lab: Path) -> bool:
    """The bundle an export record names is this one: the same path, or, in a lab copied or
    moved since (its records keep the old absolute paths), the same place inside the lab."""
    if recorded is None:
        return False
    if recorded == here:
        return True
    inside = here.relative_to(lab.resolve()).parts
    return len(recorded.parts) > len(inside) and recorded.parts[-len(inside) :] == inside


def _bundle_of(record_path: Path, lab: Path) -> Path | None:
    """The bundle an export record names (a relative path, as exports before it was made
    absolute wrote an `--out` one, is read from the lab)."""
    try:
        return (lab / json.loads(record_path.read_text())["bundle"]).resolve()
    except (OSError, ValueError, KeyError, TypeError):
        return None
