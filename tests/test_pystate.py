"""The differential test compares Python state outside the module (verifier/pystate.py):
helper-47 moved a tensor check into the graph and, compiled, lost an append to the caller's
list, a counter in an `except` handler and a global dict's entry, with the same exception and
message, and buffers, outputs and attributes all equal."""
from __future__ import annotations

import types

import pytest
import torch

from verifier import pystate
from verifier.differential import Mismatch, compare, observe, skeleton

SOURCE = '''
import torch
from torch import nn

STATS = {"calls": 0}
SEEN = set()


class Model(nn.Module):
    def forward(self, x, cache):
        if EFFECTS:
            cache.append(x * 2)
            STATS["calls"] += 1
            SEEN.add(tuple(x.shape))
        return x + 1
'''


def _model(effects: bool, source: str = SOURCE):
    """A fresh module running ``source`` (its own globals), with the effects on or off."""
    mod = types.ModuleType("pystate_case")
    mod.__dict__["EFFECTS"] = effects
    exec(compile(source, "<pystate_case>", "exec"), mod.__dict__)
    return mod.Model()


def test_a_lost_append_to_an_argument_and_lost_global_writes_are_mismatches():
    x = torch.ones(2)
    with_effects, without = _model(True), _model(False)
    a = observe(with_effects, (x, []), {}, grad=False)
    b = observe(without, (x, []), {}, grad=False)
    assert a[9] == ("SEEN", "STATS") and b[9] == ()
    with pytest.raises(Mismatch, match="tensors held by the arguments"):
        compare(a, b, exact=True)
    # the globals alone (the arguments' state taken from the first run)
    b_globals = b[:6] + (a[6],) + b[7:10] + (a[10],)
    with pytest.raises(Mismatch, match="other module globals"):
        compare(a, b_globals, exact=True)
    # the argument's shape alone
    with pytest.raises(Mismatch, match="list or dict argument"):
        compare(a, a[:10] + (b[10],), exact=True)
    # under Inductor's any_error, where both raised, the state is still compared
    raised = ("raised", "RuntimeError", "boom")
    with pytest.raises(Mismatch, match="other module globals"):
        compare((raised,) + a[1:], (raised,) + b_globals[1:], exact=False, any_error=True)


def test_the_same_effects_agree_and_each_observation_gets_its_own_copy_of_the_argument():
    x = torch.ones(2)
    cache: list = []
    one, two = _model(True), _model(True)
    a = observe(one, (x, cache), {}, grad=False)
    b = observe(two, (x, cache), {}, grad=False)
    assert compare(a, b, exact=True) == 0.0
    assert cache == []                       # the caller's list is not the one the runs changed
    assert a[10] == (("list", (("tensor",),)),)


def test_fingerprints_see_set_contents_and_a_counter_s_position():
    import itertools

    assert pystate.fingerprint({1, 2}, skeleton) != pystate.fingerprint({1, 3}, skeleton)
    c = itertools.count()
    before = pystate.fingerprint(c, skeleton)
    next(c)
    assert pystate.fingerprint(c, skeleton) != before
    # only data the module's own code names: not Dynamo's (`__compiled_fn_*`, and the plain
    # `sub_intern_0` it binds tracing mend's runtime, which declined led's deferred logger)
    space: dict = {}
    exec("import torch\nN = 3\nsub_intern_0 = 5\n__compiled_fn_1 = 1\n\n\ndef g():\n    return N\n", space)
    assert pystate.snapshot([(space, pystate.referenced(space))], skeleton) == {"N": skeleton(3)}


def test_only_names_bound_before_the_call_count():
    """Tracing mend's runtime, Dynamo binds plain ints (`took_logger`) in the frame's globals of
    the compiled version only: a name that appears is not a change of the program's state."""
    assert pystate.changed({"A": 1}, {"A": 1, "took_logger": 2}) == ()
    assert pystate.changed({"A": 1, "B": 2}, {"A": 3}) == ("A", "B")


STASH = '''
import torch
from torch import nn

_LAST = None


class Model(nn.Module):
    def forward(self, x):
        global _LAST
        if EFFECTS:
            self.last_shape = tuple(x.shape)
            _LAST = x
        return x + 1
'''


def test_a_lost_attribute_or_tensor_global_is_a_mismatch_compiled_too():
    """helper-50: a value stashed on the module, or a tensor in a global, before a check that
    failed inside the graph was lost; attributes were not compared against a compiled run, nor
    tensor globals at all."""
    x = torch.ones(2)
    a = observe(_model(True, STASH), (x,), {}, grad=False)
    b = observe(_model(False, STASH), (x,), {}, grad=False)
    assert a[9] == ("_LAST",) and b[9] == ()
    for exact in (True, False):
        with pytest.raises(Mismatch, match="attributes differ"):
            compare(a, b[:9] + (a[9], a[10]), exact=exact)
    with pytest.raises(Mismatch, match="other module globals"):
        compare(a, b, exact=False)
    # compiled against eager, the RNG entry and float values are left out
    rng = [("k", ("builtins", "float", "1.5")), ("rng", "a")]
    assert pystate.relaxed(rng, "rng") == [("k", ("builtins", "float"))]


def test_an_int_past_python_s_str_digit_limit_is_compared_not_a_crash():
    # helper-85: a module attribute holding an int of more than 4300 digits made `mend fix`
    # fail with an internal error (repr raised ValueError in the differential test)
    from verifier.differential import skeleton

    big = 10 ** 5000
    assert skeleton(big) == skeleton(10 ** 5000) != skeleton(big + 1)


def test_numpy_and_python_random_draws_are_seeded_alike_in_both_runs():
    # helper-86's m6: a LayerDrop drawn with np.random skipped other layers in each run, so every
    # candidate of its file failed on gradients; both runs now start from the same numpy and
    # Python random state, as they do for torch's
    import random

    import numpy as np
    import torch

    from verifier.differential import differential_test

    class Drop(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            x = self.a(x) if np.random.uniform() < 0.5 else x
            return self.b(x) if random.random() < 0.5 else x

    torch.manual_seed(0)
    m1 = Drop()
    m2 = Drop()
    m2.load_state_dict(m1.state_dict())
    ev = differential_test(m1, m2, (torch.randn(2, 4),), max_examples=4, compiled=False)
    assert ev.passed, ev.reason
