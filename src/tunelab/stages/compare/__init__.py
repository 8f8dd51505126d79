"""`tunelab compare`: variants beside the reference, paired statistics, verdicts."""
