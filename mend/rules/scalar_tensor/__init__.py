"""Rule: Python scalars wrapped in tensors (issue 10, kind 2).

transformers 5.24's deberta (``modeling_deberta.py:123``) returns a Python int as a 0-d
tensor::

    def compute_attention_span(query_layer, key_layer, max_relative_positions: int):
        return torch.tensor(min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions))

and slices with it (``rel_embeddings[m - att_span : m + att_span]``, :300): a slice bound
is read with ``Tensor.item()``, which breaks the graph -- inside the encoder's layer loop,
so Dynamo skips the whole frame (12 graphs; 1 after the rewrite). The rewrite lands at the
definition, not at the break::

    return min(max(query_layer.size(-2), key_layer.size(-2)), max_relative_positions)

The local form: ``L = torch.tensor(E)`` in the function that uses ``L`` (a ViT's
``start = torch.tensor(1 + self.num_registers); h[:, start:]``, helper-53's
``w = torch.tensor(self.window); x[:, -w:]``, which made Dynamo skip the whole frame) becomes
``L = E``. ``E`` may also read attribute chains of the parameters (``self.window``), observed
Python ints where ``L`` is bound; ``L`` must be bound once, on a line of its own outside a
loop, captured by no nested scope, in a function that reads no locals by name
(``scalar-local-screened``, a static screen of the mended file); its uses are screened as a
helper's result is. No caller sees ``L``, so no caller is screened.

Changing a function's return type is visible to every caller, so the screen (static) takes
a function only when: it is module-level, undecorated, defined once, not in ``__all__``
(a non-literal ``__all__`` declines), its body is ``return torch.tensor(E)`` with one
positional argument (``dtype=``/``device=`` decline: the tensor is then not what an int
is), ``E`` is built only from ``.size(k)``/``.shape[k]`` of its parameters, its parameters,
int literals, ``min``/``max`` of two or more values and ``+ - *`` (a Python int by
construction once the parameters are ints: observed); every reference to it in the module
is a direct call whose result is bound to a local name (``x[: f(...)]`` inline, ``g = f``,
a return of the call decline); the local is bound once, captured by nothing, and every use
of it is an operand of a ``+ - *`` chain (names, attributes, int literals) that ends in a
slice bound or index, a ``torch.clamp`` bound, an ``if``/``while`` comparison, or tensor
arithmetic. A use returned, stored, passed to a function, read as an attribute
(``.item()``), compared outside an ``if``, or met with ``/``, ``//``, ``%``, ``**`` or a
float literal declines: the value would be a Python number there where it was a tensor,
or would compute differently (``0-d int64 / 2`` is a float32 tensor, ``int / 2`` a float64
float). The scan's matcher also screens the other ``.py`` files of the package for the
name (an import would see the int).

Traps, and how each is handled:

* a 0-d int64 tensor and a Python int promote a *dimensioned* tensor alike (int32, uint8,
  float stay; bool + either is int64), but a 0-d int32/int16/int8/uint8 operand is promoted
  to int64 by the 0-d tensor and kept by the int: ``scalar-use-promotion`` observes each
  tensor operand's rank and dtype and refutes that case;
* int64 tensor arithmetic wraps where Python ints do not (and an int beyond int64 raises
  when it meets a tensor): ``scalar-use-same`` proves, with 64-bit vectors against exact
  integers, that every number a use computes agrees, for sizes and ints below 2^48;
* an int32 tensor plus a value beyond int32 wraps identically with the int and the 0-d
  tensor on torch 2.13 (measured), so it is not declined: the value is converted to int64
  either way and cast the same;
* encodec keeps stride/kernel/padding as 0-d int64 buffers registered in ``__init__`` and
  computes ``(length - k + p) / s`` in float32 tensor arithmetic; above 2^24 samples its ceil
  differs from exact ints (length 16,777,217 pads -1, an int rewrite 1): declined, naming
  it; buffers in general decline here (they are module state a user may write): the
  constant-buffer rule takes them, with twins, a guard and a lemma for the ceil;
* ``torch.IntTensor([n])[0]`` (vits): ``n``'s element type is not known statically (a float
  truncates, an int beyond int32 raises), so the indexed form decides it at run time: see
  :mod:`mend.rules.scalar_tensor.indexed` (``L = torch.IntTensor([E])`` read only as ``L[0]``,
  a slice bound, becomes ``(S if type(S) is int and -2 ** 31 <= S < 2 ** 31 else L[0])`` with
  ``S = E`` bound just before; vits' WaveNet, 9 -> 6 graphs on transformers 5.25; also
  ``N = torch.IntTensor([E])[0]`` and ``N = L[0]``, with every read of ``N`` screened). A read
  that is not a slice bound (arithmetic: an int and a 0-d int32 tensor promote differently),
  a slice of an expression, a binding in a branch or loop, a decorated callee, or a rebound
  ``type``/``int`` decline.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.scalar_tensor.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.scalar_tensor.rewrite import rewrite
from mend.rules.scalar_tensor.screen import BOUND, CATEGORY, NAME, match, package_importers

FIX_SAFETY = """\
Emitted only when every obligation is established, at every level (``--verify fast``
included): the value is proved within int64 and every use proved to compute the same
number with the int (Z3); the operands' kinds, ranks and dtypes, and the function's
callers, are checked (an observation of the example run; a static screen).

