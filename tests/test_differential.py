import pytest


def test_compiled_tolerance_follows_the_least_precise_dtype_the_model_computes_in():
    import torch

    from verifier.differential import _tolerance, least_precise_float

    assert _tolerance(torch.float32) == (1e-4, 1e-5)
    assert _tolerance(torch.float32, torch.float16) == (1e-2, 1e-2)
    assert _tolerance(torch.float32, torch.float32) == (1e-4, 1e-5)
    half = torch.nn.Linear(2, 2).half()
    assert least_precise_float(half, (torch.randn(2, 2),)) == torch.float16
    assert least_precise_float(torch.nn.Linear(2, 2), (torch.randn(2, 2), torch.zeros(2, dtype=torch.int64))) \
        == torch.float32
    assert least_precise_float(torch.nn.Linear(2, 2), (torch.randn(2, 2, dtype=torch.bfloat16),)) == torch.bfloat16
    assert least_precise_float(torch.nn.Identity(), (torch.zeros(2, dtype=torch.int64),)) is None


def _observed(forward, x):
    import torch

    from verifier.differential import observe

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return forward(self, x)
    return observe(M(), (x,), {}, grad=True)


def test_output_aliasing_is_compared_in_eager():
    import pytest
    import torch

    from verifier.differential import Mismatch, compare

    x = torch.tensor([1.0, 2.0, 3.0])
    same = _observed(lambda m, x: x, x)
    assert same[7] == [("is", "input 0")]
    assert _observed(lambda m, x: x[:2], x)[7] == [("view", "input 0")]
    assert _observed(lambda m, x: m.w, x)[7] == [("is", "`w`")]
    new = _observed(lambda m, x: torch.where(x.sum() > 100, x * 0.5, x), x)
    assert new[7] == [None]
    assert compare(same, _observed(lambda m, x: x, x), exact=True) == 0.0
    with pytest.raises(Mismatch, match="output 0 is input 0 itself in the original but is a new tensor"):
        compare(same, new, exact=True)
    with pytest.raises(Mismatch, match="shares the storage of input 0 in the original"):
        compare(_observed(lambda m, x: x[:2], x), _observed(lambda m, x: x[:2].clone(), x), exact=True)
    # compiled comparisons keep to values: Dynamo/AOTAutograd may return a fresh tensor
    assert compare(same, new, exact=False) == 0.0


def test_gradient_nan_positions_are_compared():
    import pytest
    import torch

    from verifier.differential import Mismatch, compare

    x = torch.tensor([1.0, 2.0, 3.0])
    # the untaken side's sqrt of a negative mean: torch.where passes 0 * nan = nan to x's gradient
    ref = _observed(lambda m, x: x * 2.0, x)
    got = _observed(lambda m, x: torch.where(-x.mean() > 0, x * torch.sqrt(-x.mean()), x * 2.0), x)
    with pytest.raises(Mismatch, match="gradient NaN positions differ"):
        compare(ref, got, exact=True)


