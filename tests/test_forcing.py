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
