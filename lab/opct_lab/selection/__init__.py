"""Recipe selection on the validation split: the candidates, the fixed rules (family_transfer among them), a
selection per model family."""
