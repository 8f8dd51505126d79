"""The human views of the ledger: `baseline`, `run`, `resume`, `ablate`, `invalidate`, `runs`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.core.allowed import past_words, trained_past
from tunelab.core.param_groups import NO_CHANGE, changes_text, standing
from tunelab.views.style import metric_value


def ablation(result: dict, console: Console) -> None:
    data = result["key"].startswith("data.")
    columns = ["value", "run", *(["data version"] if data else []), "parent"]  # the key: title
    seeds = len(result["runs"][0].get("seeds") or [])  # a seeded ablation: each value's mean
    metric = result["runs"][0]["metric"] + (f", mean of {seeds} seeds" if seeds else "")
    seconds = "train s" + (", all seeds" if seeds else "")
    checked = any("check" in r for r in result["runs"])  # `ablate --check`
    # a scratch model's architecture changed: each value's size beside its score
    sized = result["key"].startswith("model.") and all(r.get("params") for r in result["runs"])
    table = Table(
        *columns,
        *(["params (active)", "FLOPs/token"] if sized else []),
        metric,
        seconds,
        *(["wiring check"] if checked else []),
        title=f"ablation of {result['key']}",
    )
    for r in result["runs"]:
        version = [r["data_version"]] if data else []
        table.add_row(
            escape(str(r["value"])),
            r["id"],
            *version,
            str(r["parent"]),
            *(_size_cells(r) if sized else []),
            metric_value(r["metric"], r["score"]),
            f"{r['seconds']:.0f}",
            *([_check_cell(r.get("check"))] if checked else []),
        )
    console.print(table)
    if data:
        console.print(
            f"each value built its own data version, validation and test pinned to "
            f"{result['data_version']} (still the current one)"
        )
    console.print("compare them with the paired statistics: `tunelab compare`")


def _size_cells(row: dict) -> list[str]:
    """`6.82M (4.46M)`, `29.9M`: a value's parameters (active per token, where experts leave
    some out) and FLOPs per token, set beside its score."""
    total, active = row["params"]["total"], row["params"]["active"]
    params = _count(total) + (f" ({_count(active)})" if active != total else "")
    flops = row.get("flops_per_token")
    return [params, _count(flops) if flops else "-"]


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def _check_cell(check: dict | None) -> str:
    """`passed, run now` or `passed, on record`: how the value's wiring was checked."""
    if check is None:
        return "-"
    return "passed, " + ("run now" if check["ran"] else "on record")


def invalidated(record: dict, console: Console) -> None:
    console.print(
        f"{record['id']} is now invalid (was {record['invalidated']['previous_status']}):"
        f" {record['invalidated']['why']}"
    )


def runs(rows: list[dict], console: Console) -> None:
    table = Table("run", "kind", "status", "data", "seed", "primary metric", "created (UTC)")
    table.columns[0].no_wrap = True
    for r in rows:
        created = r["created"][:16].replace("T", " ")
        at = r.get("at")  # a running run's last heartbeat
        status = r["status"] + (f", step {at['step']}/{at['of']}" if at else "")
        status += " [bold red](record not vouched for)[/]" if r.get("doubt") else ""
        table.add_row(
            r["id"],
            r["kind"],
            status,
            r["data_version"][:8],
            "" if r["kind"] == "baseline" else _seed(r),
            f"{r['metric'].replace('_', ' ')} {metric_value(r['metric'], r['value'])}",
            created,
        )
    console.print(table if rows else "no runs yet: `tunelab data`, then `tunelab baseline`.")
    doubted = [f"{r['id']} ({r['doubt']})" for r in rows if r.get("doubt")]
    if doubted:
        console.print(
            f"[bold red]not vouched for by the event log[/]: {', '.join(doubted)}; their values "
            "are what the files hold now, not what the runs measured. `tunelab fsck` names "
            "every problem; compare, export and final refuse them."
        )
    groups: dict[str, list[dict]] = {}
    by_id = {r["id"]: r for r in rows}
    for r in rows:
        if r.get("group"):
            groups.setdefault(r["group"], []).append(r)
    for group, members in groups.items():
        listed = [by_id[i] for i in members[0].get("group_runs") or [] if i in by_id]
        members = listed or members  # as the group's record lists them, counted runs too
        states = ", ".join(
            f"{sum(m['status'] == s for m in members)} {s}"
            for s in dict.fromkeys(m["status"] for m in members)
        )
        ids = ", ".join(m["id"] for m in members)
        planned = members[0].get("group_seeds") or len(members)
        done = sum(m["status"] == "completed" for m in members)
        console.print(
            f"replicate group {group}: {len(members)} of {planned} planned seeds ({states}): {ids}"
            + (
                _lacking(members[0].get("group_again"))
                if done < planned and not any(m["status"] == "running" for m in members)
                else ""
            )
        )


