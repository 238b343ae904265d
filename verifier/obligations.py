"""Proof obligations of a candidate rewrite: the public names, re-exported.

The verifier is split by reason to change:

* :mod:`verifier.smt` -- the solver wrapper (``solve``, ``replay``, ``result_of``,
  ``solver_version``, ``Unsupported``);
* :mod:`verifier.dtypes`, :mod:`verifier.shapes`, :mod:`verifier.values` -- the dtype,
  shape and value (IEEE, gradient) models;
* :mod:`verifier.facts` -- fact collection from one run of the candidate
  (``trace_facts``, ``facts_in_process``, ``fact_request``, ``collect_facts``);
* :mod:`verifier.encoders` -- one encoder per obligation kind, grouped by construct, and
  the registry ``KINDS``;
* :mod:`verifier.outcomes` -- the typed result: proved / refuted / unknown / checked;
* :mod:`verifier.discharge` -- ``discharge``, ``enrich``, ``obligation_data``;
* :mod:`verifier.levels` -- the level policy (``LEVELS``, ``verdict``, ``prove``,
  ``check_rewrite``, ``examples_for``).

``prove(obligations, *, level, before, code, facts_fn, required=frozenset(),
needs_facts=True, timeout_ms=TIMEOUT_MS)`` is the entry point for ``mend fix``; the
verifier never names a rule (the caller passes the kinds a rule requires and whether it
needs facts).
"""
from __future__ import annotations

from verifier.discharge import RESULT_FIELDS, discharge, enrich, no_encoding, obligation_data
from verifier.dtypes import DTYPES, FLOATS, FP_FORMAT, INT_BITS, INTS
from verifier.encoders import CHECKS, KINDS, SOLVER_KINDS, Ctx
from verifier.facts import (changed_lines, collect_facts, fact_key, fact_request, facts_in_process, names_in,
                            observe_state, summarize, temp_defs, trace_facts, watched_lines)
from verifier.levels import (LEVELS, STRICT_MIN_EXAMPLES, STRICT_MIN_EXAMPLES_INSTALLED, check_rewrite,
                             checked_list, examples_for, failed_kinds, fix_safety, prove, verdict)
from verifier.outcomes import OUTCOMES, Outcome, check_refuted, checked, unknown
from verifier.smt import TIMEOUT_MS, Solved, Unsupported, replay, result_of, solve, solver_version

RESULTS = OUTCOMES

__all__ = [
    "CHECKS", "DTYPES", "FLOATS", "FP_FORMAT", "INTS", "INT_BITS", "KINDS", "LEVELS", "OUTCOMES", "RESULTS",
    "RESULT_FIELDS", "SOLVER_KINDS", "STRICT_MIN_EXAMPLES", "STRICT_MIN_EXAMPLES_INSTALLED", "TIMEOUT_MS", "Ctx",
    "Outcome", "Solved", "Unsupported", "changed_lines", "check_refuted", "check_rewrite", "checked",
    "checked_list", "collect_facts", "discharge", "enrich", "examples_for", "fact_key", "fact_request",
    "facts_in_process", "failed_kinds", "fix_safety", "names_in", "no_encoding", "obligation_data", "observe_state", "prove",
    "replay", "result_of", "solve", "solver_version", "summarize", "temp_defs", "trace_facts", "unknown",
    "verdict", "watched_lines",
]
