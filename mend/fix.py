"""``mend fix`` as a library: the pipeline (:mod:`mend.pipeline`) and its emitter.

Kept as the stable import path: ``from mend.fix import fix, write_atomic, certificate``.
"""
from __future__ import annotations

from mend.pipeline import UNFORCEABLE, Declined, FixResult, Rewrite, fix, instrumented_pair
from mend.pipeline.emit import certificate, emit, write_atomic
from mend.pipeline.executors import build_pair, factory_of, model_maker

__all__ = ["fix", "FixResult", "Rewrite", "Declined", "certificate", "emit", "write_atomic", "build_pair",
           "factory_of", "model_maker", "instrumented_pair", "UNFORCEABLE"]
