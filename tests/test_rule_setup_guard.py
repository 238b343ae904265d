"""setup-guard (issue 10, kinds 8 and 9): a one-time setup's first check hoisted into its
caller, so that calls after the first compile without the setup's break (transformers 5's
lazily installed output-capturing hooks). End to end on a fixture whose outputs depend on the
hooks, the encoders' refutations, adversarial fixtures (a property flag whose read counts,
a flag that is a tensor) and the pipeline's rule for a rewrite away from its break."""
from __future__ import annotations

import re
import types

import libcst as cst
import pytest

from mend.fix import fix
from mend.pipeline import _still_breaks
from mend.rules import RewriteResult
from mend.rules.setup_guard import RULE
from tests.conftest import FIXTURES
from verifier.certs import verify_file
from verifier.encoders.base import Ctx
from verifier.encoders.setup_guard import hoisted, read_plain

FIXTURE = FIXTURES / "setup_guard.py"


def _mended(code: str, line: int | None = None) -> RewriteResult:
    res = RULE.rewrite(cst.parse_module(code), line or RULE.example_line(code))
    assert isinstance(res, RewriteResult), res
    return res


def _guard_ob(res: RewriteResult) -> dict:
    return next(o for o in res.obligations if o["kind"] == "guard-hoisted")


def test_fix_end_to_end_lowers_the_second_call_s_graphs(tmp_path):
    res = fix(str(FIXTURE), unsafe_fixes=True, max_examples=4)
    assert [r.rule for r in res.rewrites] == ["setup-guard"]
    assert res.before.graph_count == res.after.graph_count == 2     # the first call still runs the setup
    assert (res.before.steady_graph_count, res.after.steady_graph_count) == (2, 1)
    rw = res.rewrites[0]
    assert rw.safety["label"] == "unsafe"                           # the attribute read is observed
    assert {o["kind"]: o["result"] for o in rw.obligations} == {"guard-hoisted": "checked",
                                                                "guard-read-plain": "checked"}
    mended = next(iter(res.files.values()))
    assert ('if not (maybe_install is _mend_setup_guard_maybe_install and (type(getattr(self, "_installed", False)) '
            'is bool and getattr(self, "_installed", False))):') in mended and "    maybe_install(self)" in mended
    assert "\n_mend_setup_guard_maybe_install = maybe_install  # mend: setup-guard" in mended
    assert len(mended.splitlines()) == len(FIXTURE.read_text().splitlines()) + 1   # the one hoisted `if`
    # what is left is reported as the first call's setup, with the hoisted line
    left = [s.reason for s in res.after.sites if s.line < 40]
    assert left and all("already hoisted" in r for r in left), left
    # a certificate a third party re-checks
    from mend.fix import emit
    emit(res, write=False, out_dir=str(tmp_path))
    certs = sorted((tmp_path / "certificates").glob("*.json"))
    assert len(certs) == 1 and verify_file(certs[0]).ok


def test_without_unsafe_fixes_it_is_declined_as_unsafe():
    res = fix(str(FIXTURE), max_examples=2)
    assert not res.rewrites
    assert any(d.rule == "setup-guard" and "unsafe fix" in d.reason and "guard-read-plain" in d.reason
               for d in res.declined), res.declined


def _load(code: str):
    mod = types.ModuleType("sg_adv")
    exec(compile(code, "<sg_adv>", "exec"), mod.__dict__)
    return mod


def test_the_hoisted_form_runs_the_setup_exactly_once_and_the_same_hooks():
    """Eager, a fresh model per version: same outputs on every call, hooks installed once."""
    import torch

    code = FIXTURE.read_text()
    before, after = _load(code), _load(_mended(code, 33).code)
    torch.manual_seed(0)
    a = before.Model()
    b = after.Model()
    b.load_state_dict(a.state_dict())
    for _ in range(3):
        x = torch.randn(2, 4)
        (oa, na), (ob, nb) = a(x), b(x)
        assert torch.equal(oa, ob) and na == nb == 2
    assert [len(m._forward_hooks) for m in a.modules()] == [len(m._forward_hooks) for m in b.modules()]