def _lacking(again: str | None) -> str:
    """What goes on with a group that lacks seeds: the command that made it, or the later group
    that went on with it (`continued by g002`)."""
    if again and again.startswith("continued by"):
        return f"; {again}"
    return (
        f"; {again or 'the same `tunelab run --seeds N`'} trains the seeds it lacks (a resumed "
        "one counts once it completes)"
    )


def _seed(row: dict) -> str:
    """A run's seed, and its replicate group when it has one: `625451353 (g001)`."""
    seed = str(row.get("seed", ""))
    return f"{seed} ({row['group']})" if row.get("group") else seed


def replicates(result: dict, console: Console) -> None:
    """A replicate group: each seed's run, then each metric's mean and spread over them; or,
    where every seed was trained already, that, with the mean and spread."""
    if result.get("unchanged"):
        console.print(
            f"every one of the {len(result['seeds'])} seeds was trained already "
            f"({', '.join(r['id'] for r in result['runs'])}): nothing trained, no group written; "
            "mean ± sd over them: " + _spread(result["summary"])
        )
        return
    for record in result["runs"]:
        run(record, console)
    failed = [m for m in result["members"] if m.get("status") == "failed"]
    for m in failed:
        said = escape(m["error"])  # an error's own brackets (a path `[/...]`) are no markup
        console.print(f"[red]seed {m['seed']} failed[/] ({m['run'] or 'no run'}): {said}")
    console.print(
        f"[bold]{result['id']}[/]: {result['finished']} of {len(result['seeds'])} seeds "
        f"completed; mean ± sd over them: " + _spread(result["summary"])
    )


def _spread(summary: dict) -> str:
    """Each metric's mean ± sd: `accuracy 93.3% ± 1.2%, ...`."""
    return ", ".join(
        f"{k.replace('_', ' ')} {metric_value(k, v['mean'])}"
        + (f" ± {metric_value(k, v['sd'])}" if v["sd"] is not None else "")
        for k, v in summary.items()
    )


def noise(result: dict, console: Console) -> None:
    """A measured noise floor: the spread of every metric over the seeds."""
    table = Table("metric", "scope", "mean", "sd", "range", title=f"noise floor {result['id']}")
    for scope, metrics in result["spread"].items():
        rows = metrics.items() if scope == "overall" else _per_group(metrics)
        for name, s in rows:
            table.add_row(
                name,
                scope,
                *(metric_value(name.split(" ")[0], s[k]) for k in ("mean", "sd", "range")),
            )
    console.print(
        f"{result['of']} over {len(result['runs'])} seeds ({', '.join(map(str, result['seeds']))}; "
        f"{result['trained']} trained now, group {result['group']}): {', '.join(result['runs'])}"
    )
    console.print(table)
    rough = result.get("sd_interval")  # a noise record written before it was kept has none
    if rough:
        console.print(
            f"an sd from {rough['df'] + 1} seeds is rough: on {rough['df']} "
            f"degree{'s' if rough['df'] != 1 else ''} of freedom "
            f"the true sd lies between {rough['low_factor']:g} and {rough['high_factor']:g} "
            "times it (95%, chi-square); compare's intervals count that (t on those degrees)"
        )
    for warning in result.get("warnings") or []:  # in --json too
        console.print(f"[yellow]warning[/] {escape(warning)}")
    said = "already measured, these very seeds: " if result.get("unchanged") else "written to "
    console.print(
        f"{said}{result['file']}; `tunelab compare` counts it in every comparison where "
        "either run is of its family (same data version, base model, method, budget and "
        "evaluation)"
    )


