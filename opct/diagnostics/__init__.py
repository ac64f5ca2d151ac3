"""Diagnostics of a model on consistency pairs, before any training: the off-policy profile.

:mod:`opct.diagnostics.offpolicy` holds the measures (pure functions of token ids and per-token
numbers, with n and clustered intervals); :mod:`opct.diagnostics.measure` takes them from a model's
batched forward passes. ``opct pairs profile`` prints them; every training run measures them once, at
its start, into ``diagnostics.json`` and its manifest (``profile.*`` settings).
"""
