"""verifier.forcing.instrument: the no-parse answer for lines that start no `if` (and hold
no ` if `) agrees with the parse (an `if`/`elif` always begins its line)."""
import textwrap

from verifier.forcing import instrument

SRC = textwrap.dedent("""\
    def f(x, iffy):
        ifx = iffy
        if x.sum() > 0:
            y = 1
        elif (x.mean()
              < 0):
            y = 2
        else:
            y = 3
        s = "if x:"
        return y if ifx else 0
    """)


def test_if_and_elif_lines_are_instrumented():
    assert "__mend_force__(x.sum() > 0, 3)" in instrument(SRC, 3)
    assert "__mend_force__((x.mean()\n          < 0), 5)" in instrument(SRC, 5)


def test_other_lines_are_not():
    # `ifx = ...`, a body line, a continuation line, a string holding "if", `else:`, and
    # lines outside the file (a conditional expression that is a statement's whole value is
    # instrumented: the test below)
    assert [instrument(SRC, n) for n in (2, 4, 6, 8, 10, 0, 99)] == [None] * 7
    assert "return y if __mend_force__(ifx, 11) else 0" in instrument(SRC, 11)


def test_a_ternary_test_is_instrumented_and_nothing_else_on_its_line():
    from verifier.forcing import instrument

    src = "def f(x):\n    h = x * 2 if x.sum() > 0 else -x\n    return [a if a else 0 for a in h]\n"
    out = instrument(src, 2)
    assert out.splitlines()[1] == "    h = x * 2 if __mend_force__(x.sum() > 0, 2) else -x"
    assert instrument(src, 3) is None   # a ternary inside a comprehension is not the statement's value
    assert instrument("def f(x):\n    return (x if x.any() else -x)\n", 2) is None   # parenthesised: not taken
    assert instrument("def f(x):\n    return x if x.any() else -x\n", 2).splitlines()[1] == \
        "    return x if __mend_force__(x.any(), 2) else -x"


def test_elif_lines_of_a_chain():
    from mend.pipeline import elif_lines

    assert elif_lines(SRC, 3) == [5]            # the continuation line and `else:` end nothing early
    assert elif_lines(SRC, 5) == []
    nested = "def f(x):\n    if a:\n        if b:\n            pass\n        elif c:\n            pass\n    elif d:\n" \
             "        # note\n\n        pass\n    z = 1\n    if e:\n        pass\n    elif g:\n        pass\n"
    assert elif_lines(nested, 2) == [7]         # not the inner chain's elif, not the next if's
    assert elif_lines(nested, 3) == [5]
    assert elif_lines(nested, 12) == [14]


def test_an_elif_outcome_no_input_reaches_is_still_verified():
    """Each test of a predicated if/elif chain is forced both ways with the tests before it
    forced False: a candidate wrong only on the elif's true side, which the drawn inputs
    (the elif's test is never true by itself) never reach, is caught; forcing the `if` alone misses it."""
    import torch

    from verifier.differential import differential_test

    class Orig(torch.nn.Module):
        def forward(self, x):
            if __mend_force__((x.abs() >= 0).all(), 3):  # noqa: F821 - the verifier's hook
                y = x + 1
            elif __mend_force__((x.abs() < -1).any(), 5):  # noqa: F821 - never true by itself
                y = x * 2
            else:
                y = x - 1
            return y

    class Wrong(torch.nn.Module):
        def forward(self, x):
            p1 = __mend_force__((x.abs() >= 0).all(), 3)  # noqa: F821
            p2 = __mend_force__((x.abs() < -1).any(), 5)  # noqa: F821
            return torch.where(p1, x + 1, torch.where(p2, x * 3, x - 1))   # x * 3: wrong on the elif side

    example = (torch.ones(3),)
    kw = dict(max_examples=3, compiled=False, edge=False, train=False)
    assert differential_test(Orig(), Wrong(), example, force_lines=[3], **kw).passed
    ev = differential_test(Orig(), Wrong(), example, force_lines=[3, 5], **kw)
    assert not ev.passed and "x * 3" not in ev.reason, ev.reason


ASSERTS = textwrap.dedent("""\
    def f(x, p):
        assert (p >= 0).all() and (p <= 1).all() and x.dim() == 2, "msg"
        assert (x > 0).all(), f"bad {x.shape}"
        assert (a or b) and not c
        return x
    """)


def test_an_asserts_test_is_wrapped_whole_or_operand_by_operand():
    from verifier.forcing import forced_keys

    out = instrument(ASSERTS, 2)
    assert out.splitlines()[1] == ("    assert __mend_force__((p >= 0).all(), '2&0') and __mend_force__((p <= 1).all(), "
                                   "'2&1') and __mend_force__(x.dim() == 2, '2&2'), \"msg\"")
    assert forced_keys(out, 2) == ["2&0", "2&1", "2&2"]
    out = instrument(ASSERTS, 3)
    assert out.splitlines()[2] == "    assert __mend_force__((x > 0).all(), '3'), f\"bad {x.shape}\""
    assert forced_keys(out, 3) == ["3"]
    # an operand holding `or`, or `not`, is forced whole
    assert "__mend_force__(a or b, '4&0') and __mend_force__(not c, '4&1')" in instrument(ASSERTS, 4)
    assert instrument(ASSERTS, 2, last_and=True) is None   # `last_and` is an `if`'s form only
    assert forced_keys(instrument(SRC, 3), 3) == [3]


def test_settings_reach_each_operand_after_the_ones_before_it_held_and_each_elif_after_false_tests():
    from verifier.forcing import settings

    assert settings(["2&0", "2&1"]) == [{}, {"2&0": True}, {"2&0": False}, {"2&0": True, "2&1": True},
                                        {"2&0": True, "2&1": False}]
    assert settings([3, 5]) == [{}, {3: True}, {3: False}, {3: False, 5: True}, {3: False, 5: False}]
    assert settings(["7"]) == [{}, {"7": True}, {"7": False}]


def test_an_asserts_python_test_stays_a_python_bool():
    # Dynamo compiles `assert <tensor>` itself, into a check raising RuntimeError: a Python
    # test made a tensor by the hook would fail differently from the original under compile
    import torch

    from verifier import forcing

    forcing.reset()
    assert forcing.force(True, "9") is True and forcing.seen("9") == {True}
    with forcing.forced("9", False):
        assert forcing.force(True, "9") is False
        t = forcing.force(torch.tensor(True), "9")
        assert isinstance(t, torch.Tensor) and not t.item()
    assert isinstance(forcing.force(True, 9), torch.Tensor)   # an `if`'s: a tensor, for the rewrite's ops
