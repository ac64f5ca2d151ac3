"""The multi-family study: its settings, plan, steps (the mechanism study adds its own), levels and runs' KL."""
