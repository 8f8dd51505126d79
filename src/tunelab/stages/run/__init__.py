"""`tunelab run`, `resume` and `ablate`: variants, their diff against the parent, one change
at a time."""
