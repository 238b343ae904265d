"""Printed text compared across compiled runs: a tensor printed inside a compiled region shows
the compiler's autograd node (``grad_fn=<CompiledFunctionBackward>`` under an AOT backend),
where eager and a mended model that prints after the graph show the op's own
(``grad_fn=<AddmmBackward0>``): an artefact of how the region was compiled, not of the
rewrite (helper-89: every deferred ``print(h)`` in a training forward was declined on it).
Outside eager-vs-eager comparisons, the node's name is not compared; every other character
is."""
from __future__ import annotations

import re
from typing import Any

_GRAD_FN = re.compile(r"grad_fn=<\w+>")


def without_grad_fn_names(value: Any) -> Any:
    """``value`` (a str, or tuples/lists of them and other values) with each ``grad_fn=<Name>``
    as ``grad_fn=<...>``."""
    if isinstance(value, str):
        return _GRAD_FN.sub("grad_fn=<...>", value)
    if isinstance(value, (tuple, list)):
        return type(value)(without_grad_fn_names(v) for v in value)
    return value
