"""The house's layers (DESIGN.md), read from every module's imports: the packages below the
stages never import a stage, a view, a demo or a command; a view imports no stage; and a stage
imports no stage beside it, except the few named here with why."""

from __future__ import annotations

import ast
from pathlib import Path

import tunelab

SRC = Path(tunelab.__file__).parent
BELOW = ("core", "data", "modeling", "tasks", "training")
ABOVE = ("stages", "views", "demo", "commands")
BESIDE = {
    ("run", "inspect"): "run makes inspect's findings before it trains (blocking ones stop it)",
    ("run", "check"): "run reads the preflight's state from the check records (check_status)",
    ("noise", "run"): "a noise floor is replicate runs of the reference (run.replicates)",
}
"""(stage, stage it imports) -> why it may."""


def _imports(path: Path) -> set[str]:
    """Every `tunelab.*` module `path` imports, at any depth (lazy imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tunelab"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tunelab")}
    return found


def _crossings() -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {"below": set(), "views": set(), "beside": set()}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if len(parts) < 2:
            continue  # cli.py and the package's own __init__
        home, stage = parts[0], parts[1] if parts[0] == "stages" else None
        where = "/".join(parts)
        for module in _imports(path):
            to = module.split(".")[1:]
            if not to:
                continue
            if home in BELOW and to[0] in ABOVE:
                out["below"].add((where, module))
            if home == "views" and to[0] in ("stages", "demo", "commands"):
                out["views"].add((where, module))
            if stage and to[0] == "stages" and len(to) > 1 and to[1] != stage:
                out["beside"].add((stage, to[1]))
    return out


def test_no_package_below_the_stages_reaches_up_and_no_view_imports_a_stage():
    crossings = _crossings()
    assert crossings["below"] == set()
    assert crossings["views"] == set()


def test_a_stage_imports_no_stage_beside_it_but_those_named_with_why():
    beside = _crossings()["beside"]
    assert beside <= set(BESIDE), f"new: {sorted(beside - set(BESIDE))}"
    assert set(BESIDE) <= beside, (
        f"no longer imported (drop it from BESIDE): {set(BESIDE) - beside}"
    )


def test_the_check_reads_lazy_imports_too(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tunelab.stages.run import variant\n")
    assert _imports(module) == {"tunelab.stages.run", "tunelab.stages.run.variant"}
