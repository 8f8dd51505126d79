"""The paired statistics of one run against its reference on the same examples: the interval
(`Pair.interval`), McNemar's exact test where the primary is a share of examples right, the
sign-flip test where it is a mean of partial credits over few examples, the swap test where
it is any other metric over few examples (macro-F1, a multilabel F1, bits per byte), the
examples each run fixed and broke, and how concentrated the gain is."""

from __future__ import annotations

import numpy as np

from tunelab.stages.compare.pairs import Pair, right
from tunelab.stages.compare.stats import FEW, concentration, flips, mcnemar_exact, sign_flip

VERSUS_KEYS = ("metric", "bootstrap", "mcnemar", "sign_flip", "swap", "flips", "concentration")


def paired_stats(pair: Pair, primary: str) -> dict:
    """Paired statistics of the run against the reference on the same examples."""
    a, b = right(pair, primary)
    result = {"metric": primary, "bootstrap": pair.interval(primary)}
    if set(np.unique(np.concatenate([a, b]))) <= {0.0, 1.0}:
        result["mcnemar"] = mcnemar_exact(a == 1, b == 1)
        # whether the primary is the share of these 0/1 values (accuracy, exact match), which
        # McNemar then tests itself; a classifier's macro-F1 is not
        if pair.multilabel:
            tests = primary == "subset_accuracy"
        elif pair.classification:
            tests = primary == "accuracy"
        else:
            tests = not pair.documents
        result["mcnemar"]["tests_primary"] = tests
    elif not (pair.documents or pair.classification or pair.multilabel) and len(a) < FEW:
        result["sign_flip"] = sign_flip(a, b)  # a mean of partial credits on few examples
    tested = result.get("mcnemar", {}).get("tests_primary") or "sign_flip" in result
    if len(a) < FEW and not tested:  # macro-F1, a multilabel F1, bits per byte on few
        result["swap"] = pair.swap_test(primary)
    if pair.documents:  # a flip: a document the run scores better (fixed) or worse (broken)
        result["flips"] = flips(pair.ids, a > b, b > a)
    else:
        result["flips"] = flips(pair.ids, a >= 1, b >= 1)
    result["concentration"] = concentration(a, b)
    # what each example's value is: a classifier's is its correctness, whatever the primary
    measure = "subset_accuracy" if pair.multilabel else "accuracy" if pair.classification else ""
    result["concentration"]["measure"] = measure or primary
    return result
