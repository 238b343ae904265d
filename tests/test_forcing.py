"""verifier.forcing.instrument: the no-parse answer for lines that start no `if` agrees with
the parse (an `if`/`elif` always begins its line)."""
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
    # `ifx = ...`, a body line, a continuation line, a string holding "if", a conditional
    # expression, `else:`, and lines outside the file
    assert [instrument(SRC, n) for n in (2, 4, 6, 8, 10, 11, 0, 99)] == [None] * 8
