"""`tunelab export` and `tunelab verify`: the handover bundle, and the proof it still works."""
