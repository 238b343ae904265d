"""Printed text compared across compiled runs: a tensor printed inside a compiled region shows
the compiler's autograd node (``grad_fn=<CompiledFunctionBackward>`` under an AOT backend),
where eager and a mended model that prints after the graph show the op's own
(``grad_fn=<AddmmBackward0>``): an artefact of how the region was compiled, not of the
rewrite (helper-89: every deferred ``print(h)`` in a training forward was declined on it).
Outside eager-vs-eager comparisons, the node's name is not compared; every other character
is. Also the text of a counterexample's inputs (:func:`input_text`)."""
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


COUNTEREXAMPLE_VALUES = 32   # a tensor of at most this many elements is shown whole


def input_text(value: Any) -> str:
    """A drawn input as a counterexample shows it: a tensor's shape, dtype and values -- all of
    them up to :data:`COUNTEREXAMPLE_VALUES` elements, so that a small counterexample can be run
    again from its text (helper-92: a (3, 8) input showed 6 of its 24 values), else the first six
    and the count -- and anything else's ``repr``."""
    import torch

    if not isinstance(value, torch.Tensor):
        return repr(value)
    flat = value.detach().flatten()
    shown = str(flat.tolist()) if flat.numel() <= COUNTEREXAMPLE_VALUES else \
        str(flat[:6].tolist())[:-1] + f", ... ({flat.numel()} values)]"
    return f"{tuple(value.shape)} {value.dtype} {shown}"
