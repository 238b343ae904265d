"""Verification of candidate rewrites: differential testing (Hypothesis) now, Z3 proof
obligations and certificates next (issue 4). The verifier receives the original and the
mended sources, not the rule's reasoning (translation validation, as in Alive2)."""