@pytest.mark.parametrize("compiled", [False, True])
def test_a_function_monkeypatched_after_the_setup_is_still_called(compiled):
    """The rule once assumed ``G`` is never replaced from outside its module: a ``mock.patch``
    of it after the first call was skipped by the hoisted check. The identity test calls the
    replacement, as the original does (eager and compiled: Dynamo guards the global)."""
    import torch

    code = FIXTURE.read_text()
    for mod in (_load(code), _load(_mended(code, 33).code)):
        torch._dynamo.reset()
        model = mod.Model()
        run = torch.compile(model, backend="eager") if compiled else model
        x = torch.randn(2, 4)
        run(x)                                   # the setup runs: the flag is set
        seen = []
        real = mod.maybe_install
        mod.maybe_install = lambda m, seen=seen: seen.append(type(m).__name__)
        try:
            run(x)
            run(x)
        finally:
            mod.maybe_install = real
        assert seen == ["Model", "Model"], (mod, seen)


def test_a_caller_s_own_binding_of_the_name_is_declined():
    """A caller whose parameter is named like ``G`` may call what it is given: declined (the
    name is bound twice in the module); the verifier refutes a caller binding the alias."""
    code = FIXTURE.read_text().replace("    def forward(self, x):\n", "    def forward(self, x, maybe_install=maybe_install):\n")
    res = RULE.rewrite(cst.parse_module(code), 33)
    assert not isinstance(res, RewriteResult) and "bound more than once" in res.reason


# -- the encoders ------------------------------------------------------------------------


def test_guard_hoisted_checks_the_rule_s_form_and_cites_the_lemma():
    code = FIXTURE.read_text()
    res = _mended(code, 33)
    got = hoisted(_guard_ob(res), Ctx({}, {}, code=res.code, before=code))
    assert got.result == "checked" and got.lemmas == ("proofs/sg_hoisted_check.smt2",)


def test_guard_hoisted_refutes_another_test_another_change_and_a_decorated_callee():
    code = FIXTURE.read_text()
    res = _mended(code, 33)
    ob = _guard_ob(res)
    wrong_default = res.code.replace('and getattr(self, "_installed", False))):', 'and getattr(self, "_installed", True))):')
    assert wrong_default != res.code
    ungated = res.code.replace('type(getattr(self, "_installed", False)) is bool and ', "")
    got = hoisted(ob, Ctx({}, {}, code=ungated, before=code))   # the gate is required (helper-44)
    assert ungated != res.code and got.result == "refuted" and "is not `not" in got.counterexample
    got = hoisted(ob, Ctx({}, {}, code=wrong_default, before=code))
    assert got.result == "refuted" and "is not `not" in got.counterexample
    other = res.code.replace("out = self.b(self.a(x)) * 2", "out = self.b(self.a(x)) * 3")
    got = hoisted(ob, Ctx({}, {}, code=other, before=code))   # not shown unchanged: unknown, never passed
    assert got.result == "unknown" and "other changes" in got.reason
    decorated = code.replace("def maybe_install(model):", "@torch.compiler.disable\ndef maybe_install(model):")
    got = hoisted(ob, Ctx({}, {}, code=res.code, before=decorated))
    assert got.result == "refuted" and "decorated" in got.counterexample
    generator = code.replace("        model._installed = True", "        model._installed = True\n        yield")
    got = hoisted(ob, Ctx({}, {}, code=res.code, before=generator))
    assert got.result == "refuted" and "generator" in got.counterexample
    assert hoisted(ob, Ctx({}, {}, code=res.code, before=None)).result == "unknown"


def _facts(**names) -> dict:
    return {"hits": 1, "names": names}


_PLAIN = {"self.__class__.__getattribute__": {"kind": "callable", "qualname": "?.object.__getattribute__"},
          "self.__class__.__getattr__": {"kind": "callable",
                                         "qualname": "torch.nn.modules.module.Module.__getattr__"}}


