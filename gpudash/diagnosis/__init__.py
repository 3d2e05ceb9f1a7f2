"""What holds a training step back: evidence measured in a diagnosis window, and the rules that
classify it (``rules``). Torch-free."""
