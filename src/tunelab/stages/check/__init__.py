"""`tunelab check`: the preflight on a slice."""