def test_guard_read_plain_refutes_a_property_a_getattribute_and_a_tensor_flag():
    ob = {"kind": "guard-read-plain", "reads": [["self", "_installed"]],
          "truth": ['getattr(self, "_installed", False)']}
    assert read_plain(ob, Ctx(_facts(**_PLAIN), {})).result == "checked"
    prop = read_plain(ob, Ctx(_facts(**_PLAIN, **{"self.__class__._installed": {"kind": "other"}}), {}))
    assert prop.result == "refuted" and "property" in prop.counterexample
    own = {**_PLAIN, "self.__class__.__getattribute__": {"kind": "callable", "qualname": "m.Model.__getattribute__"}}
    assert read_plain(ob, Ctx(_facts(**own), {})).result == "refuted"
    tensor = read_plain(ob, Ctx(_facts(**_PLAIN, **{"self._installed": {"kind": "tensor"}}), {}))
    assert tensor.result == "refuted" and "__bool__" in tensor.counterexample
    assert read_plain(ob, Ctx({"hits": 0, "names": {}}, {})).result == "unknown"
    assert read_plain(ob, Ctx(_facts(), {})).result == "unknown"


def test_a_property_flag_is_declined_end_to_end(tmp_path):
    """Adversarial: the flag is a property whose read counts; reading it twice on the first
    call would change the count. The observation refutes the plain read."""
    code = FIXTURE.read_text().replace(
        "class Model(nn.Module):\n", "class Model(nn.Module):\n    reads = 0\n\n"
        "    @property\n    def _installed(self):\n        type(self).reads += 1\n"
        "        return getattr(self, '_done', False)\n\n"
        "    @_installed.setter\n    def _installed(self, value):\n        self._done = value\n\n")
    path = tmp_path / "setup_guard_property.py"
    path.write_text(code)
    res = fix(str(path), unsafe_fixes=True, max_examples=2)
    assert not res.rewrites
    assert any(d.rule == "setup-guard" and "property" in d.reason for d in res.declined), res.declined


# -- the pipeline ------------------------------------------------------------------------


class _Scan:
    def __init__(self, graphs, steady, breaks=3):
        self.graph_count, self.steady_graph_count, self.graph_break_count, self.sites = graphs, steady, breaks, []


class _Ex:
    @staticmethod
    def file_key(site):
        return "f.py"


def test_a_rewrite_away_from_its_break_must_lower_a_graph_count():
    code = "a = 1\nb = 2\nc = 3\n"
    assert _still_breaks(_Ex, _Scan(2, 2), _Scan(2, 1), "f.py", code, code, (3, 3), "hook-or-lock",
                         site_line=1) is None
    why = _still_breaks(_Ex, _Scan(2, 2), _Scan(2, 2), "f.py", code, code, (3, 3), "hook-or-lock", site_line=1)
    assert why and "away from the break at line 1" in why
    # ... and says what does help for a one-time setup (an eager call before compiling)
    assert "call the model once eagerly before torch.compile" in why
    # a rewrite at its own site keeps the old rule (no break left on its lines: accepted)
    assert _still_breaks(_Ex, _Scan(2, 2), _Scan(2, 2), "f.py", code, code, (1, 1), "hook-or-lock",
                         site_line=1) is None


def test_every_hoisted_call_is_checked_at_its_mended_line():
    """Two calls in one file: the second `if` sits one line lower than its call did."""
    ex = RULE.fix_examples[2]
    res = RULE.rewrite(cst.parse_module(ex.before), RULE.site(ex))
    obs = [o for o in res.obligations if o["kind"] == "guard-hoisted"]
    assert [o["line"] for o in obs] == [27, 32]
    assert all(hoisted(o, Ctx({}, {}, code=res.code, before=ex.before)).result == "checked" for o in obs)