def test_every_observation_sees_torch_once_per_process_warnings():
    """torch warns "Converting a tensor with requires_grad=True to a scalar" once per process
    (TORCH_WARN_ONCE): without torch.set_warn_always during observations, only the first run
    saw it, so a second site that lost the warning was accepted (an adversarial helper's
    finding, 2026-12-04). The user's setting is restored afterwards."""
    import torch
    from verifier.differential import observe

    class Scalar(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            h = self.fc(x)
            return h / float(h.abs().amax())

    before = torch.is_warn_always_enabled()
    x = torch.randn(2, 3)
    for _ in range(2):
        warned = observe(Scalar(), (x,), {}, grad=True)[2]
        assert any("requires_grad=True to a scalar" in message for _, message in warned), warned
    assert torch.is_warn_always_enabled() == before


def test_non_tensor_parts_of_the_output_are_compared():
    # an adversarial review: a rewrite made a returned repr 'np.int64(5)' into '5', and the
    # differential test compared tensors only
    import numpy as np
    import pytest
    import torch

    from verifier.differential import Mismatch, compare

    x = torch.tensor([1.0, 2.0, 3.0])
    ref = _observed(lambda m, x: (x * 2, np.int64(5), "a", None), x)
    assert compare(ref, _observed(lambda m, x: (x * 2, np.int64(5), "a", None), x), exact=True) == 0.0
    for changed in ((x * 2, 5, "a", None), (x * 2, np.int64(5), "b", None), (x * 2, np.int64(5), "a", 0)):
        with pytest.raises(Mismatch, match="non-tensor parts differ"):
            compare(ref, _observed(lambda m, x, c=changed: c, x), exact=True)
    # compiled against eager: a float read from a tensor is not compared by value, its type is
    floats = _observed(lambda m, x: (x, 0.30000000000000004), x)
    assert compare(floats, _observed(lambda m, x: (x, 0.3), x), exact=False) == 0.0
    with pytest.raises(Mismatch):
        compare(floats, _observed(lambda m, x: (x, 0.3), x), exact=True)
    # objects compare by type only (a repr may hold an address)
    assert compare(_observed(lambda m, x: (x, object()), x), _observed(lambda m, x: (x, object()), x),
                   exact=True) == 0.0


def test_the_modules_python_attributes_are_compared_after_the_call():
    # a review: only buffers were compared, so a rewrite that changed a Python attribute (a
    # counter, a stored type) went unseen
    import numpy as np
    import pytest
    import torch

    from verifier.differential import Mismatch, compare, observe

    class Counter(torch.nn.Module):
        def __init__(self, step, kind):
            super().__init__()
            self.calls, self.step, self.kind = 0, step, kind
            self.inner = torch.nn.Linear(2, 2)

        def forward(self, x):
            self.calls += self.step
            self.inner.seen = self.kind
            return x * 2

    x = torch.ones(2)
    ref = observe(Counter(1, np.int64(3)), (x,), {}, grad=False)
    assert compare(ref, observe(Counter(1, np.int64(3)), (x,), {}, grad=False), exact=True) == 0.0
    for other in (Counter(2, np.int64(3)), Counter(1, 3)):
        with pytest.raises(Mismatch, match="Python attributes differ"):
            compare(ref, observe(other, (x,), {}, grad=False), exact=True)


def test_dynamos_user_code_appendix_is_not_part_of_the_compared_exception_message(tmp_path):
    """Review case c25: the same IndexError, raised by compiled code in the original file and
    in mend's temporary copy, carried two different "from user code" paths: a false decline."""
    import pytest
    import torch

    from verifier.differential import Mismatch, compare, observe

    def model_in(name, body):
        path = tmp_path / f"{name}.py"
        path.write_text("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                        f"        {body}\n        return a + b\n")
        scope = {}
        exec(compile(path.read_text(), str(path), "exec"), scope)
        return torch.compile(scope["M"](), backend="eager")

    x = torch.randn(1, 3)
    a = observe(model_in("original", "a, b = x[0], x[1]"), (x,), {}, grad=False)
    b = observe(model_in("mended", "a, b = x[0], x[1]  # moved"), (x,), {}, grad=False)
    assert a[0] == ("raised", "IndexError", "index 1 is out of bounds for dimension 0 with size 1")
    assert compare(a, b, exact=True) == 0.0
    c = observe(model_in("other", "a, b = x[0], x[2]"), (x,), {}, grad=False)
    with pytest.raises(Mismatch, match="behaviour differs"):
        compare(a, c, exact=True)
    torch._dynamo.reset()


def test_a_mismatch_hypothesis_cannot_replay_is_a_failure_not_a_crash():
    """helper-40: a difference seen once on a drawn input, not repeated when Hypothesis replayed
    it, ended the whole run as an internal error (FlakyFailure); it is a failed test."""
    import torch

    from verifier.differential import differential_test

    class Same(torch.nn.Module):
        def forward(self, x):
            return x * 2

    calls = []

    class OnceOff(torch.nn.Module):
        """Like Same, except on its 9th call (a drawn input, not the example)."""

        def forward(self, x):
            calls.append(1)
            return x * 2 + (1.0 if len(calls) == 9 else 0.0)

    ev = differential_test(Same(), OnceOff(), (torch.ones(3),), max_examples=10, compiled=False)
    assert not ev.passed and "nondeterministic" in ev.reason, ev.reason


def test_integer_inputs_at_their_dtype_limits_are_drawn_within_them():
    """helper-66: a uint8 input of 200 crashed `mend fix` (randint's bound two past the example's
    range, 257, is out of uint8's range). Bounds are clamped to the dtype's."""
    import torch

    for dtype, values in [(torch.uint8, [200, 1]), (torch.uint8, [0, 255]), (torch.int8, [-128, 127]),
                          (torch.int64, [-2**63, 2**63 - 1])]:
        _draw_within(dtype, values)


def _draw_within(dtype, values):
    import torch
    from hypothesis import given, settings

    from verifier.differential import inputs_strategy

    example = (torch.tensor(values, dtype=dtype),)

    @settings(max_examples=15, deadline=None, database=None)
    @given(inputs_strategy(example, edge=True, vary_batch=False))
    def check(drawn):
        (t,) = drawn
        assert t.dtype == dtype

    check()


def test_a_gradient_present_on_one_side_only_is_named():
    """helper-67: the message said "gradient 1"; it names the input or parameter."""
    import torch
    from verifier.differential import Mismatch, compare, observe

    class Gated(torch.nn.Module):
        def __init__(self, use_bias):
            super().__init__()
            self.use_bias = use_bias
            self.bias = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * 2 + (self.bias if self.use_bias else 0)

    x = torch.randn(3)
    a = observe(Gated(False), (x,), {}, grad=True)
    b = observe(Gated(True), (x,), {}, grad=True)
    assert [n for n, _ in a[4]] == ["input 0", "parameter bias"]
    with pytest.raises(Mismatch, match=r"the gradient of parameter bias is None in the original but a tensor"):
        compare(a, b, exact=True)


def test_a_kept_copy_read_by_backward_after_an_inplace_write_fails_under_aot_eager_in_training():
    """helper-71's i11, written out by hand: `t = self.temp.item(); self.temp.mul_(0.5); x / t`
    kept as a cloned 0-d tensor is exact in eager and under the eager backend, but AOTAutograd
    (aot_eager, inductor) functionalizes the in-place write and backward read the written value:
    x.grad doubled. The differential test's aot_eager training leg must see it."""
    import torch
    from torch import nn

    from verifier.differential import differential_test

    class Original(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("temp", torch.tensor(2.0))
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            t = self.temp.item()
            self.temp.mul_(0.5)
            return self.fc(x) / t

    class Mended(Original):
        def forward(self, x):
            t = self.temp.detach().reshape(()).clone()
            self.temp.mul_(0.5)
            return self.fc(x) / t

    def make(cls):
        torch.manual_seed(0)
        return cls()
    ev = differential_test(make(Original), make(Mended), (torch.randn(3, 4),), emitted=make(Mended),
                           reference=make(Original), max_examples=3)
    assert not ev.passed and "compiled:aot_eager/train" in ev.modes
    assert ev.reason.startswith("in training under torch.compile (aot_eager): gradient values differ")


def test_the_jittered_example_keeps_shapes_and_moves_every_float():
    import torch

    from verifier.legs import jittered

    x, n = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 4 + 1, torch.tensor([1, 2])
    jx, jn = jittered((x, n))
    assert jx.shape == x.shape and jx.dtype == x.dtype and jn is n
    assert bool((jx != x).all()) and float(((jx - x) / x).abs().max()) < 1e-2


def test_printed_grad_fn_names_count_only_between_eager_runs():
    """helper-89: a tensor printed inside an AOT-compiled region shows grad_fn=<CompiledFunctionBackward>,
    the mended model's deferred print shows eager's grad_fn=<AddmmBackward0>; compiled comparisons
    leave the node's name aside (verifier/shown.py), eager-vs-eager ones compare it."""
    import torch

    from verifier.differential import Mismatch, compare

    def printing(name):
        def forward(m, x):
            print(f"h tensor([1., 2.], grad_fn=<{name}>)")
            return x * m.w
        return forward

    x = torch.tensor([1.0, 2.0, 3.0])
    a, b = _observed(printing("CompiledFunctionBackward"), x), _observed(printing("AddmmBackward0"), x)
    assert compare(a, b, exact=False) == 0.0
    with pytest.raises(Mismatch, match="stdout differ"):
        compare(a, b, exact=True)
    with pytest.raises(Mismatch, match="stdout differ"):   # any other character still counts
        compare(a, _observed(lambda m, x: (print("h tensor([1., 3.], grad_fn=<X>)"), x * m.w)[1], x), exact=False)


def test_a_small_counterexample_shows_every_value():
    # helper-92: a (3, 8) counterexample showed 6 of its 24 values, so it could not be run again
    import torch

    from verifier.differential import differential_test

    class Twice(torch.nn.Module):
        def forward(self, x):
            return x * 2

    class Thrice(torch.nn.Module):
        def forward(self, x):
            return x * 3

    ev = differential_test(Twice(), Thrice(), (torch.arange(24.0).reshape(3, 8),), max_examples=1, compiled=False)
    assert not ev.passed
    assert ev.counterexample.startswith("(3, 8) torch.float32 " + str([float(v) for v in range(24)]))
    ev = differential_test(Twice(), Thrice(), (torch.arange(40.0),), max_examples=1, compiled=False)
    assert ev.counterexample.startswith("(40,) torch.float32 [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, ... (40 values)]")
