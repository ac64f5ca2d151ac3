"""Small artefacts for tests and benchmarks: a tiny random Llama with a real tokenizer."""

from opct.testing.tiny import INSTRUCT_GENERATION, make_family_model, make_tiny_model

__all__ = ["INSTRUCT_GENERATION", "make_family_model", "make_tiny_model"]
