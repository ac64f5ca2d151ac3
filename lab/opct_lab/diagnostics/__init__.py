"""Measures of a fine-tuned model the studies take: KL(fine-tuned ‖ base)."""
