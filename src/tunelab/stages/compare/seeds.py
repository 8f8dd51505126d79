"""The arms of a comparison: which runs are seeds of one another, and which noise floors apply.

A variant's arm is every completed run that differs from it only in its seed
(`core.replicates.arms`): the replicates of a `--seeds N` run, the runs of a `tunelab noise`,
and a hand-made `training.seed=...` run alike. The reference's arm is listed with the
reference first; every other arm with its oldest run first (the arm's id). A baseline is an
arm of its own: it draws no seed.

A noise record applies to a pair of arms when its family (`core.replicates.family`) is either
arm's and none of its runs is in either arm already (those seeds are counted once, as arm
seeds); its completed runs on the same validation examples join the pooled variance. Records
that share runs (`tunelab noise` twice on one run, or with more seeds the second time) are not
independent measurements: of those, the one with the most runs counts, the others not at all.
"""

from __future__ import annotations

from tunelab.core.replicates import arms, family


class Arms:
    def __init__(self, store, runs: list[dict], reference: dict, same_eval) -> None:
        grouped, self.repeats = arms([r for r in runs if r["kind"] == "variant"])
        self.by_lead: dict[str, list[dict]] = {}
        for members in grouped.values():
            if any(m["id"] == reference["id"] for m in members):
                members = [reference, *[m for m in members if m["id"] != reference["id"]]]
            self.by_lead[members[0]["id"]] = members
        self._lead = {m["id"]: lead for lead, ms in self.by_lead.items() for m in ms}
        self.reference_lead = self._lead.get(reference["id"], reference["id"])
        self._by_id = {r["id"]: r for r in runs}
        usable = []
        self.elsewhere: list[dict] = []
        """Noise records measured on other validation examples (an older data version): not
        counted, and said (compare had read "no noise record" with one in the lab)."""
        for record in store.noise_records():  # its completed runs on these examples
            runs = [r for r in record.get("runs", []) if r in self._by_id]
            version = (record.get("family") or {}).get("data_version")
            if len(runs) >= 2 and version and same_eval(version):
                usable.append({**record, "runs": runs})
            elif version and not same_eval(version) and len(record.get("runs", [])) >= 2:
                self.elsewhere.append({"id": record["id"], "data_version": version})
        counted: set[str] = set()  # a seed's run counts once: the most seeds first, then oldest
        kept = set()
        for record in sorted(usable, key=lambda r: -len(r["runs"])):
            if not counted & set(record["runs"]):
                kept.add(record["id"])
                counted |= set(record["runs"])
        self._noise = [r for r in usable if r["id"] in kept]
        self.used_noise: list[str] = []

    def of(self, run_id: str) -> list[dict]:
        """The arm of a run (its seeds, its first run first); a run outside any arm alone."""
        lead = self._lead.get(run_id)
        return self.by_lead[lead] if lead else [self._by_id[run_id]]

    def noise_for(self, before: list[dict], arm: list[dict], preds_of) -> tuple:
        """The noise arms (source, seeds' predictions) that apply to this pair of arms."""
        ids = {r["id"] for r in [*before, *arm]}
        families = [family(a[0]) for a in (before, arm) if a[0]["kind"] != "baseline"]
        out = []
        for record in self._noise:
            if record["family"] in families and not ids & set(record["runs"]):
                out.append((f"noise {record['id']}", [preds_of(r) for r in record["runs"]]))
                if record["id"] not in self.used_noise:
                    self.used_noise.append(record["id"])
        return tuple(out)