Proved by Z3: ``scalar-value-int64`` -- the wrapped value lies within int64 for every size
in [0, 2^48] and int leaf in [-2^48, 2^48], so ``torch.tensor(E)`` was an exact int64;
``scalar-use-same`` -- every slice bound, index, clamp bound, comparison operand and every
scalar operand where it meets a tensor has the same value with the 0-d int64 tensor
(wrapping 64-bit arithmetic) as with the int (exact).

Resting on checks: ``scalar-leaves-observed`` (the size receivers are tensors and the int
parameters Python ints, not bools, on every hit of the return line), ``scalar-use-promotion``
(every tensor operand a use meets is promoted alike by a 0-d int64 tensor and by an int:
dimensioned, or 0-d of a dtype neither changes; observed on every hit), and
``scalar-callers-screened`` (a static screen: every reference in the mended module is a
direct call bound to a local, no ``__all__`` export, and no other file of the package names
the function; code outside the package that imports it is not seen); in the local form
``scalar-local-screened`` instead (the local's one binding, no capture, no frame reads in the
function; a callee in another module reading its caller's frame is not seen).

The indexed form (``L[0]`` of ``torch.IntTensor([E])``): ``scalar-index-exact`` (Z3: every
int the run-time test admits is held exactly by the constructor's dtype), and the checks
``scalar-index-guarded`` and ``scalar-index-slice-only`` (static screens of the mended file:
the snapshot, the test at every read, every read a slice bound directly or through a
module-level function's parameter) and ``scalar-index-receivers-observed`` (an observation:
each sliced container is a plain tensor on the example run), so it is an ``unsafe`` fix.

Stated assumption (every form): the forward does not run under a ``meta`` default device
(``with torch.device("meta")``), where ``torch.tensor(E)`` is a meta tensor whose value the
original cannot read (it raises) and the int can; the indexed form takes only the legacy
``IntTensor``/``LongTensor``, which make a CPU tensor on every default device.

Never inference-only: the value is an integer with no gradient.
"""

KINDS = frozenset({"scalar-value-int64", "scalar-use-same", "scalar-use-promotion", "scalar-leaves-observed",
                   "scalar-callers-screened", "scalar-local-screened"})
INDEXED_KINDS = frozenset({"scalar-index-exact", "scalar-index-guarded", "scalar-index-slice-only",
                           "scalar-index-receivers-observed"})

RULE = Rule(
    name=NAME,
    categories=(CATEGORY,),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=KINDS | INDEXED_KINDS,
    required_kinds=KINDS | INDEXED_KINDS,
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["BOUND", "CATEGORY", "NAME", "RULE", "match", "package_importers", "rewrite"]