def test_no_graph_gained_is_declined_once_and_the_same_rewrite_is_not_verified_again(tmp_path):
    """The hooked layer runs before the call: its hook guards make Dynamo recompile the caller
    anyway (steady state 1 graph before the rewrite), so hoisting gains nothing. Both breaks
    (the lock, the hook registration) plan the same rewrite: the second is declined by the
    first's rescan, without a second verification."""
    code = FIXTURE.read_text().replace(
        "        x = (x * 2).relu()\n        maybe_install(self)\n        _collected.clear()\n"
        "        out = self.b(self.a(x)) * 2",
        "        _collected.clear()\n        y = self.a(x).relu()\n        maybe_install(self)\n"
        "        out = self.b(y) * 2")
    assert code != FIXTURE.read_text()
    path = tmp_path / "setup_guard_recompiles.py"
    path.write_text(code)
    res = fix(str(path), unsafe_fixes=True, max_examples=2)
    assert not res.rewrites and res.before.steady_graph_count == 1
    reasons = sorted(d.reason for d in res.declined if d.rule == "setup-guard")
    assert len(reasons) == 2
    assert "away from the break" in reasons[0] and "nothing is gained" in reasons[0]
    assert reasons[1].startswith("the same rewrite as for ") and "nothing is gained" in reasons[1]


_SAFE = FIXTURE.read_text().replace('''def maybe_install(model):
    """Install the recording hooks once (thread-safe)."""
    if getattr(model, "_installed", False):
        return
    with _lock:
        if getattr(model, "_installed", False):
            return
        install(model)
        model._installed = True''', '''_HANDLE = None


def maybe_install(model):
    """Install the recording hooks once (thread-safe)."""
    global _HANDLE
    if _HANDLE is not None:
        return
    with _lock:
        install(model)
        _HANDLE = model''')


def test_an_identity_check_of_a_global_is_a_safe_fix_applied_without_the_flag(tmp_path):
    """No attribute read, no truth of a name's value: nothing observed, so the label is safe
    (helper-41/42: the docs claimed this for a truth-tested global, which is observed)."""
    assert _SAFE != FIXTURE.read_text()
    path = tmp_path / "setup_guard_safe.py"
    path.write_text(_SAFE)
    res = fix(str(path), max_examples=3)
    assert [r.rule for r in res.rewrites] == ["setup-guard"], res.declined
    assert res.rewrites[0].safety["label"] == "safe"
    assert [o["kind"] for o in res.rewrites[0].obligations] == ["guard-hoisted"]
    assert (res.before.steady_graph_count, res.after.steady_graph_count) == (2, 1)


def test_a_certificate_of_a_file_mended_in_place_verifies(tmp_path):
    """helper-42: with --write the original is gone; the certificate's diff, undone on the
    mended file, gives it back (hash-checked), so guard-hoisted re-runs instead of unknown."""
    path = tmp_path / "setup_guard.py"
    path.write_text(FIXTURE.read_text())
    res = fix(str(path), unsafe_fixes=True, max_examples=2)
    from mend.fix import emit
    emit(res, write=True, out_dir=str(tmp_path / "out"))
    assert path.read_text() != FIXTURE.read_text()
    cert = next((tmp_path / "out" / "certificates").glob("*.json"))
    rep = verify_file(cert)
    assert rep.ok, rep.problems


