"""deferred-side-effects's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line). The site is the line
:func:`example_line` picks, unless an example names its own."""
from __future__ import annotations

import re

from mend.rules._base import DeclineExample
from mend.rules.deferred_side_effects.conditional_examples import (CONDITIONAL_DECLINE_EXAMPLES,
                                                                   CONDITIONAL_FIX_EXAMPLES)
from mend.taxonomy import LOG_METHODS


def example_line(source: str) -> int:
    """The line of an example's site: the first line with a print/warn/logger call."""
    pat = re.compile(r"\b(print|warn|" + "|".join(sorted(LOG_METHODS)) + r")\(")
    for i, text in enumerate(source.splitlines(), 1):
        if pat.search(text) and not text.lstrip().startswith(("def ", "#")):
            return i
    raise ValueError("no site in example")


FIX_EXAMPLES: list[tuple[str, str]] = [
    ('''import torch


def forward(x):
    h = x + 1
    print("[debug] hidden computed")
    return h
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(x):
    h = x + 1
    _mend_rt.defer_print("[debug] hidden computed")
    return h
'''),
    ('''import sys

import torch


def forward(self, x):
    h = self.fc(x)
    print("pre-scale:", h, sep=" | ", end="\\n\\n", file=sys.stderr)  # before the in-place update
    h.mul_(self.scale)
    return h
''',
     '''import sys

import torch; import mend.runtime as _mend_rt


def forward(self, x):
    h = self.fc(x)
    _mend_rt.defer_print("pre-scale:", h, sep=" | ", end="\\n\\n", file=sys.stderr)  # before the in-place update
    h.mul_(self.scale)
    return h
'''),
    ('''import logging

logger = logging.getLogger(__name__)


def forward(self, x):
    logger.info("shape %s, mean %.3f", x.shape, x.mean())
    return x * 2
''',
     '''import logging; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, x):
    _mend_rt.defer_log(logger, "info", "shape %s, mean %.3f", x.shape, x.mean())
    return x * 2
'''),
    ('''from transformers.utils import logging

logger = logging.get_logger(__name__)


def forward(self, past_key_values):
    if isinstance(past_key_values, tuple):
        logger.warning_once(
            "Passing a tuple of `past_key_values` is deprecated. "
            "You should pass an instance of `Cache` instead."
        )
    return past_key_values
''',
     '''from transformers.utils import logging; import mend.runtime as _mend_rt

logger = logging.get_logger(__name__)


def forward(self, past_key_values):
    if isinstance(past_key_values, tuple):
        _mend_rt.defer_log(
            logger, "warning_once", "Passing a tuple of `past_key_values` is deprecated. "
            "You should pass an instance of `Cache` instead."
        )
    return past_key_values
'''),
    ('''import logging


def forward(self, x):
    logging.warning("root logger: %d rows", x.shape[0])
    self.logger.debug("through an attribute")
    return x
''',
     '''import logging; import mend.runtime as _mend_rt


def forward(self, x):
    _mend_rt.defer_log(logging, "warning", "root logger: %d rows", x.shape[0])
    self.logger.debug("through an attribute")
    return x
'''),
    ('''import warnings


def forward(self, x, scale=None):
    if scale is not None:
        warnings.warn("`scale` is deprecated", FutureWarning)
    return x
''',
     '''import warnings; import mend.runtime as _mend_rt


def forward(self, x, scale=None):
    if scale is not None:
        _mend_rt.defer_warn("`scale` is deprecated", FutureWarning)
    return x
'''),
    ('''from warnings import warn


def forward(self, x):
    warn("legacy path")
    return x
''',
     '''from warnings import warn; import mend.runtime as _mend_rt


def forward(self, x):
    _mend_rt.defer_warn("legacy path")
    return x
'''),
    ('''def forward(self, x):
    h = x.relu()
    print(f"h: {h.sum():.3f} ({h.shape!r}) {{raw}}")
    return h
''',
     '''import mend.runtime as _mend_rt

def forward(self, x):
    h = x.relu()
    _mend_rt.defer_print(_mend_rt.fmt("h: {:.3f} ({!r}) {{raw}}", h.sum(), h.shape))
    return h
'''),
    # repr(t) / str(t) as an argument: formatted at replay as f"{t!r}" is (its own break goes too)
    ('''def forward(self, x):
    h = x.relu()
    print("h:", repr(h), str(h.sum()))
    return h
''',
     '''import mend.runtime as _mend_rt

def forward(self, x):
    h = x.relu()
    _mend_rt.defer_print("h:", _mend_rt.fmt("{!r}", h), _mend_rt.fmt("{!s}", h.sum()))
    return h
'''),
    # a keyword argument stays a str (print's sep= must be one): only the positional repr is lazy
    ('''def forward(self, x):
    print(repr(x), sep=str(self.tag))
    return x
''',
     '''import mend.runtime as _mend_rt

def forward(self, x):
    _mend_rt.defer_print(_mend_rt.fmt("{!r}", x), sep=str(self.tag))
    return x
'''),
    # ... not when the module binds `repr` (it may not be the builtin): the call stays an argument
    ('''from mylib import repr


def forward(self, x):
    print(repr(x))
    return x
''',
     '''from mylib import repr; import mend.runtime as _mend_rt


def forward(self, x):
    _mend_rt.defer_print(repr(x))
    return x
'''),
    ('''def forward(self, x):
    print("{} rows, norm {n:.2f}".format(x.shape[0], n=x.norm()))
    return x
''',
     '''import mend.runtime as _mend_rt

def forward(self, x):
    _mend_rt.defer_print(_mend_rt.fmt("{} rows, norm {n:.2f}", x.shape[0], n=x.norm()))
    return x
'''),
    ('''import mend.runtime as rt


def forward(self, x):
    print("already imported", x)
    return x
''',
     '''import mend.runtime as rt


def forward(self, x):
    rt.defer_print("already imported", x)
    return x
'''),
    ('''def forward(self, x):
    _mend_rt = x + 1
    print("alias taken", _mend_rt)
    return _mend_rt
''',
     '''import mend.runtime as _mend_rt_1

def forward(self, x):
    _mend_rt = x + 1
    _mend_rt_1.defer_print("alias taken", _mend_rt)
    return _mend_rt
'''),
    ('''import torch


def forward(self, x, *extra):
    with torch.no_grad():
        print(*extra, x.max())
    return x
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x, *extra):
    with torch.no_grad():
        _mend_rt.defer_print(*extra, x.max())
    return x
'''),
    # a check that can fail in the same graph follows: the call stays ordered against it
    ('''import torch


def forward(self, x):
    print("checking", x.sum())
    torch._assert_async((x < 10).all(), "x too large")
    return x
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x):
    _mend_rt.defer_print("checking", x.sum(), ordered=True)
    torch._assert_async((x < 10).all(), "x too large")
    return x
'''),
    # in a loop, a check anywhere in the body runs after the call on the next iteration
    ('''import logging

logger = logging.getLogger(__name__)


def forward(self, hs):
    for h in hs:
        if torch.isinf(h).any():
            raise ValueError("inf")
        logger.info("layer %s", h.mean())
    return hs
''',
     '''import logging; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, hs):
    for h in hs:
        if torch.isinf(h).any():
            raise ValueError("inf")
        _mend_rt.defer_log(logger, "info", "layer %s", h.mean(), ordered=True)
    return hs
'''),
    # a shape check is decided while Dynamo traces, not by a kernel: no ordering needed
    ('''import torch


def forward(self, w, bsz):
    print("weights", w.sum())
    if w.size() != (bsz, 4) or w.dim() != 2:
        raise ValueError("bad shape")
    return w
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, w, bsz):
    _mend_rt.defer_print("weights", w.sum())
    if w.size() != (bsz, 4) or w.dim() != 2:
        raise ValueError("bad shape")
    return w
'''),
    # an `assert` on sizes is decided while Dynamo traces (marian's and whisper's head-mask
    # check): it leaves nothing in the graph, so the call replays after it
    ('''import torch


def forward(self, x, head_mask=None):
    print("x", x.sum())
    if head_mask is not None:
        assert head_mask.size()[0] == (len(self.layers)), f"{head_mask.size()[0]} layers"
    return x
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x, head_mask=None):
    _mend_rt.defer_print("x", x.sum())
    if head_mask is not None:
        assert head_mask.size()[0] == (len(self.layers)), f"{head_mask.size()[0]} layers"
    return x
'''),
    # an `assert` on a tensor becomes torch._assert_async in the graph (Dynamo, torch 2.13),
    # even without a call in its test: the call stays ordered against it
    ('''import torch


def forward(self, x, n):
    print("x", x.sum())
    y = x * 2
    assert y > n, "too small"
    return y
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x, n):
    _mend_rt.defer_print("x", x.sum(), ordered=True)
    y = x * 2
    assert y > n, "too small"
    return y
'''),
    # a raise on a host value (a config flag, `isinstance`) is no check in the graph
    ('''import torch


def forward(self, x):
    print("x", x.sum())
    if not isinstance(x, torch.Tensor) or self.config.strict:
        raise TypeError("x")
    return x
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x):
    _mend_rt.defer_print("x", x.sum())
    if not isinstance(x, torch.Tensor) or self.config.strict:
        raise TypeError("x")
    return x
'''),
]

