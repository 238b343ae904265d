"""Encoders for dead or debug-only host work removed from the traced path: screens, never
solver queries (every outcome is ``checked``, ``check_refuted`` or ``unknown``).

* ``jit-isinstance-plain``: ``torch.jit.isinstance(obj, T)`` rewritten to ``isinstance(obj, T)``.
  Rests on the installed ``torch._jit_internal._isinstance`` (and ``torch.jit.isinstance``,
  which only calls it) having the source reviewed for torch 2.13 -- a target that is a
  tuple recurses, one with a ``typing.get_origin`` goes to ``container_checker``, a raw
  container raises, a ``collections.abc.Container`` that is not a tuple raises, anything
  else is ``isinstance(obj, T)`` -- and on a screen of the target, evaluated on the installed
  torch: a type (or tuple of types) with no origin, not a raw container, not a Container.
  Probe objects cross-check both calls (a mismatch refutes). The mended call is found at its
  line, and ``isinstance`` (and a builtin target name) must not be rebound in the mended module.
* ``local-never-read``: the local assigned at the line is never read in its function (a
  load, ``del``, ``global``/``nonlocal``, ``locals()``/``vars()``/``eval``/``exec``/
  ``dir()``/``sys._getframe``/``inspect.currentframe``, nested scopes included), by a screen
  of the original source with :mod:`ast` (independent of the rule's LibCST screen); nor,
  anywhere in the module, a frame attribute, ``inspect.stack``/``trace``, an introspection
  builtin or a star import (a helper reading ``sys._getframe(1).f_locals``: helper-70).
* ``plain-tensor-repr-pure``: the mended statement is exactly ``if type(t) is not
  <torch>.Tensor or t.layout is not <torch>.strided or t.is_nested or t.dtype not in (<reviewed dtypes>):``
  around the original statement (bits8 and uint1..uint7 tensors' repr raises, complex32's
  warns: helper-70), no star import, ``type``/``repr``/``str`` are not rebound,
  and the installed ``Tensor.__repr__`` and ``torch/_tensor_str.py`` are the ones reviewed
  (formatting under ``no_grad``, no state written); for ``str``, ``Tensor.__str__`` is
  ``object.__str__`` (it calls ``__repr__``).

A hash mismatch (another torch) is ``unknown``: the review does not carry over unread.
"""
from __future__ import annotations

import ast
import builtins
import collections.abc
import hashlib
import inspect
import typing

from verifier.encoders.base import names_bound_by, Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown

# sha256 of the reviewed sources (torch 2.13.0)
REVIEWED_JIT_ISINSTANCE = {"bfaf7235b389254b30085c7b70af5bf1dac1493567a08c844017977994363e4a"}
REVIEWED__ISINSTANCE = {"bce40797ec53f7b94d658107ac18c5fc6c8bdf788d32d950fbcc6e783a11758f"}
REVIEWED_TENSOR_REPR = {"d10dc3993e79c284bd2262103e4930301733e8992b9b0e65373ea16a947ea57a"}
REVIEWED_TENSOR_STR_FILE = {"5fcb2c4e80feb8f7d458074a808c00cf0fdc2a67b964a11e7b5ece7bdd135d87"}

