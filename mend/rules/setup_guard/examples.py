"""setup-guard's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line). The site is the break: a hook
registered or a lock taken in the one-time setup."""
from __future__ import annotations

import re

_SITE = re.compile(r"\.register_\w*hook\(|^\s*with \w*lock\w*:")


def example_line(source: str) -> int:
    """The line of an example's site: its first hook registration or ``with <lock>:``."""
    for i, text in enumerate(source.splitlines(), 1):
        if _SITE.search(text):
            return i
    raise ValueError("no hook registration or lock in example")


_HEAD = '''import threading

import torch
from torch import nn

_lock = threading.Lock()


def _hook(module, args, output):
    return output


'''

# transformers 5.24 utils/output_capturing.py, trimmed: `maybe_install_capturing_hooks`
_INSTALL = '''def maybe_install(model):
    """Install the hooks once (thread-safe)."""
    # First check
    if getattr(model, "_installed", False):
        return
    with _lock:
        if getattr(model, "_installed", False):
            return
        for sub in model.modules():
            if isinstance(sub, nn.Linear):
                sub.register_forward_hook(_hook)
        model._installed = True


'''

_MODEL = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        {call}
        return self.a(x) * 2
'''

_GLOBAL_FLAG = _HEAD + '''_DONE = False


def install(model):
    for sub in model.modules():
        sub.register_forward_hook(_hook)


def setup(model, verbose=False):
    global _DONE
    if _DONE:
        return
    install(model)
    _DONE = True


'''

_TWO_CALLS = _HEAD + '''def attach(model, name):
    if model._handle is not None:
        return
    with _lock:
        model._handle = model.a.register_forward_hook(_hook)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self._handle = None

    def forward(self, x):
        attach(self, "a")
        return self.a(x) * 2

    def encode(self, x):
        attach(self, "a")
        return self.a(x)
'''


_LITERAL = '''def note(level, model):
    if level.imag or model is None:
        return
    with _lock:
        model.a.register_forward_hook(_hook)


