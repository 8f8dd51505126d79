"""Training and evaluation: the loop and its one step, the shared evaluation protocol."""
