"""deferred-side-effects's examples of an effect under a tensor test (``conditional.py``):
``if P: <one print/logger/warnings.warn statement>`` becomes ``defer_*_if(P, ...)``. Part of
:data:`~mend.rules.deferred_side_effects.examples.FIX_EXAMPLES` and ``DECLINE_EXAMPLES``;
the site is the ``if`` line."""
from __future__ import annotations

from mend.rules._base import DeclineExample, FixExample

CONDITIONAL_FIX_EXAMPLES: list[FixExample] = [
    # an fp16 overflow diagnostic (diffusers' VAE, transformers' fp16 paths): the `if` line
    # becomes a comment, so the warning keeps its line
    FixExample('''import warnings

import torch


def forward(self, x):
    h = self.proj(x)
    if (h.abs() > 1e4).any():
        warnings.warn("activations exceed 1e4; fp16 overflow likely")
    return h.clamp(-1e4, 1e4)
''', '''import warnings

import torch; import mend.runtime as _mend_rt


def forward(self, x):
    h = self.proj(x)
    # mend: deferred-side-effects (was: if (h.abs() > 1e4).any():)
    _mend_rt.defer_warn_if((h.abs() > 1e4).any(), "activations exceed 1e4; fp16 overflow likely")
    return h.clamp(-1e4, 1e4)
''', line=8),
    # a logger call whose %-argument is a parameter and whose logger is a module-level name
    FixExample('''import logging

import torch

logger = logging.getLogger(__name__)


def forward(self, x, step):
    if torch.isnan(x).any():
        logger.warning("NaN input at step %d", step)
    return torch.nan_to_num(x)
''', '''import logging

import torch; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, x, step):
    # mend: deferred-side-effects (was: if torch.isnan(x).any():)
    _mend_rt.defer_log_if(torch.isnan(x).any(), logger, "warning", "NaN input at step %d", step)
    return torch.nan_to_num(x)
''', line=9),
    # a print of an f-string over a name assigned earlier in the function: formatted at replay
    FixExample('''import torch


def forward(self, x):
    h = x.relu()
    if h.sum() == 0:
        print(f"dead activations: {h}")
    return h
''', '''import torch; import mend.runtime as _mend_rt


def forward(self, x):
    h = x.relu()
    # mend: deferred-side-effects (was: if h.sum() == 0:)
    _mend_rt.defer_print_if(h.sum() == 0, _mend_rt.fmt("dead activations: {}", h))
    return h
''', line=6),
]

CONDITIONAL_DECLINE_EXAMPLES: list[DeclineExample] = [
    # the argument would now run when the test is false: `h.max()` raises on an empty h
    DeclineExample('''import torch


def forward(self, h):
    if (h > 100).any():
        print("large value", h.max())
    return h
''', "would be evaluated when the test is false too", line=5),
    # a name bound only on some paths: unbound where the original never read it
    DeclineExample('''import torch


def forward(self, h, flag):
    if flag:
        scale = 2.0
    if (h > 100).any():
        print("large value at scale", scale)
    return h
''', "may be unbound where the call is", line=7),
    # an attribute read may raise (a missing attribute) where the original did not read it
    DeclineExample('''import torch


def forward(self, h):
    if (h > 100).any():
        print(f"large value in {self.name}")
    return h
''', "is neither a constant nor a name", line=5),
    # an `elif` whose body is one call: not taken (it runs only when the `if` before it fails); the
    # rule's generic reason names the line
    DeclineExample('''import torch


def forward(self, h):
    if (h < 0).any():
        h = h.abs()
    elif (h > 100).any():
        print("large")
    return h
''', "no print/logger/warnings.warn call", line=7),
    # a %-format is applied at the call, not at replay: "%d" % h raises for a tensor of several
    # elements, where the original never formatted it (found by a self-review of this rule)
    DeclineExample('''import torch


def forward(self, h):
    if (h > 100).any():
        print("large %d" % h)
    return h
''', "a `%`-format is applied where the call is", line=5),
    # an else arm: both arms would have to be deferred
    DeclineExample('''import torch


def forward(self, h):
    if (h > 100).any():
        print("large")
    else:
        print("small")
    return h
''', "has an `else`", line=5),
]
