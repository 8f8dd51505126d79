"""The human views of `init` and `data`: the data version, quarantine, duplicates, splits (and
an image lab's images)."""

from __future__ import annotations

import shlex
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunelab.data.split_columns import split_columns
from tunelab.views.style import short_id


def init(result: dict, console: Console) -> None:
    lab = Path(result["spec"]).parent  # `tunelab data` reads the spec of --lab (default .)
    data = "tunelab data" + ("" if lab == Path() else f" --lab {shlex.quote(str(lab))}")
    console.print(f"wrote {escape(result['spec'])} ({result['task']}); edit it, then run `{data}`.")


def data(report: dict, console: Console) -> None:
    _version(report, console)
    _rows(report, console)
    _splits(report, console)
    if report.get("label_sets"):  # task multilabel: the columns count rows holding each label
        console.print("  " + label_sets_line(report["label_sets"]))
    _duplicates(report["duplicates"], console)
    _split_origin(report, console)
    _conversations(report.get("conversations"), console)
    for on, g in (report.get("guard_sets") or {}).items():
        console.print(
            f"  forgetting set {escape(on)}: {g['documents']} documents, "
            f"{g['bytes']:,} bytes, kept in the version as {g['file']}"
        )
    for warning in report.get("warnings", []):
        console.print(f"[yellow]warning[/] {escape(warning)}")


