"""Safety axes: perturbation templates and their splits, pair builders, and metrics per axis.

``sycophancy`` (biased multiple-choice prompts), ``jailbreak`` (wrapped harmful requests) and
``awareness`` (SAGE-Eval safety facts). Each builds design §3.1 consistency pairs and computes its
metrics from design §3.5 per-sample records.
"""