FRAME_READERS = {"locals", "vars", "eval", "exec", "dir", "sys._getframe", "inspect.currentframe"}


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _torch_aliases(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch":
                    names.add(a.asname or "torch")
    return names


def _bound(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
    return out


def _parse(code: str | None) -> ast.Module | None:
    try:
        return ast.parse(code) if code else None
    except SyntaxError:
        return None


def _from_torch(tree: ast.Module) -> dict[str, str]:
    """``local -> torch.X`` for names that ``from torch[.sub] import X [as local]`` binds and that
    nothing else in the module binds (no second import, assignment, parameter, def)."""
    count: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return {}      # a star import may bind anything
        names = names_bound_by(node)
        for n in names:
            count[n] = count.get(n, 0) + 1
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "torch":
            for a in node.names:
                local = a.asname or a.name
                if count.get(local) == 1:
                    out[local] = f"{node.module}.{a.name}"
    return out


def _canon(node: ast.AST, aliases: set[str], imported: dict[str, str] | None = None) -> str:
    """The expression's text with every torch alias spelled ``torch`` and every name imported
    from torch (``from torch import Tensor``) spelled in full (``torch.Tensor``)."""
    imported = imported or {}

    class T(ast.NodeTransformer):
        def visit_Name(self, n):
            if n.id in aliases:
                return ast.Name("torch", n.ctx)
            return ast.parse(imported[n.id], mode="eval").body if n.id in imported else n
    return ast.unparse(T().visit(ast.parse(ast.unparse(node), mode="eval")).body)


# -- jit-isinstance-plain ----------------------------------------------------------------

def _plain_target(value) -> str | None:
    """Why ``value`` is not a plain class target of torch.jit.isinstance, else None."""
    from torch._jit_internal import _RAW_TYPE_NAME_MAPPING

    if isinstance(value, tuple):
        for v in value:
            why = _plain_target(v)
            if why:
                return why
        return None if value else "an empty tuple"
    if not isinstance(value, type):
        return f"{value!r} is not a class"
    if typing.get_origin(value) is not None:
        return f"{value!r} has a typing origin (container_checker checks element types)"
    if value in _RAW_TYPE_NAME_MAPPING:
        return f"{value!r} is a raw container (torch.jit.isinstance raises)"
    if isinstance(value, collections.abc.Container):
        return f"{value!r} is a collections.abc.Container (torch.jit.isinstance raises for it)"
    return None


def _probes():
    import torch

    return [1, 1.5, True, "s", b"b", 1j, None, [1], (1,), {"a": 1}, torch.zeros(2), torch.nn.Parameter(torch.zeros(1)),
            torch.nn.Linear(1, 1), torch.device("cpu"), torch.float32, torch.Size([2]), torch.Generator(), object()]


def jit_isinstance_plain(ob: dict, ctx: Ctx) -> Outcome:
    import torch
    from torch import _jit_internal

    target, obj, line = ob.get("target"), ob.get("obj"), ob.get("line")
    tree = _parse(ctx.code)
    if not target or obj is None or tree is None:
        return unknown("the target, the object or the mended source is not recorded")
    if _sha(inspect.getsource(_jit_internal._isinstance)) not in REVIEWED__ISINSTANCE or \
            _sha(inspect.getsource(torch.jit.isinstance)) not in REVIEWED_JIT_ISINSTANCE:
        return unknown(f"torch.jit.isinstance on torch {torch.__version__} is not the implementation reviewed "
                       "(torch 2.13): its reduction to isinstance for a plain class is not re-established")
    by = ("a screen: the installed torch.jit.isinstance is the reviewed implementation (source sha256), which "
          "returns isinstance(obj, T) for a target that is a type or tuple of types with no typing origin, not a "
          "raw container and not a collections.abc.Container; the target evaluated on the installed torch is "
          "such a target; isinstance and the target's names are not rebound in the mended module; probe objects "
          "cross-check both calls")
    try:
        expr = ast.parse(target, mode="eval").body
    except SyntaxError:
        return unknown(f"the target `{target}` does not parse")
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    if not names <= {"torch"} | {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}:
        return unknown(f"the target `{target}` names something other than torch and builtin classes")
    bound = _bound(tree)
    if "isinstance" in bound or (names - {"torch"}) & bound:
        return check_refuted(by, f"`isinstance` or a name of `{target}` is rebound in the mended module")
    try:
        value = eval(compile(target, "<target>", "eval"), {"torch": torch, "__builtins__": builtins})
    except Exception as exc:  # the screen's answer, not a failure
        return unknown(f"the target `{target}` does not evaluate on the installed torch ({exc})")
    why = _plain_target(value)
    if why:
        return check_refuted(by, f"`{target}`: {why}")
    aliases = _torch_aliases(tree) | {"torch"}
    imported = _from_torch(tree)
    found = False
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                and len(node.args) == 2 and not node.keywords and (line is None or node.lineno == line)):
            if ast.unparse(node.args[0]) == obj and _canon(node.args[1], aliases, imported) == target:
                found = True
    if not found:
        return unknown(f"no `isinstance({obj}, {target})` was found at line {line} of the mended source")
    for probe in _probes():
        try:
            a = torch.jit.isinstance(probe, value)
        except Exception as exc:  # compared, not a failure
            a = type(exc).__name__
        if a != isinstance(probe, value):
            return check_refuted(by, f"on {probe!r}: torch.jit.isinstance gives {a!r}, isinstance "
                                     f"{isinstance(probe, value)!r}")
    return checked(by, [f"torch {torch.__version__}: torch.jit.isinstance's source is the reviewed one",
                        f"the target `{target}` is a plain class (or tuple of them)"])


# -- local-never-read --------------------------------------------------------------------

def _function_at(tree: ast.Module, name: str | None, line: int):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if name is None or node.name == name:
                if best is None or node.lineno > best.lineno:
                    best = node
    return best


def local_never_read(ob: dict, ctx: Ctx) -> Outcome:
    name, line = ob.get("name"), ob.get("line")
    tree = _parse(ctx.before)
    if not name or not line or tree is None:
        return unknown("the local, its line or the source before the rewrite is not recorded")
    fn = _function_at(tree, ob.get("function"), line)
    if fn is None:
        return unknown(f"no function `{ob.get('function')}` covers line {line} of the source before the rewrite")
    by = ("a screen of the source before the rewrite (ast): no load or del of the local, no global/nonlocal of it, "
          "no locals()/vars()/eval/exec/dir()/frame introspection anywhere in its function, nested scopes included, "
          "nor a frame attribute, introspection builtin or star import anywhere in the module")
    assigned = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name:
            if isinstance(node.ctx, ast.Store):
                assigned = assigned or node.lineno == line
                continue
            return check_refuted(by, f"`{name}` is {'deleted' if isinstance(node.ctx, ast.Del) else 'read'} at line "
                                     f"{node.lineno}")
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return check_refuted(by, f"`{name}` is declared {type(node).__name__.lower()} at line {node.lineno}")
        if isinstance(node, ast.Call) and _dotted(node.func) in FRAME_READERS:
            return check_refuted(by, f"`{_dotted(node.func)}()` at line {node.lineno} can read every local")
    if not assigned:
        return unknown(f"`{name}` is not assigned at line {line}")
    reader = module_reads_frames(tree)
    if reader:
        return check_refuted(by, f"the module can read a caller's locals or rebind names: {reader}")
    return checked(by, [f"`{name}` is never read in `{fn.name}`",
                        "no callee in another module reads the caller's frame (sys._getframe(1).f_locals): assumed, "
                        "not checked"])


# read a frame's locals from elsewhere in the module (a helper reading the caller's frame:
# helper-70); the rule screens the same, independently (LibCST there, ast here)
_FRAME_ATTRS = {"_getframe", "currentframe", "f_locals", "f_back", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "getouterframes", "getinnerframes"}
_INTROSPECTION = {"locals", "vars", "eval", "exec", "__builtins__"}


def module_reads_frames(tree: ast.Module) -> str | None:
    """Where the module can read a caller's locals by name (a frame attribute, inspect's
    stack/trace, an introspection builtin named at all), or star-imports (which may rebind
    the guard's `type` or `torch`), else None."""
    inspect_names = {a.asname or "inspect" for n in ast.walk(tree) if isinstance(n, ast.Import)
                     for a in n.names if a.name == "inspect"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (node.attr in _FRAME_ATTRS or node.attr in ("stack", "trace")
                                                and _dotted(node.value) in inspect_names):
            return f"`.{node.attr}` (line {node.lineno})"
        if isinstance(node, ast.Name) and node.id in _INTROSPECTION:
            return f"`{node.id}` (line {node.lineno})"
        if isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return f"a star import (line {node.lineno})"
            if any(a.name in _FRAME_ATTRS or node.module == "inspect" and a.name in ("stack", "trace")
                   for a in node.names):
                return f"an import from {node.module} (line {node.lineno})"
    return None


# -- plain-tensor-repr-pure ---------------------------------------------------------------

def _stmt_at(tree: ast.AST, line: int, kind):
    for node in ast.walk(tree):
        if isinstance(node, kind) and node.lineno == line:
            return node
    return None


def _fstring_of(value, name: str, call: str) -> bool:
    """``value`` is an f-string whose fields are all ``{name!r}`` (or ``{name!s}``, with
    ``call`` "str"), no format spec: its text is ``repr(name)``/``str(name)`` pieces between
    constants, and the conversions call the builtins whatever the module binds."""
    allowed = {ord("r")} | ({ord("s")} if call == "str" else set())
    fields = [v for v in value.values if not isinstance(v, ast.Constant)] if isinstance(value, ast.JoinedStr) else []
    return bool(fields) and all(
        isinstance(v, ast.FormattedValue) and v.conversion in allowed and v.format_spec is None
        and isinstance(v.value, ast.Name) and v.value.id == name for v in fields)


# dtypes whose repr was reviewed to format without raising or warning on torch 2.13 (bits8 and
# uint1..uint7 raise NotImplementedError, complex32 warns: helper-70); the rule's guard keeps
# the original repr for every other dtype and for a layout other than strided
REPR_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "uint8", "int8", "int16",
               "int32", "int64", "bool")


def _repr_kept(name: str, t: str) -> str:
    dtypes = ", ".join(f"{t}.{d}" for d in REPR_DTYPES)
    return (f"type({name}) is not {t}.Tensor or {name}.layout is not {t}.strided or {name}.is_nested "
            f"or {name}.dtype not in ({dtypes})")


def plain_tensor_repr_pure(ob: dict, ctx: Ctx) -> Outcome:
    import torch
    import torch._tensor_str as tensor_str

    name, call, line = ob.get("name"), ob.get("call"), ob.get("line")
    code, before = _parse(ctx.code), _parse(ctx.before)
    if not name or call not in ("repr", "str") or not line or code is None or before is None:
        return unknown("the tensor's name, the call, its line or the sources are not recorded")
    if _sha(inspect.getsource(torch.Tensor.__repr__)) not in REVIEWED_TENSOR_REPR:
        return unknown(f"Tensor.__repr__ on torch {torch.__version__} is not the one reviewed (torch 2.13)")
    with open(tensor_str.__file__, "rb") as fh:
        if _sha(fh.read()) not in REVIEWED_TENSOR_STR_FILE:
            return unknown(f"torch/_tensor_str.py on torch {torch.__version__} is not the one reviewed (torch 2.13)")
    if call == "str" and torch.Tensor.__str__ is not object.__str__:
        return unknown("Tensor.__str__ is not object.__str__ on the installed torch")
    by = ("a screen: the mended statement is `if type(t) is not torch.Tensor or t.layout is not torch.strided or "
          "t.is_nested or t.dtype not in (<reviewed dtypes>):` around the original statement; "
          "type/repr/str are not rebound; the installed Tensor.__repr__ and torch/_tensor_str.py are the reviewed "
          "ones (formatting under no_grad, no state written); for str, Tensor.__str__ is object.__str__")
    orig = _stmt_at(before, line, ast.Assign)
    guard = _stmt_at(code, line, ast.If)
    if orig is None or guard is None:
        return unknown(f"the original assignment or the mended guard is not at line {line}")
    ok_value = (isinstance(orig.value, ast.Call) and isinstance(orig.value.func, ast.Name)
                and orig.value.func.id == call and len(orig.value.args) == 1 and not orig.value.keywords
                and isinstance(orig.value.args[0], ast.Name) and orig.value.args[0].id == name)
    if not ok_value and not _fstring_of(orig.value, name, call):
        return check_refuted(by, f"the statement at line {line} is not `... = {call}({name})`, nor an f-string whose "
                                 f"every field is `{{{name}!r}}`" + (f" or `{{{name}!s}}`" if call == "str" else ""))
    aliases = _torch_aliases(code)
    ok_guard = any(ast.dump(guard.test) == ast.dump(ast.parse(_repr_kept(name, t), mode="eval").body)
                   for t in aliases)
    if not ok_guard:
        return check_refuted(by, f"the guard at line {line} is not `type({name}) is not torch.Tensor or "
                                 f"{name}.layout is not torch.strided or {name}.is_nested or {name}.dtype not in (<the reviewed dtypes>)`")
    reader = module_reads_frames(code)
    if reader and reader.startswith("a star import"):
        return check_refuted(by, f"{reader}: it may rebind `type` or `torch`, which the guard reads")
    if guard.orelse or len(guard.body) != 1 or ast.dump(guard.body[0]) != ast.dump(orig):
        return check_refuted(by, "the guarded body is not exactly the original statement")
    rebound = _bound(code) & {"type", "repr", "str"}
    if rebound:
        return check_refuted(by, f"`{sorted(rebound)[0]}` is rebound in the mended module")
    return checked(by, [f"torch {torch.__version__}: Tensor.__repr__ and torch/_tensor_str.py are the reviewed ones",
                        "no TorchFunctionMode/TorchDispatchMode observing the repr's formatting ops is active "
                        "(assumed, not checked)"])


ENCODERS = {"jit-isinstance-plain": jit_isinstance_plain, "local-never-read": local_never_read,
            "plain-tensor-repr-pure": plain_tensor_repr_pure}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset()   # screens of the code and of the installed torch's source, not observations of a run