FIX_EXAMPLES += [
    # `t.item()` as a whole argument, a whole f-string field or a logger's %-argument: item(t) reads
    # the number from the snapshot at replay (lazy-item-equals-item)
    ('''import logging

import torch

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    print("norm", x.norm().item())
    logger.info(f"aux loss {loss.item():.4f}")
    logger.debug("step %d loss %f", self.step.item(), loss.item())
    return x * loss
''',
     '''import logging

import torch; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    _mend_rt.defer_print("norm", _mend_rt.item(x.norm()))
    logger.info(f"aux loss {loss.item():.4f}")
    logger.debug("step %d loss %f", self.step.item(), loss.item())
    return x * loss
'''),
    ('''import logging

import torch

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    logger.info(f"aux loss {loss.item():.4f}")
    return x * loss
''',
     '''import logging

import torch; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    _mend_rt.defer_log(logger, "info", _mend_rt.fmt("aux loss {:.4f}", _mend_rt.item(loss)))
    return x * loss
'''),
    ('''import logging

import torch

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    logger.debug("step %d loss %f", self.step.item(), loss.item())
    return x * loss
''',
     '''import logging

import torch; import mend.runtime as _mend_rt

logger = logging.getLogger(__name__)


def forward(self, x):
    loss = x.pow(2).mean()
    _mend_rt.defer_log(logger, "debug", "step %d loss %f", _mend_rt.item(self.step), _mend_rt.item(loss))
    return x * loss
'''),
    # float(t) / int(t) as a whole f-string field: item(t, float) / item(t, int), converted at replay
    ('''import torch


def forward(self, x, done):
    loss = x.pow(2).mean()
    print(f"loss={float(loss):.4f} active={int((~done).sum())}")
    return x * loss
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x, done):
    loss = x.pow(2).mean()
    _mend_rt.defer_print(_mend_rt.fmt("loss={:.4f} active={}", _mend_rt.item(loss, float), _mend_rt.item((~done).sum(), int)))
    return x * loss
'''),
    # `.tolist()` as a whole argument or field (helper-97 f2: routing counts printed per expert): the
    # nested list read from the snapshot at replay, as `.item()` is
    ('''import torch


def forward(self, x):
    counts = torch.bincount(x.argmax(-1), minlength=4)
    print("tokens per expert:", counts.tolist(), f"{x.amax(-1).tolist()}")
    return x
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x):
    counts = torch.bincount(x.argmax(-1), minlength=4)
    _mend_rt.defer_print("tokens per expert:", _mend_rt.item(counts, _mend_rt.tolist), _mend_rt.fmt("{}", _mend_rt.item(x.amax(-1), _mend_rt.tolist)))
    return x
'''),
    # a %-format (helper-100 m27: Dynamo raised TypeError tracing `%` with a tensor in the tuple)
    ('''import torch


def forward(self, x):
    loss = x.pow(2).mean()
    print("step %d loss %s" % (self.step, loss))
    return x * loss
''',
     '''import torch; import mend.runtime as _mend_rt


def forward(self, x):
    loss = x.pow(2).mean()
    _mend_rt.defer_print(_mend_rt.pct("step %d loss %s", (self.step, loss)))
    return x * loss
'''),
]

