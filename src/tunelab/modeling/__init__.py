"""Models: load a base with its identity, LoRA or full fine-tuning, rendering examples to
tokens and loss masks, checkpoints, GGUF bases."""
