"""Rule: deferred side effects (GraphMend paper §4, "[Defer]").

``print``, logger methods and ``warnings.warn`` inside the compiled region are captured
where they occur (tensor arguments snapshotted) and replayed after the compiled call in
the original order, also when the forward raises.
"""
from __future__ import annotations

from mend.locate import Located
from mend.rules import Decline, Match
from mend.taxonomy import side_effect_call

NAME = "deferred-side-effects"


def match(loc: Located) -> Match | Decline:
    """A bare ``print``/logger/``warnings.warn`` statement is deferrable."""
    name = side_effect_call(loc)
    if name is None:
        return Decline(NAME, "the side effect is not a bare print/logger/warnings statement "
                             "(its value is used, so it cannot be deferred)")
    return Match(NAME, f"defer `{name}(...)` to after the compiled call")