def _per_group(metrics: dict):
    for group, values in metrics.items():
        for name, s in values.items():
            yield f"{name} {group}", s


def metric_line(m: dict) -> str:
    """The overall metrics of a run, e.g. `accuracy 93.9%, macro f1 93.8%`."""
    shown = [k for k, v in m.items() if isinstance(v, float)]
    line = ", ".join(f"{k.replace('_', ' ')} {metric_value(k, m[k], '%')}" for k in shown)
    threshold = m.get("threshold")  # task multilabel: the cut that makes each label set
    if isinstance(threshold, dict):
        line += f" at threshold {threshold['value']:g} (chosen on validation)"
    return line


def baseline(result: dict, console: Console) -> None:
    for r in result["runs"]:
        m = r["metrics"]
        console.print(f"[bold]{r['id']}[/]: {metric_line(m)} on {m['n']} validation examples")
    for r in result.get("already", []):
        console.print(
            f"[dim]{r['id']}: already recorded on the same data, base model and protocol; "
            "not measured again (--name NAME records another)[/]"
        )


def changed_keys(changes: list[dict]) -> list[str]:
    """The changed keys; a changed `type` stands for the settings that come with it."""
    return [c["key"] for c in standing(changes)]


BASELINE_WORDS = {
    "probe": "a linear probe on the base's frozen features",
    "majority": "the majority class for every example",
    "zero-shot": "the base as it is, zero-shot",
}
"""What each kind of baseline measured, for a variant trained from the same spec."""


def _after_baseline(record: dict) -> str:
    """`the same spec, now fine-tuned (the baseline measured ...)`: for a model built from
    scratch, trained, against its untrained weights."""
    scratch = ((record.get("spec") or {}).get("model") or {}).get("init") == "scratch"
    if scratch:
        return "the same spec, now trained (the baseline measured the untrained model)"
    measured = BASELINE_WORDS.get(record.get("parent_method"), "the base model")
    return f"the same spec, now fine-tuned (the baseline measured {measured})"


