"""scalar-tensor's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line). The site of a FIX example is the
function's ``return torch.tensor(...)`` line (where the rewrite lands); a DECLINE example
names its site (a use of the value, where Dynamo breaks) with :func:`_at`."""
from __future__ import annotations


def example_line(source: str) -> int:
    """The line of an example's site: its first ``return <torch>.tensor(`` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if text.lstrip().startswith("return ") and ".tensor(" in text:
            return i
    raise ValueError("no `return torch.tensor(...)` in example")


def _at(source: str, needle: str) -> int:
    """The first line of ``source`` holding ``needle``."""
    return next(i for i, text in enumerate(source.splitlines(), 1) if needle in text)


_DEBERTA = '''import torch


def compute_attention_span(query_layer, key_layer, max_relative_positions: int):
    return torch.tensor(min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions))


class Attention(torch.nn.Module):
    def forward(self, query_layer, key_layer, relative_pos, rel_embeddings):
        att_span = compute_attention_span(query_layer, key_layer, self.max_relative_positions)
        rel_embeddings = rel_embeddings[
            self.max_relative_positions - att_span : self.max_relative_positions + att_span, :
        ]
        c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
        return rel_embeddings, c2p_pos
'''

_SPAN = '''import torch as th


def span_of(x, limit):
    """The span, at most `limit`."""
    return th.tensor(min(x.shape[1] - 1, limit))


def forward(x, pos, limit):
    span = span_of(x, limit)
    if span > 2:
        x = x * 2
    return x[:, :span] * 2, pos - span
'''


def _with_use(use: str, value: str = "min(x.size(-1), n)", extra: str = "") -> str:
    return f'''import torch
{extra}

def span_of(x, n):
    return torch.tensor({value})


def forward(x, n):
    span = span_of(x, n)
    {use}
'''


FIX_EXAMPLES: list[tuple[str, str]] = [
    # transformers 5.24 deberta (modeling_deberta.py:123, used at :297-:324): the slice bound
    # is read with Tensor.item() inside the encoder's layer loop (12 graphs -> 1 by hand)
    (_DEBERTA, _DEBERTA.replace(
        "    return torch.tensor(min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions))",
        "    return min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions)  # mend: scalar-tensor "
        "(was: torch.tensor(min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions)))")),
    # `torch` under another name, a docstring, `.shape[k]`, an `if` comparison, a slice bound and
    # tensor arithmetic with the value
    (_SPAN, _SPAN.replace("    return th.tensor(min(x.shape[1] - 1, limit))",
                          "    return min(x.shape[1] - 1, limit)  # mend: scalar-tensor "
                          "(was: th.tensor(min(x.shape[1] - 1, limit)))")),
]

_RETURNED = _with_use("return span")
_DIVIDED = _with_use("return x * (span / 2)")
_ITEM = _with_use("return x[: span.item()]")
_FLOAT32 = _with_use("return x[:span]").replace("torch.tensor(min(x.size(-1), n))",
                                                "torch.tensor(min(x.size(-1), n), dtype=torch.float32)")
_EXPORTED = _with_use("return x[:span]", extra='\n__all__ = ["span_of", "forward"]\n')
_PASSED_ON = _with_use("return x[:span]") + "\n\nALIAS = span_of\n"
_STORED = _with_use("self_state['span'] = span")
_CALLED = _with_use("return torch.narrow(x, 0, 0, span)")
_NOT_INT = _with_use("return x[:span]", value="x.size(-1) / 2")
_SUM = _with_use("return x[:span]", value="x.sum()")
_FLOAT_LIT = _with_use("return x * (span + 0.5)")
_FLAG = _with_use("flag = span > 3")
# an adversarial review: a tensor hashes by identity, so `span in {1, 2}` is always False for it
_MEMBER = _with_use("if span in {1, 2}:\n        x = x * 2\n    return x[:span]")
_DECORATED = _with_use("return x[:span]").replace("def span_of", "@torch.jit.script\ndef span_of")
_INLINE = '''import torch


def span_of(x, n):
    return torch.tensor(min(x.size(-1), n))


def forward(x, n):
    return x[: span_of(x, n)]
'''
# transformers 5.24 encodec (modeling_encodec.py:115-136): 0-d int64 buffers in float32 arithmetic
_ENCODEC = '''import torch
from torch import nn


class Conv1d(nn.Module):
    def __init__(self, kernel_size, stride):
        super().__init__()
        self.stride = nn.Buffer(torch.tensor(stride, dtype=torch.int64), persistent=False)
        self.kernel_size = nn.Buffer(torch.tensor(kernel_size, dtype=torch.int64), persistent=False)
        self.padding_total = nn.Buffer(self.kernel_size - self.stride, persistent=False)

    def extra_padding(self, hidden_states):
        length = hidden_states.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        return n_frames * self.stride + self.kernel_size - self.padding_total - length
'''
# transformers 5.24 vits (modeling_vits.py:348, :362): a slice bound built as IntTensor([n])[0]
_VITS = '''import torch


def fused(a, b, n_channels):
    return a[:, : n_channels] + b[:, : n_channels]


class WaveNet(torch.nn.Module):
    def forward(self, a, b):
        num_channels_tensor = torch.IntTensor([self.hidden_size])
        acts = fused(a, b, num_channels_tensor[0])
        return acts
'''

_MADE_INLINE = '''import torch


def forward(self, h):
    start = torch.tensor(1 + self.num_registers)
    return h[:, start:]
'''

DECLINE_EXAMPLES: list[tuple] = [
    # the caller returns the value: its caller would get a Python int instead of a tensor
    (_RETURNED, "is returned", _at(_RETURNED, "return span")),
    # true division: 0-d int64 / 2 is a float32 tensor, int / 2 a float64 Python float
    (_DIVIDED, "true division", _at(_DIVIDED, "span / 2")),
    # an explicit `.item()`: an int has no `.item()`
    (_ITEM, "reads an attribute", _at(_ITEM, "span.item()")),
    # a dtype makes the tensor something a Python number is not
    (_FLOAT32, "`dtype=`", _at(_FLOAT32, "return x[:span]")),
    (_EXPORTED, "exported in `__all__`", _at(_EXPORTED, "return x[:span]")),
    # the function itself is passed on: whoever calls it later sees the changed type
    (_PASSED_ON, "referenced other than by direct calls", _at(_PASSED_ON, "return x[:span]")),
    (_INLINE, "referenced other than by direct calls", _at(_INLINE, "return x[")),
    (_STORED, "is stored", _at(_STORED, "self_state")),
    (_CALLED, "is passed to `torch.narrow`", _at(_CALLED, "torch.narrow")),
    (_NOT_INT, "operator other than + - *", _at(_NOT_INT, "return x[:span]")),
    (_SUM, "is not a size", _at(_SUM, "return x[:span]")),
    (_FLOAT_LIT, "the float `0.5`", _at(_FLOAT_LIT, "0.5")),
    (_FLAG, "would be a Python bool", _at(_FLAG, "flag =")),
    (_MEMBER, "tests membership or identity", _at(_MEMBER, "return x[:span]")),
    (_DECORATED, "is decorated", _at(_DECORATED, "return x[:span]")),
    # encodec: the buffers feed float32 tensor arithmetic whose ceil differs from exact ints above 2^24
    (_ENCODEC, "float32 tensor arithmetic", _at(_ENCODEC, "n_frames = (length")),
    # the indexed form (vits): the whole tensor is passed on, not read as `L[0]`
    (_VITS.replace("num_channels_tensor[0])", "num_channels_tensor)"), "not only read as",
     _at(_VITS, "acts = fused")),
    # the callee computes with the bound: an int and a 0-d int32 tensor differ in arithmetic
    (_VITS.replace("+ b[:, : n_channels]", "* n_channels"), "not only as a slice's bound", _at(_VITS, "acts = fused")),
    # a slice of an expression: whose `__getitem__` runs is not observed
    (_VITS.replace("a[:, : n_channels] +", "(a * 2)[:, : n_channels] +"), "not of a name", _at(_VITS, "acts = fused")),
    # the tensor is made in a branch: a read could come before it (UnboundLocalError either way, but
    # naming another local)
    (_VITS.replace("        num_channels_tensor = torch.IntTensor([self.hidden_size])\n",
                   "        if a.dim() > 1:\n            num_channels_tensor = torch.IntTensor([self.hidden_size])\n"),
     "not a statement of its own at the top level", _at(_VITS, "acts = fused") + 1),
    # `type` is rebound: the run-time test would not read the builtin
    (_VITS.replace("import torch\n", "import torch\n\ntype = str\n"), "`type` is bound in the module", _at(_VITS, "acts = fused") + 2),
    # a decorated callee: what runs is not the function as written
    (_VITS.replace("def fused", "@torch.jit.script\ndef fused"), "is decorated", _at(_VITS, "acts = fused") + 1),
    # the local form: a keyword argument makes the tensor something a Python number is not
    (_MADE_INLINE.replace("num_registers)", "num_registers, dtype=torch.int32)"), "`dtype=`",
     _at(_MADE_INLINE, "return h[:, start:]")),
    # the local form: the local is returned (its caller would get an int)
    (_MADE_INLINE.replace("return h[:, start:]", "return h[:, start:], start"), "which the rule does not screen",
     _at(_MADE_INLINE, "return h[:, start:]")),
    # the local form: the value reads a name that is not a parameter (its kind is not observed)
    (_MADE_INLINE.replace("1 + self.num_registers", "1 + NUM"), "is not a parameter",
     _at(_MADE_INLINE, "return h[:, start:]")),
]

NOOP_EXAMPLES: list[str] = [
    # a Python int slice bound: nothing to rewrite
    '''import torch


def forward(x, n):
    span = min(x.size(-1), n)
    return x[:span]
''',
]

# the local form (held-out case 310, helper-53's k2a): the 0-d tensor made inline in the function
# that slices with it; the binding becomes the Python int (nothing outside the function sees it)
FIX_EXAMPLES.append((_MADE_INLINE, _MADE_INLINE.replace(
    "    start = torch.tensor(1 + self.num_registers)",
    "    start = 1 + self.num_registers  # mend: scalar-tensor (was: torch.tensor(1 + self.num_registers))"),
    _at(_MADE_INLINE, "return h[:, start:]")))

# the indexed form (vits): `L[0]` of `L = torch.IntTensor([E])`, a slice bound through a
# module-level helper's parameter, reads the int where a run-time test shows it is one
FIX_EXAMPLES.append((_VITS, _VITS.replace(
    "        num_channels_tensor = torch.IntTensor([self.hidden_size])\n",
    "        _mend_n = self.hidden_size\n        num_channels_tensor = torch.IntTensor([_mend_n])  # mend: scalar-tensor\n"
).replace("num_channels_tensor[0])", "(_mend_n if type(_mend_n) is int and -2 ** 31 <= _mend_n < 2 ** 31 else "
          "num_channels_tensor[0]))"), _at(_VITS, "acts = fused")))

# the indexed form in the function itself: `x[:, :L[0]]`
_SLICED_HERE = '''import torch


def forward(self, x):
    width = torch.LongTensor([self.width])
    return x[:, : width[0]], x[:, width[0] :]
'''
FIX_EXAMPLES.append((_SLICED_HERE, _SLICED_HERE.replace(
    "    width = torch.LongTensor([self.width])\n",
    "    _mend_n = self.width\n    width = torch.LongTensor([_mend_n])  # mend: scalar-tensor\n").replace(
    "width[0]", "(_mend_n if type(_mend_n) is int and -2 ** 63 <= _mend_n < 2 ** 63 else width[0])"),
    _at(_SLICED_HERE, "return x[")))

# the indexed form, made inline and bound to a local (`N = torch.IntTensor([E])[0]`), and a
# local bound to `L[0]`: every read of the local is a slice bound
_INLINE = '''import torch


def forward(self, x):
    end = torch.IntTensor([self.width + 1])[0]
    return x[:, :end], x[:, end:]
'''
FIX_EXAMPLES.append((_INLINE, _INLINE.replace(
    "    end = torch.IntTensor([self.width + 1])[0]\n",
    "    _mend_n = self.width + 1\n    end = (_mend_n if type(_mend_n) is int and -2 ** 31 <= _mend_n < 2 ** 31 else "
    "torch.IntTensor([_mend_n])[0])  # mend: scalar-tensor\n"), _at(_INLINE, "return x[")))
_ALIAS = _SLICED_HERE.replace("    return x[:, : width[0]], x[:, width[0] :]\n",
                              "    w = width[0]\n    return x[:, :w], x[:, w:]\n")
FIX_EXAMPLES.append((_ALIAS, _ALIAS.replace(
    "    width = torch.LongTensor([self.width])\n",
    "    _mend_n = self.width\n    width = torch.LongTensor([_mend_n])  # mend: scalar-tensor\n").replace(
    "w = width[0]", "w = (_mend_n if type(_mend_n) is int and -2 ** 63 <= _mend_n < 2 ** 63 else width[0])"),
    _at(_ALIAS, "return x[")))
DECLINE_EXAMPLES.extend([
    # the local bound to the value meets a tensor in arithmetic: an int and a 0-d int32 tensor differ
    (_INLINE.replace("x[:, end:]", "x[:, end:] * end"), "not as a slice bound", _at(_INLINE, "return x[")),
    # the alias is bound twice: which value a read sees is not screened
    (_ALIAS.replace("    return x[:, :w]", "    w = w + 1\n    return x[:, :w]"), "bound more than once",
     _at(_ALIAS, "return x[") + 1),
])
DECLINE_EXAMPLES.extend([
    # `torch.tensor([n])` follows the default device: under `torch.device("meta")` its `[0]` is no
    # number (the original raises where the int would not), so only the legacy CPU constructors
    (_INLINE.replace("torch.IntTensor([self.width + 1])[0]", "torch.tensor([self.width + 1])[0]"),
     "follows the default device", _at(_INLINE, "return x[")),
    # a star import may rebind `type`, `int` or the callee
    (_VITS.replace("import torch\n", "import torch\nfrom math import *\n"), "import *", _at(_VITS, "acts = fused") + 1),
])

# helper-57's attacks on the indexed form, each an emitted rewrite that changed behaviour before
_AT = _at(_VITS, "acts = fused")
DECLINE_EXAMPLES.extend([
    # `torch` bound by a parameter: the constructor may be another backend's (wrapping int8 codes)
    (_VITS.replace("def forward(self, a, b):", "def forward(self, a, b, torch=torch):"),
     "bound other than by a top-level import", _AT),
    # the module rebinds the callee through `globals()` (an opt-in checked variant)
    (_VITS + "\n\ndef enable_checks():\n    globals()[\"fused\"] = print\n", "names `globals`", _AT),
    # a helper of the module reads the callee's frame (`sys._getframe(1).f_locals`)
    (_VITS.replace("import torch\n", "import sys\nimport torch\n\n\ndef trace(name):\n"
                   "    return sys._getframe(1).f_locals[name]\n", 1), "may read a frame's locals", _AT + 5),
    # `:=` in the callee: the sliced name may be rebound within the statement it is observed at
    (_VITS.replace("return a[:, : n_channels]", "return [a := a * 1, a[:, : n_channels]][1]"), "`:=`", _AT),
    # a decorated caller (`torch.jit.script_if_tracing`): what runs is not the function as written
    (_VITS.replace("    def forward(self, a, b):", "    @torch.jit.script_if_tracing\n    def forward(self, a, b):"),
     "is decorated", _AT + 1),
    # the parameter sizes a `range`: the reason names the use, not the bare parameter
    (_VITS.replace("return a[:, : n_channels] + b[:, : n_channels]",
                   "return a[:, : n_channels] + len(range(n_channels))"), "`range(n_channels)`", _AT),
])

# a one-element tuple (`torch.IntTensor((E,))`, helper-57's v43) is the same constructor call
_TUPLE = _SLICED_HERE.replace("torch.LongTensor([self.width])", "torch.LongTensor((self.width,))")
FIX_EXAMPLES.append((_TUPLE, _TUPLE.replace(
    "    width = torch.LongTensor((self.width,))\n",
    "    _mend_n = self.width\n    width = torch.LongTensor((_mend_n,))  # mend: scalar-tensor\n").replace(
    "width[0]", "(_mend_n if type(_mend_n) is int and -2 ** 63 <= _mend_n < 2 ** 63 else width[0])"),
    _at(_TUPLE, "return x[")))
DECLINE_EXAMPLES.append(
    # a `match` capture binds `type` too (`case type:`): the test must read the builtin
    (_VITS + "\n\ndef kind(x):\n    match x:\n        case type:\n            return type\n",
     "`type` is bound in the module", _AT))