''' + _MODEL


# the hoisted test first requires a flag tested for truth to be a bool or None
_GATE = 'type(getattr(self, "_installed", False)) is bool and '


def _note(call: str, fn: str, line: int) -> str:
    return f"# mend: setup-guard (was: {call}; the first check of `{fn}`, line {line}, hoisted)"


def _test(fn: str, check: str) -> str:
    """The hoisted test: the called name is still ``fn``'s def, and the gated check holds."""
    return f"if not ({fn} is _mend_setup_guard_{fn} and ({check})):  "


def _aliased(source: str, fn: str) -> str:
    """``source`` with the alias on the blank line right after ``fn``'s def (no line moves)."""
    head, tail = source.split(f"\ndef {fn}(", 1)
    body, rest = tail.split("\n\n", 1)
    return (f"{head}\ndef {fn}({body}\n_mend_setup_guard_{fn} = {fn}  # mend: setup-guard (the function whose "
            f"first check is hoisted)\n{rest}")


FIX_EXAMPLES: list[tuple] = [
    # the lock's break (the site) sits after the check in the called function itself
    (
        _HEAD + _INSTALL + _MODEL.format(call="maybe_install(self)  # hooks, lazily"),
        _aliased(_HEAD + _INSTALL, "maybe_install") + _MODEL.format(
            call=_test("maybe_install", f'{_GATE}getattr(self, "_installed", False)')
            + f'{_note("maybe_install(self)", "maybe_install", 16)}\n'
              "            maybe_install(self)  # hooks, lazily"),
    ),
    # the break two calls deep (install -> register_forward_hook), a global flag, a keyword
    # argument bound to the parameter by name
    (
        _GLOBAL_FLAG + _MODEL.format(call="setup(model=self)"),
        _aliased(_GLOBAL_FLAG, "setup") + _MODEL.format(call=_test("setup", "type(_DONE) is bool and _DONE")
                                                         + f"{_note('setup(model=self)', 'setup', 23)}\n"
                                                           "            setup(model=self)"),
    ),
    # an `is not None` check, and two calls (every statement call is guarded)
    (
        _TWO_CALLS,
        _aliased(_TWO_CALLS, "attach").replace(
            '        attach(self, "a")\n',
            "        " + _test("attach", "self._handle is not None") + _note('attach(self, "a")', "attach", 14) + "\n"
            '            attach(self, "a")\n'),
        16,
    ),
    # an identity check of arguments only: no attribute read, no truth of a name's value, so
    # nothing to observe (a safe fix); a literal argument in an attribute read is parenthesised
    (
        _HEAD + _LITERAL.format(call="note(1, self)"),
        _aliased(_HEAD + _LITERAL, "note").format(call=_test("note", "(1).imag or self is None")
                                                  + _note("note(1, self)", "note", 14) + "\n            note(1, self)"),
    ),
]


def _with(install: str = _INSTALL, call: str = "maybe_install(self)") -> str:
    return _HEAD + install + _MODEL.format(call=call)


DECLINE_EXAMPLES: list[tuple] = [
    # the call's value is used: the hoisted form would leave the name unbound
    (_with(call="handle = maybe_install(self)"), "the call's value is used"),
    # an argument with a read of its own: skipping the call would skip evaluating it
    (_with(call="maybe_install(self.a)"), "neither a literal nor a parameter"),
    # helper-41: a local that may be unbound (skipping the call would skip its UnboundLocalError)
    (_with(call="if x.dim() > 1:\n            model = self\n        maybe_install(model)"),
     "neither a literal nor a parameter"),
    # helper-41: the check reads *args (the hoisted name would be a global of the same name)
    (_with(_INSTALL.replace("def maybe_install(model):", "def maybe_install(model, *hooks):").replace(
        'if getattr(model, "_installed", False):\n        return\n    with',
        'if not hooks or getattr(model, "_installed", False):\n        return\n    with')), "*args or **kwargs"),
    # helper-41: a default that is a name is evaluated at `def`, the hoisted check would read it later
    (_with(_INSTALL.replace("def maybe_install(model):", "def maybe_install(model, done=_lock):").replace(
        'if getattr(model, "_installed", False):\n        return\n    with',
        'if getattr(model, "_installed", done):\n        return\n    with')), "default is not a literal"),
    # helper-41: the function rebound through globals()
    (_with(_INSTALL + "globals()['maybe_install'] = torch.compiler.disable(maybe_install)\n\n\n"),
     "uses `globals`"),
    # helper-43: a `match` capture rebinds the function
    (_with(_INSTALL + "match torch.compiler.disable(maybe_install):\n    case maybe_install:\n        pass\n\n\n"),
     "bound more than once"),
    # helper-43: rebound through a function's __globals__, its defaults through __defaults__
    (_with(_INSTALL + "_hook.__globals__['maybe_install'] = print\n\n\n"), "uses `__globals__`"),
    (_with(_INSTALL + "maybe_install.__defaults__ = (True,)\n\n\n"), "uses `__defaults__`"),
    # helper-43: getattr replaced through __builtins__
    (_with(_INSTALL + "__builtins__ = {}\n\n\n"), "uses `__builtins__`"),
    # helper-43: the check reads a name the function assigns (a local there, a global hoisted)
    (_with(_INSTALL.replace('if getattr(model, "_installed", False):\n        return\n    with',
                            'if getattr(model, "_installed", False) and _ready:\n        return\n    with').replace(
        "        model._installed = True", "        model._installed = True\n        _ready = True")),
     "a local of the function"),
    # helper-45: identity with anything but None (Dynamo traced `x is _last` on a tensor as a
    # constant, with no guard: the compiled mended model skipped the call for new tensors)
    (_with(_INSTALL.replace('if getattr(model, "_installed", False):\n        return\n    with',
                            'if model is _LAST:\n        return\n    with')), "other than `None`"),
    # helper-45: a truth-tested value beside other tests: a gate over several parts lost the
    # short-circuit of `or` (a NameError where the original never read the name)
    (_with(_INSTALL.replace('if getattr(model, "_installed", False):\n        return\n    with',
                            'if not _ENABLED or getattr(model, "_installed", False):\n        return\n    with')),
     "combines a value it tests for truth with other tests"),
    # an attribute read by a computed name cannot be observed
    (_with(_INSTALL.replace('if getattr(model, "_installed", False):\n        return\n    with',
                            'if getattr(model, _KEY, False):\n        return\n    with')), "computed name"),
    # a method: `self.setup()` may reach a subclass's override
    (_HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def setup(self):
        if getattr(self, "_done", False):
            return
        with _lock:
            self.a.register_forward_hook(_hook)
            self._done = True

    def forward(self, x):
        self.setup()
        return self.a(x)
''', "it is a method"),
    # the check calls a method (it may write), or compares with == (a user's __eq__)
    (_with(_INSTALL.replace('getattr(model, "_installed", False):\n        return\n    with',
                            'model.ready():\n        return\n    with')), "which may have effects"),
    (_with(_INSTALL.replace('getattr(model, "_installed", False):\n        return\n    with',
                            'model._state == "done":\n        return\n    with')), "other than `is`"),
    # decorated: the decorator runs first, and may not run the body at all
    (_with("@torch.compiler.disable\n" + _INSTALL), "decorated"),
    # the name is rebound below: a call may reach another function
    (_with(_INSTALL + "maybe_install = torch.compiler.disable(maybe_install)\n\n\n"), "bound more than once"),
    # the caller binds a name the check reads from the module
    (_HEAD + '''_DONE = False


def setup(model):
    global _DONE
    if _DONE:
        return
    with _lock:
        model.a.register_forward_hook(_hook)
        _DONE = True


''' + _MODEL.format(call="_DONE = x.sum()\n        setup(self)"), "the caller binds `_DONE`"),
    # already hoisted: later calls run without the break, the first call must run the setup
    (_aliased(_with(call=_test("maybe_install", f'{_GATE}getattr(self, "_installed", False)')
                    + '\n            maybe_install(self)'), "maybe_install"), "already hoisted"),
    # the replaced G (a monkeypatch) is called as before only while the alias is the def's: a
    # module that binds the alias name otherwise is declined
    (_with(_INSTALL + "_mend_setup_guard_maybe_install = print\n\n\n"), "binds `_mend_setup_guard_maybe_install`"),
    # no blank line after the def to hold the alias: a new line would move every line below
    (_with(_INSTALL.rstrip("\n") + "\n_X = 1\n\n\n"), "no blank line follows"),
    # a call that does not bind (a keyword the function does not take): it raises TypeError
    (_with(call="maybe_install(self, force=True)"), "does not take"),
]

NOOP_EXAMPLES: list[str] = [
    # a hook registered on every call: no one-time check to hoist (the break stays)
    _HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        handle = self.a.register_forward_hook(_hook)
        y = self.a(x)
        handle.remove()
        return y
''',
]
