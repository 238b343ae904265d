"""dead-host-work's ``inspect.Signature.bind`` rewrite (transformers 5.24 ``select_hidden_states``,
output_capturing.py:298): the lookup read from the signature once must answer only calls bind
accepts, with exactly bind's value, and leave every other call to bind (its TypeError
included). The verifier's check is shown to catch wrong helpers (mutants), the rewritten
decorator is compared with the original on valid and invalid calls, and a break inside the
standard library is located at the calling line."""
import inspect

import libcst as cst
import pytest

from mend.detect import BreakEvent, Frame
from mend.rules.dead_host_work import rewrite
from mend.targets import load_file_module
from mend.rules.dead_host_work.examples import FIX_EXAMPLES, example_line
from mend.rules.dead_host_work.rewrite import BIND_HELPERS
from verifier.encoders.base import Ctx
from verifier.encoders.bind_lookup import _compare, bind_lookup_agrees

DECORATOR = '''import inspect
from functools import wraps


def select_hidden_states(selection):
    def wrapped_fn(func):
        signature = inspect.signature(func)

        @wraps(func)
        def wrapper(self, *args, **kwargs):
            if not kwargs.get("output_hidden_states"):
                if isinstance(selection, str):
                    arguments = signature.bind(self, *args, **kwargs)
                    arguments.apply_defaults()
                    kwargs["output_hidden_states"] = arguments.arguments[selection]
                else:
                    kwargs["output_hidden_states"] = selection(self)
            return func(self, *args, **kwargs)

        return wrapper

    return wrapped_fn
'''


def _mended():
    line = next(i for i, t in enumerate(DECORATOR.splitlines(), 1) if ".bind(" in t)
    res = rewrite(cst.parse_module(DECORATOR), line)
    assert hasattr(res, "code"), res
    return res


def _load(tmp_path, name, code):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    return load_file_module(path, name)


def test_the_shipped_helpers_agree_with_bind():
    bad, compared, decided = _compare(BIND_HELPERS)
    assert bad is None and compared > 100_000 and decided > 1_000


@pytest.mark.parametrize("old, new, why", [
    ("if key in given or (", "if (", "bind raises"),                               # duplicate keyword
    ("(not var_keyword or key in positional)", "(not var_keyword)", "bind raises"),  # positional-only by keyword
    ("        if key not in given and key not in kwargs:\n            return unbound\n",
     "        pass\n", "raised KeyError"),                                          # a missing required one
    ("return args[given.index(name)]", "return args[0]", "wrong place"),            # the wrong argument
])
def test_the_check_refutes_wrong_helpers(old, new, why):
    assert old in BIND_HELPERS
    bad, _, _ = _compare(BIND_HELPERS.replace(old, new))
    assert bad is not None and why in bad


def test_encoder_checks_the_mended_file_and_refuses_a_site_without_fallback():
    res = _mended()
    ob = res.obligations[0]
    assert ob["kind"] == "bind-lookup-agrees"
    out = bind_lookup_agrees(ob, Ctx({}, {}, res.code, DECORATOR))
    assert out.result == "checked" and "decided by the lookup" in out.checked_by
    no_fallback = res.code.replace("if _mend_value is _MEND_UNBOUND:", "if False:")
    assert bind_lookup_agrees(ob, Ctx({}, {}, no_fallback, DECORATOR)).result == "refuted"
    assert bind_lookup_agrees(ob, Ctx({}, {}, DECORATOR, DECORATOR)).result == "unknown"


def test_mended_decorator_behaves_as_the_original(tmp_path):
    orig = _load(tmp_path, "bind_orig", DECORATOR)
    new = _load(tmp_path, "bind_new", _mended().code)

    def make(mod):
        class M:
            @mod.select_hidden_states("vision_feature_layer")
            def forward(self, pixel_values, vision_feature_layer=-1, *, output_hidden_states=None, **kwargs):
                return pixel_values, output_hidden_states, kwargs
        return M()
    a, b = make(orig), make(new)
    calls = [((1,), {}), ((1, 2), {}), ((), {"pixel_values": 1}), ((1,), {"vision_feature_layer": 5}),
             ((1,), {"extra": 3}), ((1,), {"output_hidden_states": 7}),
             ((), {}), ((1, 2, 3), {}), ((1,), {"pixel_values": 2}), ((1, 2), {"vision_feature_layer": 3})]
    def outcome(m, args, kwargs):
        try:
            return "ok", m.forward(*args, **kwargs)
        except TypeError as exc:
            return "TypeError", str(exc)
    for args, kwargs in calls:
        assert outcome(a, args, kwargs) == outcome(b, args, kwargs), (args, kwargs)
    with pytest.raises(TypeError, match="missing a required argument"):   # bind's own message, kept
        b.forward()


def test_fix_example_is_the_rewrite():
    before, after = FIX_EXAMPLES[-1]
    assert rewrite(cst.parse_module(before), example_line(before)).code == after


