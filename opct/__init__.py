"""opct: On-Policy Consistency Training for Hugging Face causal language models."""

__version__ = "0.1.0"
