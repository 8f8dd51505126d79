"""`tunelab size`: a training step's memory, measured beside the estimate."""
