"""dead-host-work's ``inspect.Signature.bind`` rewrite (transformers 5.24 ``select_hidden_states``,
output_capturing.py:298): the lookup read from the signature once must answer only calls bind
accepts, with exactly bind's value, and leave every other call to bind (its TypeError
included). The verifier's check is shown to catch wrong helpers (mutants), the rewritten
decorator is compared with the original on valid and invalid calls, and a break inside the
standard library is located at the calling line."""
import importlib.util
import inspect

import libcst as cst
import pytest

from mend.detect import BreakEvent, Frame
from mend.rules.dead_host_work import rewrite
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
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