def _version(report: dict, console: Console) -> None:
    """The version, whether it is new, reused or written again, and what it shares."""
    state = "new version" if report["new"] else "unchanged, version reused"
    if damaged := report.get("rewritten"):
        shown = ", ".join(damaged[:3]) + (
            f" and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        )
        state = f"its stored folder was damaged ({shown} differed from its manifest): written again"
    console.print(f"[bold]data version {report['version']}[/] ({state})")
    if report.get("same_rows_as"):
        console.print(
            f"  the kept rows are those of version(s) {', '.join(report['same_rows_as'])}: "
            "the sources or settings changed, the examples did not"
        )
    if report.get("eval_from"):
        console.print(
            f"  validation and test kept byte for byte from version {report['eval_from']} "
            f"(data.eval_from; {report['held_out_of_train']:,} of this build's examples are "
            "them, by id or text, and stay out of train): runs on both versions pair up"
        )


def _rows(report: dict, console: Console) -> None:
    """What became of every row read, what the step cost, and what was set aside or changed."""
    q = report["quarantine"]
    console.print(
        f"  rows read {report['rows_read']:,} = kept {report['kept']:,} + quarantined "
        f"{report['quarantined']:,} + removed as duplicates {report['duplicates_removed']:,}"
    )
    cost = report.get("cost")
    if cost:
        rate = report["rows_read"] / max(cost["seconds"], 1e-9)
        workers = cost["worker_peak_memory_gib"]
        # under datatrove tunelab's workers only hash contents; its own workers are not seen
        datatrove = (report.get("duplicates") or {}).get("engine") == "datatrove"
        kind = (
            "content-hashing workers; datatrove's own not counted"
            if datatrove
            else ("signature workers")
        )
        console.print(
            f"  took {cost['seconds']:,.1f} s ({rate:,.0f} rows/s), peak memory "
            f"{cost['peak_memory_gib']:.2f} GiB"
            + (
                f" (+ {workers:.2f} GiB in each of {cost.get('signature_workers') or 'the'} {kind})"
                if workers
                else ""
            )
        )
        texts = cost.get("texts") or {}
        if texts.get("spilled"):
            console.print(
                f"  the texts went past data.texts_in_memory_mb ({texts['budget_mb']:,.0f} MB): "
                f"{texts['spilled_mb']:,.0f} MB of them waited in a scratch file, read back as "
                "needed"
            )
    if report["quarantined"]:
        reasons = ", ".join(f"{k} {v}" for k, v in q["reasons"].items())
        console.print(f"  quarantine: {reasons} -> {q['file']}")
    images = report.get("images")  # an image lab: every image decoded, kept by content
    if images:
        formats = ", ".join(f"{k} {v:,}" for k, v in images["formats"].items())
        console.print(
            f"  images: {images['files']:,} file(s) kept ({formats}; {images['bytes']:,} bytes), "
            f"each decoded under data.images.max_pixels {images['max_pixels']:,} -> "
            f"{images['folder']}"
        )
    if report["cleaning"]:
        rules = ", ".join(f"{k} changed {v}" for k, v in report["cleaning"].items())
        console.print(f"  cleaning: {rules}")
    conflicts = report.get("conflicts") or {}
    if conflicts.get("groups"):
        first = conflicts["examples"][0]
        console.print(
            f"  label conflicts: {conflicts['groups']} {'image' if images else 'text'}(s) with "
            "different answers, "
            f"{conflicts['rows']} rows ({conflicts['policy']}); e.g. "
            f"{', '.join(short_id(i) for i in first['ids'][:3])}: {first['answers']}"
        )


def _duplicates(dups: dict, console: Console) -> None:
    """Exact and near pairs, across sources, an example (a leak across splits first), policy."""
    for method, title in (("exact", "exact duplicates"), ("near", "near-duplicates")):
        counts = {
            k.removeprefix("near:"): v
            for k, v in dups["counts"].items()
            if v and k.startswith("near:") == (method == "near")
        }
        found = ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
        by = f", found by {dups['engine']} (data.engine)" if method == "near" else ""
        console.print(
            f"  {title} (pairs{by if dups.get('engine') == 'datatrove' else ''}): {found}"
        )
    if dups.get("across_sources"):  # copies of one source's rows in another
        shown = ", ".join(f"{k} {v}" for k, v in dups["across_sources"].items())
        console.print(
            f"  pairs across sources: {shown} (each side's source is in the pairs file; a "
            "mixture weight counts such copies once, where the policy kept them)"
        )
    near = [p for p in dups["pairs"] if p["method"] == "near" and p.get("snippet")]
    across = [p for p in near if p["a"]["split"] != p["b"]["split"]]  # a leak is the news
    example = (across or near or [None])[0]
    if example:
        action = example.get("action", "")
        if action.startswith("removed from train"):
            action = "train copy removed"
        console.print(
            f"    e.g. {short_id(example['a']['id'])} ~ {short_id(example['b']['id'])} "
            f"({example['kind']}, estimated similarity {example['similarity']}, {action}): "
            f"{escape(repr(example['snippet']))}"
        )
    if dups.get("pairs_file"):
        console.print(f"    every pair, with its similarity and action: {dups['pairs_file']}")
    console.print(f"  policy {dups['policy']}: {dups['removed']} rows removed from train")


def _split_origin(report: dict, console: Console) -> None:
    """Where the split came from, when it came with the data."""
    carved = report.get("validation_from_train")
    if carved:
        console.print(
            f"  the data came already split, without validation rows: {carved['rows']:,} "
            f"({carved['share']:.0%}) were held out of its train split as validation "
            f"(data.split.validation_from_train, seed {carved['seed']}); the rest kept as it is"
        )
    elif report.get("presplit"):
        console.print("  the data came already split: the user's split was kept as it is")


def _conversations(c: dict | None, console: Console) -> None:
    """The kept conversations: turns, roles, and the shapes that were read."""
    if c and c["rows"]:
        t = c["turns"]
        roles = ", ".join(f"{role} {n}" for role, n in c["roles"].items())
        console.print(
            f"  conversations: {c['rows']} kept, turns per conversation {t['min']} to "
            f"{t['max']} (median {t['p50']}); turns by role: {escape(roles)}"
        )
        if c.get("content_parts_rows"):
            console.print(
                f"  {c['content_parts_rows']} rows have a turn whose content is a list of text "
                "parts: each read as its parts' texts joined, as the chat APIs join them"
            )
        if c.get("answers_weighted_0"):
            console.print(
                f"  {c['answers_weighted_0']} assistant answers have weight 0: kept in their "
                "conversations, with no loss on them"
            )
        if c.get("sharegpt_rows"):
            console.print(
                f"  {c['sharegpt_rows']} rows read in ShareGPT's form ({{from, value}} turns): "
                "from as role (human as user, gpt as assistant), value as content"
            )


def label_sets_line(per_split: dict) -> str:
    """`label sets (a row counts under each of its labels): train 9 rows with no label, 1.33
    labels a row, 6 distinct sets; ...`"""
    parts = [
        f"{split} {s['no_label']} rows with no label, {s['labels_per_row']:g} labels a row, "
        f"{s['distinct_sets']} distinct sets"
        for split, s in per_split.items()
    ]
    return "label sets (a row counts under each of its labels): " + "; ".join(parts)


WIDE = 8
"""Past this many labels a column each would not fit a terminal: the split table summarises."""


def _splits(report: dict, console: Console) -> None:
    """Rows per split and, beside them, per label (or per source, task pretrain); with more than
    `WIDE` labels, how many each split holds and the rarest labels of train instead."""
    columns, per_split = split_columns(report)  # pretrain: documents per source, no labels
    if len(columns) > WIDE:
        table = Table("split", "rows", "labels", "rows per label", box=None, padding=(0, 2))
        for split, (n, per) in per_split.items():
            counts = sorted(per.get(k, 0) for k in columns)
            present = sum(1 for c in counts if c)
            spread = f"{counts[0]} to {counts[-1]}, median {counts[len(counts) // 2]}"
            table.add_row(split, f"{n:,}", f"{present} of {len(columns)}", spread)
        console.print(table)
        train = (per_split.get("train") or (0, {}))[1]
        rarest = sorted(columns, key=lambda k: (train.get(k, 0), k))[:5]
        rare = ", ".join(f"{escape(k or '(none)')} {train.get(k, 0)}" for k in rarest)
        where = Path(report["quarantine"]["file"]).with_name("report.json")  # the version's
        console.print(f"  rarest in train: {rare} (every count: {where})")
        return
    titles = [c or "(none)" for c in columns]  # the rows without one, beside those with one
    table = Table("split", "rows", *titles, title=None, box=None, padding=(0, 2))
    for split, (n, per) in per_split.items():
        counts = [
            f"{c} ({100 * c / n:.0f}%)" if n else "0" for c in (per.get(k, 0) for k in columns)
        ]
        table.add_row(split, str(n), *counts)
    console.print(table)
