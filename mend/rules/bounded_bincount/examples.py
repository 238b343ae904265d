"""bounded-bincount's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample  # noqa: F401  (the type of DECLINE_EXAMPLES' entries)


def example_line(source: str) -> int:
    """The line of an example's site: its first line calling ``bincount``."""
    for i, text in enumerate(source.splitlines(), 1):
        if "bincount(" in text:
            return i
    raise ValueError("no bincount call in example")


_HEAD = "import torch\n\n\n"

FIX_EXAMPLES: list[tuple] = [
    # a router's tokens-per-expert count (torchtitan / Megatron-style load balancing): argmax over
    # E logits, so every index is below E
    (
        'import torch\n\n\ndef load(logits, num_experts):\n    counts = torch.bincount(logits.argmax(dim=-1), minlength=num_experts)\n    return counts\n',
        "import torch\n\n\ndef load(logits, num_experts):\n    counts = (lambda _mend_x: (lambda _mend_i, _mend_n, _mend_m: torch.zeros(_mend_m, dtype=torch.int64, device=_mend_i.device).scatter_add(0, _mend_i, torch.ones_like(_mend_i)) if type(_mend_i) is torch.Tensor and _mend_i.dim() == 1 and _mend_i.device.type != 'meta' and type(_mend_m) is int and _mend_m < 2**63 and type(_mend_n) is int and not torch.compiler.is_exporting() and _mend_m >= _mend_n else torch.bincount(_mend_i, minlength=_mend_m))(_mend_x.argmax(dim=-1), _mend_x.shape[-1] if type(_mend_x) is torch.Tensor and _mend_x.dim() > 0 else None, num_experts))(logits)  # mend: bounded-bincount (was: torch.bincount(logits.argmax(dim=-1), minlength=num_experts))\n    return counts\n",
    ),
    # top-k routing, the indices bound on the line before and flattened at the count; the method form
    (
        'import torch\n\n\nclass Router(torch.nn.Module):\n    def forward(self, probs):\n        top = torch.topk(probs, 2, dim=-1).indices\n        load = top.flatten().bincount(minlength=self.num_experts).float()\n        return load\n',
        "import torch\n\n\nclass Router(torch.nn.Module):\n    def forward(self, probs):\n        top = torch.topk(probs, 2, dim=-1).indices\n        load = (lambda _mend_i, _mend_n, _mend_m: torch.zeros(_mend_m, dtype=torch.int64, device=_mend_i.device).scatter_add(0, _mend_i, torch.ones_like(_mend_i)) if type(_mend_i) is torch.Tensor and _mend_i.dim() == 1 and _mend_i.device.type != 'meta' and type(_mend_m) is int and _mend_m < 2**63 and type(_mend_n) is int and not torch.compiler.is_exporting() and _mend_m >= _mend_n else _mend_i.bincount(minlength=_mend_m))(top.flatten(), probs.shape[-1] if type(probs) is torch.Tensor and probs.dim() > 0 else None, self.num_experts).float()  # mend: bounded-bincount (was: top.flatten().bincount(minlength=self.num_experts))\n        return load\n",
    ),
    # the indices of max along dim 1 ([1] of the pair), torch spelled `th`
    (
        'import torch as th\n\n\ndef hist(scores, n):\n    return th.bincount(th.max(scores, 1)[1], minlength=n)\n',
        "import torch as th\n\n\ndef hist(scores, n):\n    return (lambda _mend_x: (lambda _mend_i, _mend_n, _mend_m: th.zeros(_mend_m, dtype=th.int64, device=_mend_i.device).scatter_add(0, _mend_i, th.ones_like(_mend_i)) if type(_mend_i) is th.Tensor and _mend_i.dim() == 1 and _mend_i.device.type != 'meta' and type(_mend_m) is int and _mend_m < 2**63 and type(_mend_n) is int and not th.compiler.is_exporting() and _mend_m >= _mend_n else th.bincount(_mend_i, minlength=_mend_m))(th.max(_mend_x, 1)[1], _mend_x.shape[1] if type(_mend_x) is th.Tensor and _mend_x.dim() > 1 else None, n))(scores)  # mend: bounded-bincount (was: th.bincount(th.max(scores, 1)[1], minlength=n))\n",
    ),
    # argmax over the flattened tensor: the indices lie below numel()
    (
        'import torch\n\n\ndef f(x, n):\n    return torch.bincount(x.argmax().view(-1), minlength=n)\n',
        "import torch\n\n\ndef f(x, n):\n    return (lambda _mend_x: (lambda _mend_i, _mend_n, _mend_m: torch.zeros(_mend_m, dtype=torch.int64, device=_mend_i.device).scatter_add(0, _mend_i, torch.ones_like(_mend_i)) if type(_mend_i) is torch.Tensor and _mend_i.dim() == 1 and _mend_i.device.type != 'meta' and type(_mend_m) is int and _mend_m < 2**63 and type(_mend_n) is int and not torch.compiler.is_exporting() and _mend_m >= _mend_n else torch.bincount(_mend_i, minlength=_mend_m))(_mend_x.argmax().view(-1), _mend_x.numel() if type(_mend_x) is torch.Tensor else None, n))(x)  # mend: bounded-bincount (was: torch.bincount(x.argmax().view(-1), minlength=n))\n",
    ),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # a review: an unbound method's first argument is the tensor, not `torch.Tensor`
    (_HEAD + "def f(p, n):\n    return torch.bincount(torch.Tensor.topk(p, 2)[1].flatten(), minlength=n)\n",
     "unbound"),
    # a review: `view(torch.int32)` is a cast, not a reshape, at the count of a bound local
    (_HEAD + "def f(s, n):\n    top = s.argmax(-1)\n    return torch.bincount(top.view(torch.int32), minlength=n)\n",
     "reshapes otherwise than to 1-D"),
    # the rewrite's own parameter names would capture the user's
    (_HEAD + "def f(s, _mend_m, n):\n    return torch.bincount(s.topk(_mend_m, dim=-1)[1].flatten(), minlength=n)\n",
     "the rewrite's own lambda parameters"),
    # `int` rebound: the guard's `type(m) is int` would not be the builtin
    (_HEAD + "int = float\n\n\ndef f(x, n):\n    return torch.bincount(x.argmax(-1), minlength=n)\n", "binds `int`"),
    # trap: indices of unknown origin may exceed minlength (bincount then grows; scatter_add_ raises)
    (_HEAD + "def f(ids, n):\n    return torch.bincount(ids, minlength=n)\n", "not known to lie below minlength"),
    # trap: weights change the output dtype (float64 counts for float weights)
    (_HEAD + "def f(x, w, n):\n    return torch.bincount(x.argmax(-1), weights=w, minlength=n)\n",
     "weights change the dtype"),
    # no minlength: the length is max(index) + 1, data-dependent by design
    (_HEAD + "def f(x):\n    return torch.bincount(x.argmax(-1))\n", "missing minlength"),
    # trap: `torch.max(a, b)` is the elementwise maximum; `[1]` is its second row, not indices
    (_HEAD + "def f(a, b, n):\n    return torch.bincount(torch.max(a, b)[1], minlength=n)\n",
     "not an integer literal"),
    # trap: something runs between the binding and the count (here an in-place transpose could
    # change which dimension bounds the indices)
    (_HEAD + "def f(logits, n):\n    top = logits.argmax(-1)\n    logits.t_()\n    return torch.bincount(top, minlength=n)\n",
     "not bound on the line just before"),
    # the statement evaluates a call before the count
    (_HEAD + "def f(logits, n, g):\n    top = logits.argmax(-1)\n    c = g(top) + torch.bincount(top, minlength=n)\n    return c\n",
     "evaluates something before the bincount"),
    # the bounding tensor is an expression on the line before: it cannot be read again
    (_HEAD + "def f(h, w, n):\n    top = (h @ w).argmax(-1)\n    return torch.bincount(top, minlength=n)\n",
     "not a plain name"),
    # minlength computed by a call: evaluating it moves
    (_HEAD + "def f(x, cfg):\n    return torch.bincount(x.argmax(-1), minlength=cfg.get())\n",
     "not a literal, a name or an attribute"),
    # numpy's bincount is not torch's
    ("import numpy as np\n\n\ndef f(x, n):\n    return np.bincount(x.argmax(-1), minlength=n)\n", "not torch's"),
    # `type` rebound in the module
    (_HEAD + "type = str\n\n\ndef f(x, n):\n    return torch.bincount(x.argmax(-1), minlength=n)\n", "binds `type`"),
    # a reshape that is not to 1-D
    (_HEAD + "def f(x, n):\n    return torch.bincount(x.argmax(-1).view(2, -1), minlength=n)\n",
     "reshapes otherwise than to 1-D"),
    # sort's indices are a permutation of the dimension, but not taken: named in the reason
    (_HEAD + "def f(x, n):\n    return torch.bincount(x.sort(-1)[1].flatten(), minlength=n)\n", "come from `sort`"),
]

NOOP_EXAMPLES: list[str] = [
    # histc is traced: nothing to rewrite
    _HEAD + "def f(x, n):\n    return torch.histc(x.argmax(-1).float(), bins=n, min=0, max=n)\n",
]
