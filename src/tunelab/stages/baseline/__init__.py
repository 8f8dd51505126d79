"""`tunelab baseline`: `measure` records the lab's honest starting points (majority, a probe on
frozen features, the base zero-shot); `once` says which are already measured, from the records
alone, before any model code loads."""
