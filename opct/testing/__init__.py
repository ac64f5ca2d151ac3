"""Small artefacts for tests and benchmarks: a tiny random Llama with a real tokenizer."""

from opct.testing.tiny import make_tiny_model

__all__ = ["make_tiny_model"]
