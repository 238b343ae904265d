"""Verification of candidate rewrites, standing alone (nothing here imports ``mend``): the
verifier receives the version before and the mended candidate, never the rule's
reasoning (translation validation, as in Alive2).

* differential testing with Hypothesis: :mod:`verifier.differential`, :mod:`verifier.forcing`;
* proof obligations: :mod:`verifier.obligations` re-exports the public names --
  ``prove``, ``LEVELS``, ``examples_for`` (from :mod:`verifier.levels`), ``discharge``,
  ``KINDS`` (the encoder registry, :mod:`verifier.encoders`), the facts entry points
  (:mod:`verifier.facts`) and the outcome record (:mod:`verifier.outcomes`);
* certificates: :mod:`verifier.certs`.
"""