@pytest.mark.parametrize("before, mended", [
    # helper-41: the check reads *args: the hoisted name is a global of the same name
    ("def g(model, *hooks):\n    if not hooks:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    g(self, 1)\n",
     "def g(model, *hooks):\n    if not hooks:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    if not (not hooks):\n        g(self, 1)\n"),
    # helper-41: a default that is a name, read at the call instead of at `def`
    ("D = 0\n\n\ndef g(model, done=D):\n    if done:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    g(self)\n",
     "D = 0\n\n\ndef g(model, done=D):\n    if done:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    if not D:\n        g(self)\n"),
    # helper-41: an argument that may be unbound
    ("def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self, t):\n    if t:\n        m = self\n    g(m)\n",
     "def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self, t):\n    if t:\n        m = self\n    if not (m is None):\n        g(m)\n"),
    # helper-41: the function rebound through globals()
    ("def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "globals()['g'] = print\n\n\ndef f(self):\n    g(self)\n",
     "def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "globals()['g'] = print\n\n\ndef f(self):\n    if not (self is None):\n        g(self)\n"),
    # helper-43: a `match` capture rebinds g
    ("def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "match w(g):\n    case g:\n        pass\n\n\ndef f(self):\n    g(self)\n",
     "def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
     "match w(g):\n    case g:\n        pass\n\n\ndef f(self):\n    if not (self is None):\n        g(self)\n"),
    # helper-43: rebinding through __globals__ / __defaults__ / __builtins__
    *[("def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
       f"{evil}\n\n\ndef f(self):\n    g(self)\n",
       "def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\n"
       f"{evil}\n\n\ndef f(self):\n    if not (self is None):\n        g(self)\n")
      for evil in ("f.__globals__['g'] = print", "g.__defaults__ = (1,)", "__builtins__ = {}")],
    # helper-43: a flag written with an object, whose __bool__ may change on a later call
    ("def g(model):\n    if getattr(model, 'x', None):\n        return\n    with L:\n        model.x = Lease()\n\n\n"
     "def f(self):\n    g(self)\n",
     "def g(model):\n    if getattr(model, 'x', None):\n        return\n    with L:\n        model.x = Lease()\n\n\n"
     "def f(self):\n    if not getattr(self, 'x', None):\n        g(self)\n"),
    # helper-43: the check reads a local of g
    ("R = 1\n\n\ndef g(model):\n    if model is None and R:\n        return\n    with L:\n        R = 2\n\n\n"
     "def f(self):\n    g(self)\n",
     "R = 1\n\n\ndef g(model):\n    if model is None and R:\n        return\n    with L:\n        R = 2\n\n\n"
     "def f(self):\n    if not (self is None and R):\n        g(self)\n"),
    # helper-45: a gate compared with `in` dispatches to a metaclass __eq__
    ("F = False\n\n\ndef g(model):\n    if F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    g(self)\n",
     "F = False\n\n\ndef g(model):\n    if F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    if not (type(F) in (bool, type(None)) and F):\n        g(self)\n"),
    # helper-45: several truth-tested parts (a gate over them lost `or`'s short-circuit)
    ("E = True\nF = False\n\n\ndef g(model):\n    if not E or F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    g(self)\n",
     "E = True\nF = False\n\n\ndef g(model):\n    if not E or F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    if not (type(E) is bool and type(F) is bool and (not E or F)):\n        g(self)\n"),
    # helper-45: identity with a tensor (Dynamo does not guard it)
    ("P = None\n\n\ndef g(x):\n    if x is P:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self, x):\n    g(x)\n",
     "P = None\n\n\ndef g(x):\n    if x is P:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self, x):\n    if not (x is P):\n        g(x)\n"),
    # helper-45: a second hoisted call, in a caller whose local shadows the flag
    ("F = False\n\n\ndef g(model):\n    if F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    g(self)\n\n\ndef h(m):\n    F = True\n    g(m)\n    return F\n",
     "F = False\n\n\ndef g(model):\n    if F:\n        return\n    with L:\n        pass\n\n\n"
     "def f(self):\n    if not (type(F) is bool and F):\n        g(self)\n\n\n"
     "def h(m):\n    F = True\n    if not (type(F) is bool and F):\n        g(m)\n    return F\n"),
])
def test_guard_hoisted_refutes_helper_41_s_escapes(before, mended):
    mended = _identity_form(mended)
    line = mended.splitlines().index(next(ln for ln in mended.splitlines() if ln.lstrip().startswith("if not"))) + 1
    got = hoisted({"kind": "guard-hoisted", "line": line, "function": "g"}, Ctx({}, {}, code=mended, before=before))
    assert got.result == "refuted", got
    assert "does not bind `_mend_setup_guard_g" not in str(got.counterexample), got   # not for the alias      # refuted for the escape, not for the alias


def _identity_form(mended: str) -> str:
    """A hoisted form written as the rule writes it now: the alias on the blank line after
    ``g``'s def, and each hoisted test behind the identity test."""
    out = re.sub(r"(?ms)^(def g\(.*?\n)\n", r"\1_mend_setup_guard_g = g\n", mended, count=1)
    return re.sub(r"(?m)^(\s*)if not (.*):$", r"\1if not (g is _mend_setup_guard_g and (\2)):", out)


def test_guard_hoisted_refutes_a_missing_or_rebound_alias_and_a_test_without_identity():
    before = "def g(model):\n    if model is None:\n        return\n    with L:\n        pass\n\n\ndef f(self):\n    g(self)\n"
    good = _identity_form(before.replace("    g(self)\n", "    if not (self is None):\n        g(self)\n"))
    ctx = lambda code: Ctx({}, {}, code=code, before=before)   # noqa: E731
    ob = {"kind": "guard-hoisted", "line": 9, "function": "g"}
    assert hoisted(ob, ctx(good)).result == "checked", hoisted(ob, ctx(good))
    for bad in (good.replace("_mend_setup_guard_g = g\n", "\n"),                       # no alias
                good.replace("_mend_setup_guard_g = g\n", "_mend_setup_guard_g = print\n"),   # bound elsewhere
                good + "\n\n_mend_setup_guard_g = print\n",                               # rebound below
                good.replace("g is _mend_setup_guard_g and ", ""),                       # no identity test
                good.replace("g is _mend_setup_guard_g", "g is not _mend_setup_guard_g"),
                good.replace("def f(self):\n", "def f(self):\n    _mend_setup_guard_g = g\n")):  # the caller's own
        got = hoisted(ob, ctx(bad))
        assert got.result == "refuted", (bad, got)


def test_guard_read_plain_accepts_a_plain_class_level_default():
    """helper-42: `_ready = False` on the class is read without running code."""
    ob = {"kind": "guard-read-plain", "reads": [["self", "_installed"]],
          "truth": ['getattr(self, "_installed", False)']}
    plain = {**_PLAIN, "self.__class__._installed": {"kind": "num", "cat": "bool", "value": False}}
    assert read_plain(ob, Ctx(_facts(**plain), {})).result == "checked"


def test_an_integer_literal_argument_is_parenthesised_not_a_crash():
    """helper-41: `note(1)` with `if level.imag: return` made the scan crash on `1.imag`."""
    ex = RULE.fix_examples[3]
    res = RULE.rewrite(cst.parse_module(ex.before), RULE.site(ex))
    assert "(1).imag" in res.code and [o["kind"] for o in res.obligations] == ["guard-hoisted"]
    assert hoisted(res.obligations[0], Ctx({}, {}, code=res.code, before=ex.before)).result == "checked"


def test_a_certificate_resealed_without_an_obligation_fails_verification(tmp_path):
    """helper-43: dropping guard-read-plain, relabelling the fix safe and resealing with mend's
    own digest passed `mend cert verify`; mend now re-plans the rule's obligations."""
    import json

    from click.testing import CliRunner

    from mend.cli import main
    from mend.fix import emit
    from verifier.certs import digest, dumps

    res = fix(str(FIXTURE), unsafe_fixes=True, max_examples=2)
    emit(res, write=False, out_dir=str(tmp_path))
    cert = next((tmp_path / "certificates").glob("*.json"))
    assert CliRunner().invoke(main, ["cert", "verify", str(cert)]).exit_code == 0
    doc = json.loads(cert.read_text())
    doc.pop("digest")
    doc["obligations"] = [o for o in doc["obligations"] if o["kind"] != "guard-read-plain"]
    doc["safety"] = {"label": "safe", "reasons": []}
    doc["digest"] = digest(doc)
    cert.write_text(dumps(doc))
    out = CliRunner().invoke(main, ["cert", "verify", str(cert)])
    assert out.exit_code == 1 and "lacks obligation(s)" in out.output and "guard-read-plain" in out.output


def test_a_flag_that_becomes_an_object_with_effects_is_tested_as_before():
    """helper-44: a flag set (by `object.__setattr__`, or by another module) to an object whose
    `__bool__` counts and expires: the hoisted test requires a bool or None first, so the
    object's truth is taken only by the function's own check, as in the original. Eager, 12
    calls: same outputs and the same number of truth tests; the ungated form differs."""
    import torch

    code = (FIXTURES / "setup_guard_hookset.py").read_text()
    line = code.splitlines().index("    with _lock:") + 1
    res = _mended(code, line)
    ungated = res.code.replace('type(getattr(self, "_installed", False)) is bool and ', "")
    assert ungated != res.code
    got = []
    for text in (code, res.code, ungated):
        mod = _load(text)
        torch.manual_seed(0)
        model, x = mod.Model(), torch.randn(2, 4)
        got.append(([model(x)[1] for _ in range(12)], mod.CHECKS[0]))
    assert got[0] == got[1], got
    assert got[2] != got[0], got    # the trap: tested twice, the stale answer is lost


def test_a_resealed_certificate_over_an_edited_mended_file_fails(tmp_path):
    """helper-44: (3) another function of the mended file edited, its hash updated and the
    certificate resealed passed, because guard-hoisted then compared the caller alone; (4) a
    comment added made the re-planned kinds a note, so a dropped obligation passed again."""
    import json
    import shutil

    from click.testing import CliRunner

    from mend.cli import main
    from mend.fix import emit
    from verifier.certs import digest, dumps, sha256_file

    res = fix(str(FIXTURE), unsafe_fixes=True, max_examples=2)
    emit(res, write=False, out_dir=str(tmp_path / "base"))

    def forged(name: str, edit, drop: bool) -> str:
        out = tmp_path / name
        shutil.copytree(tmp_path / "base", out)
        cert = next((out / "certificates").glob("*.json"))
        mended = out / "setup_guard.py"
        mended.write_text(edit(mended.read_text()))
        doc = json.loads(cert.read_text())
        doc.pop("digest")
        doc["sha256_mended"] = sha256_file(mended)
        if drop:
            doc["obligations"] = [o for o in doc["obligations"] if o["kind"] != "guard-read-plain"]
            doc["safety"] = {"label": "safe", "reasons": []}
        doc["digest"] = digest(doc)
        cert.write_text(dumps(doc))
        return CliRunner().invoke(main, ["cert", "verify", str(cert)]).output

    other = forged("other", lambda t: t.replace("_collected.append(output * 1)",
                                                "_collected.append(output * 1)\n    _collected.append(output)"), False)
    assert "FAILED" in other and "guard-hoisted" in other, other
    comment = forged("comment", lambda t: t + "# reviewed\n", True)
    assert "FAILED" in comment and "lacks obligation(s)" in comment and "guard-read-plain" in comment, comment


@pytest.mark.parametrize("old, new", [
    # a comment inside the check
    ('    if getattr(model, "_installed", False):\n',
     '    if getattr(model,  # the flag install() sets\n               "_installed", False):\n'),
    # a backslash continuation in the check
    ('    if getattr(model, "_installed", False):\n',
     '    if getattr(model, "_installed", None) is not None \\\n            or hasattr(model, "_hooks"):\n'),
    # a comment inside the call
    ("        maybe_install(self)\n", "        maybe_install(\n            self,  # the model\n        )\n"),
    # two spaces inside the attribute's name (merging them read another attribute)
    ('"_installed"', '"hooks  installed"'),
])
def test_comments_continuations_and_spaces_in_strings_are_kept_apart(old, new):
    """helper-46: the check and the call were flattened by joining their words: a comment or a
    backslash made the rule fail with an internal error, two spaces in a string read another
    attribute (the verifier refuted it). Each now rewrites and is checked by the verifier."""
    code = FIXTURE.read_text()
    assert old in code
    code = code.replace(old, new)
    line = code.splitlines().index("    with _lock:") + 1
    res = _mended(code, line)
    ob = _guard_ob(res)
    assert hoisted(ob, Ctx({}, {}, code=res.code, before=code)).result == "checked", ob
    if "hooks  installed" in new:
        assert "'hooks  installed'" in ob["check"] or '"hooks  installed"' in ob["check"]