FIX_EXAMPLES += CONDITIONAL_FIX_EXAMPLES

# (source, a substring of the reason); the site is the first line with a call (example_line)
DECLINE_EXAMPLES: list[tuple[str, str] | DeclineExample] = [
    # TRAP: the original formatted `h` before `self.renorm(h)` could write it in place (helper-101 F1)
    ('''import torch


def forward(self, h):
    print("h %s" % (h,), "call", self.renorm(h))
    return h
''', "runs after a formatted argument"),
    # the level read on the host is the break; the guard decides whether the arguments run at all
    DeclineExample('''import logging

logger = logging.getLogger(__name__)


def forward(self, h):
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("hidden mean %s", h.mean())
    return h
''', "reads the logger's level on the host", line=7),
    # TRAP: stacklevel=2 names the caller's frame; replayed from the traced stack (which omits
    # torch.nn's call frames) it named another line, and a Block used twice warned twice
    ('''import warnings


def forward(self, x, scale=None):
    if scale is not None:
        warnings.warn("`scale` is deprecated", FutureWarning, stacklevel=2)
    return x
''',
     'names a caller'),
    ('''import warnings


def forward(self, x):
    warnings.warn("legacy path", UserWarning, 3)
    return x
''',
     'names a caller'),
    ('''import logging

logger = logging.getLogger(__name__)


def forward(self, x):
    logger.info("x %s", x, ordered=1)
    return x
''',
     'takes for itself'),
    ('''def forward(self, x):
    y = print("value used")
    return x
''',
     'is used'),
    ('''import warnings


def forward(self, x):
    return warnings.warn("value used")
''',
     'is used'),
    ('''def forward(self, x):
    print("to a file", x, file=self.log_file)
    return x
''',
     'stream other than sys.stdout/sys.stderr'),
    # `.item()` feeding Python code inside the arguments: the number is needed before the call
    ('''def forward(self, x):
    print("loss", round(x.sum().item(), 4))
    return x
''',
     'reads a tensor on the host inside the call'),
    ('''def forward(self, x):
    print("ids", len(x.tolist()))
    return x
''',
     'reads a tensor on the host inside the call'),
    ('''def forward(self, x):
    print("bumped", x.add_(1))
    return x
''',
     'has a side effect'),
    ('''def forward(self, x):
    print("next batch", next(self.batches))
    return x
''',
     'has a side effect'),
    ('''def forward(self, x):
    print("walrus", (y := x + 1))
    return y
''',
     'binds or yields'),
    ('''import logging

logger = logging.getLogger(__name__)


def forward(self, x):
    logger.exception("failed")
    return x
''',
     'records the exception or stack'),
    ('''import logging

logger = logging.getLogger(__name__)


def forward(self, x):
    logger.warning("with traceback", exc_info=True)
    return x
''',
     'records the exception or stack'),
    ('''import logging


def forward(self, x):
    logging.getLogger(__name__).info("computed logger")
    return x
''',
     'computed by an expression'),
    ('''def forward(self, x):
    self.loggers[0].info("indexed logger")
    return x
''',
     'computed by an expression'),
    ('''import warnings


def forward(self, x):
    try:
        warnings.warn("caught below")
    except UserWarning:
        x = x + 1
    return x
''',
     '`try` block'),
    ('''import warnings


def forward(self, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.warn("silenced here")
    return x
''',
     'ends before the deferred effect is replayed'),
    ('''from rich import print


def forward(self, x):
    print("rich print")
    return x
''',
     'not the builtin'),
    ('''import numpy as warnings


def forward(self, x):
    warnings.warn("not the stdlib")
    return x
''',
     'not the standard `warnings` module'),
    ('''print("at import time")
''',
     'not inside a function'),
    ('''def forward(self, x, **kw):
    print("unpacked", **kw)
    return x
''',
     'unpacked (`**`)'),
    ('''def forward(self, x):
    print(f"{x.shape=}")
    return x
''',
     '`=` specifier'),
    ('''def forward(self, x):
    print(f"{x.norm():.{self.digits}f}")
    return x
''',
     'nested format spec'),
    ('''import warnings


def forward(self, x):
    warnings.warn("3.12 only", skip_file_prefixes=("/lib",))
    return x
''',
     'does not replay'),
    # no call to defer on the line (there is no site in the example: its line is given)
    DeclineExample('''def forward(self, x):
    h = x.relu()
    return h
''', 'no print/logger/warnings.warn call', line=2),
    *CONDITIONAL_DECLINE_EXAMPLES,
]



def _has_site(source: str) -> bool:
    try:
        example_line(source)
    except ValueError:
        return False
    return True


# No-op examples: source left unchanged on every line: no call to defer, and the rule's own
# output where no other call is left (a deferred call is not a site again).
NOOP_EXAMPLES: list[str] = [
    '''import torch


def forward(self, x):
    h = x.relu()
    return h
''',
    *(ex[1] for ex in FIX_EXAMPLES if not _has_site(ex[1])),
]
