"""DeltaStack vs DeltaNet on formal languages (pure PyTorch layers, a Ray Tune study)."""