def run(record: dict, console: Console) -> None:
    if "members" in record:  # `--seeds N`: a replicate group
        replicates(record, console)
        return
    t, m = record["training"], record["metrics"]
    past = trained_past(record)
    if past:
        console.print(f"[bold yellow]warning[/] {escape(past_words(record['id'], past))}")
    if record.get("parent"):
        diff = record.get("diff") or {}
        changed = "; ".join(f"{g}: {changes_text(cs)}" for g, cs in diff.items())
        if not changed:  # a variant of a baseline trains what the baseline only evaluated
            baseline = record.get("parent_kind") == "baseline"
            changed = _after_baseline(record) if baseline else NO_CHANGE
        console.print(f"parent {record['parent']}: {changed}")
        if record.get("reason"):
            console.print(f"  reason: {record['reason']}")
        for w in record.get("diff_warnings", []):
            console.print(f"  [bold yellow]warning[/] {w}")
    unit = t.get("unit", "tokens")  # an image lab counts images
    rate = "img/s" if unit == "images" else "tok/s"
    console.print(
        f"[bold]{record['id']}[/] {record['status']}: {t['steps']} steps, {t['tokens']:,} {unit} "
        f"in {_seconds(t['seconds'])} ({t['tokens_per_s']:,.0f} {rate}, peak memory "
        f"{t['peak_memory_mb']:,.0f} MiB), final loss {t['final_loss']:.4f}"
    )
    console.print(f"  validation: {metric_line(m)}")
    if routing := m.get("routing"):  # a mixture of experts: where its router sent the tokens
        shares = " | ".join(" ".join(f"{x:.0%}" for x in layer) for layer in routing["shares"])
        console.print(f"  routing (each expert layer's shares of its tokens): {shares}")
        if routing.get("warning"):
            console.print(f"  [bold yellow]warning[/] {escape(routing['warning'])}")
    for said in ("start_lost", "diverged", "time_cap"):
        if (t.get(said) or {}).get("message"):
            console.print(f"  [bold yellow]warning[/] {escape(t[said]['message'])}")
    _validation_curve(t, console)
    chosen = t.get("precision") or {}
    if chosen.get("asked") == "auto":
        kept = (
            f"; kept from {chosen['kept_from']}, this lab's choice on this machine"
            if (chosen.get("kept_from"))
            else ""
        )
        console.print(f"  precision auto: trained in {chosen['used']} ({chosen['reason']}{kept})")
    processes = t.get("processes") or {}
    if processes.get("world_size", 1) > 1:
        ranks = ", ".join(
            f"rank {i} {r['tokens_per_s']:,.0f} tok/s, {r['peak_memory_mb']:,.0f} MiB"
            for i, r in enumerate(t.get("per_rank") or [])
        )
        console.print(
            f"  {processes['world_size']} processes ({processes['strategy']}, "
            f"{processes['backend']}): {ranks}"
        )
        if processes.get("shared_cores"):
            console.print(f"  [bold yellow]warning[/] {escape(processes['shared_cores'])}")
    drawn_as = "packed sequences" if record.get("packing") else "rows"  # not the data table's rows
    for stage in (t.get("mixture") or {}).get("stages", []):
        drawn = ", ".join(
            f"{name} {c['rows']} {drawn_as} ({c['share']:.0%}; {c['distinct']} of "
            f"{c['available']} distinct)"
            for name, c in stage["sampled"].items()
        )
        first, end = stage["steps"]
        console.print(f"  mixture stage {stage['stage']} (steps {first}-{end}): {drawn}")
    if record.get("rejected_train"):
        console.print(
            f"  {len(record['rejected_train'])} train rows could not be rendered "
            f"(first: {record['rejected_train'][0]['reason']})"
        )
    preflight = record.get("preflight") or {}
    for warning in (
        preflight.get("data_behind"),
        preflight.get("warning"),
        preflight.get("no_baseline"),
    ):
        if warning:
            console.print(f"  [yellow]warning[/] {escape(warning)}")


def _validation_curve(t: dict, console: Console) -> None:
    """The validation loss measured during training (`training.validate_every`), the step the
    run kept, and the overfitting warning."""
    v = t.get("validation")
    if not v or not v["points"]:
        return
    points = v["points"]
    shown = points if len(points) <= 6 else [*points[:3], None, *points[-2:]]
    curve = " ".join("…" if p is None else f"{p['step']}:{p['loss']:.4f}" for p in shown)
    best = v["best"]
    console.print(
        f"  validation loss every {v['every']} steps on {v['examples']} examples: {curve}; "
        f"lowest at step {best['step']} ({best['loss']:.4f})"
    )
    kept = t.get("kept") or {}
    if kept.get("rule") == "best validation loss":
        console.print(f"  kept step {kept['step']}'s weights (training.keep: best)")
    if kept.get("not_kept"):
        console.print(f"  [yellow]warning[/] {escape(kept['not_kept'])}")
    if v.get("overfitting"):
        console.print(f"  [yellow]warning[/] overfitting: {v['overfitting']['message']}")


def _seconds(seconds: float) -> str:
    """`3.2s` under ten seconds (a short run read "902 tokens in 0s"), `57s` above."""
    return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