def test_a_break_in_the_standard_library_is_located_at_the_calling_line():
    stdlib = inspect.__file__
    ev = BreakEvent("mapping proxy affected by dictionary mutation", "", [
        Frame("/site/transformers/utils/output_capturing.py", 298, "wrapper", "arguments = signature.bind(...)"),
        Frame(stdlib, 3212, "bind", ""), Frame(stdlib, 3081, "_bind", "")])
    assert ev.site.file.endswith("output_capturing.py") and ev.site.line == 298


def test_the_reviewed_hash_is_the_shipped_helpers():
    import hashlib

    from verifier.encoders.bind_lookup import REVIEWED_HELPERS, _helper_source
    src = _helper_source(_mended().code)
    assert src is not None and hashlib.sha256(src.encode()).hexdigest() in REVIEWED_HELPERS


# --- regressions from the adversarial review -------------------------------------------------

def _variant(old, new):
    assert old in DECORATOR, old
    src = DECORATOR.replace(old, new)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if ".bind(" in t)
    return src, rewrite(cst.parse_module(src), line)


READ = 'kwargs["output_hidden_states"] = arguments.arguments[selection]'
BIND = "arguments = signature.bind(self, *args, **kwargs)"
MADE = "        signature = inspect.signature(func)\n"


@pytest.mark.parametrize("old, new, why", [
    # the read runs only sometimes in the original: the rewrite would read it always
    (READ, 'kwargs["output_hidden_states"] = arguments.arguments[selection] if selection else None', "whole right"),
    (READ, 'kwargs["output_hidden_states"] = selection and arguments.arguments[selection]', "whole right"),
    (READ, 'kwargs["output_hidden_states"] = lambda: arguments.arguments[selection]', "whole right"),
    # the signature's name rebound in the enclosing function in ways a plain target count misses
    (MADE, MADE + "        signature, _ = inspect.signature(func.__wrapped__), None\n", "not bound once"),
    (MADE, MADE + "        for signature in [inspect.signature(len)]:\n            pass\n", "not bound once"),
    (MADE, MADE + "        (signature := inspect.signature(len))\n", "not bound once"),
    (MADE, "        global signature\n" + MADE, "not bound once"),
    # the wrapper's arguments are not its own, or are rebound (an iterator would be used up)
    (BIND, "args = iter(args)\n                    " + BIND, "rebinds or deletes"),
    (BIND, "arguments = signature.bind(self, *args, **dict(kwargs))", "plain name"),
    (BIND, "locals()\n                    " + BIND, "reads its frame"),
    # `inspect` is not the standard module
    ("import inspect\n", "import inspect\n\n\nclass inspect:\n    signature = staticmethod(lambda f: None)\n",
     "`inspect` is not the standard module"),
])
def test_shapes_that_would_change_behaviour_are_declined(old, new, why):
    _, res = _variant(old, new)
    assert not hasattr(res, "code") and why in res.reason, res


def test_a_signature_that_is_not_a_plain_validated_one_always_goes_to_bind(tmp_path):
    new = _load(tmp_path, "bind_sig", _mended().code)

    class Strict(inspect.Signature):
        def bind(self, *a, **k):
            if "legacy" in k:
                raise TypeError("legacy is gone")
            return super().bind(*a, **k)

    def f(self, x, legacy=0, output_hidden_states=None):
        return output_hidden_states
    f.__signature__ = Strict.from_callable(f)
    g = new.select_hidden_states("legacy")(f)
    with pytest.raises(TypeError, match="legacy is gone"):
        g(None, 1, legacy=2)
    P = inspect.Parameter
    h = lambda self, *a, **k: k["output_hidden_states"]  # noqa: E731
    h.__signature__ = inspect.Signature([P("self", P.POSITIONAL_OR_KEYWORD), P("k", P.KEYWORD_ONLY, default=1),
                                         P("x", P.POSITIONAL_OR_KEYWORD, default=-1)], __validate_parameters__=False)
    assert new._mend_bind_table(h.__signature__) is None
    with pytest.raises(TypeError, match="too many positional"):
        new.select_hidden_states("x")(h)(None, 5)


@pytest.mark.parametrize("old, new, result", [
    ("(self, *args), kwargs, _MEND_UNBOUND)", "(self,), kwargs, _MEND_UNBOUND)", "refuted"),       # wrong arguments
    ("_mend_value = _mend_bound(", "_mend_value = 42 or _mend_bound(", "refuted"),                  # not the lookup
    ("def select_hidden_states(", "_mend_bound = lambda *a: a[3]\n\n\ndef select_hidden_states(", "unknown"),
    ("    if table is None or type(name) is not str:", "    if len(args) > 4:\n        return args[4]\n"
     "    if table is None or type(name) is not str:", "unknown"),                                  # not the reviewed
    ("def _mend_bound(", "@staticmethod\ndef _mend_bound(", "unknown"),                             # decorated
])
def test_the_verifier_is_not_fooled_by_a_tampered_mended_file(old, new, result):
    res = _mended()
    assert old in res.code, old
    out = bind_lookup_agrees(res.obligations[0], Ctx({}, {}, res.code.replace(old, new, 1), DECORATOR))
    assert out.result == result, (out.result, out.reason)
