"""`tunelab final RUN`: `sealed` opens the sealed test split once, on purpose, and records that
it was; `scorers` scores its rows, one scorer for each kind of run."""
