"""The kept-run screens (`autocast-keeps-original`, `anomaly-keeps-original`,
verifier/encoders/autocast_guard.py): the guarded `if <guard>: <kept original> else: <new code>`
must stand where the kept statements stood. helper-104 S1: the screen accepted such an `if`
anywhere in the file; helper-106 then placed it in a shadowed method of the same name, under an
enclosing statement that had changed, or in a property getter beside its setter (a false
refusal). Cases are helper-106's (static screens: the mended files are not run)."""
import textwrap

import pytest

from verifier.encoders.autocast_guard import anomaly_keeps_original, autocast_keeps_original
from verifier.encoders.base import Ctx

KEPT = "if h.sum() > 0:\n    y = h * 2\nelse:\n    y = h - 1\n"
ANOMALY = "not torch.compiler.is_compiling() and torch.is_anomaly_enabled()"
AUTOCAST = " or ".join(f'torch.is_autocast_enabled("{d}")' for d in ("cpu", "cuda", "xpu", "mps"))
SITE = """\
if GUARD:
    if h.sum() > 0:
        y = h * 2
    else:
        y = h - 1
else:
    y = torch.where(h.sum() > 0, h * 2, h - 1)
"""
ORIGINAL = KEPT
NEW = "y = torch.where(h.sum() > 0, h * 2, h - 1)\n"


def _screens(before: str, mended: str, kept: str = KEPT) -> tuple[str, str]:
    before, mended = textwrap.dedent(before), textwrap.dedent(mended)
    a = anomaly_keeps_original({"original": kept}, Ctx({}, {}, mended.replace("GUARD", ANOMALY), before))
    b = autocast_keeps_original({"original": kept, "devices": ["cpu", "cuda", "xpu", "mps"]},
                                Ctx({}, {}, mended.replace("GUARD", AUTOCAST), before))
    return a.result, b.result


def _in(template: str, block: str) -> str:
    """``template`` with ``BLOCK`` replaced by ``block``, indented as the marker is."""
    line = next(ln for ln in template.splitlines() if ln.strip() == "BLOCK")
    return template.replace(line, textwrap.indent(block, line[:len(line) - len(line.lstrip())]).rstrip("\n"))


FORWARD = """\
import torch
class Model(torch.nn.Module):
    def forward(self, h):
        BLOCK
        return y
"""


def test_the_rules_own_form_in_place_is_checked():
    assert _screens(_in(FORWARD, ORIGINAL), _in(FORWARD, SITE)) == ("checked", "checked")
    wrap = FORWARD.replace("        BLOCK\n", "        with torch.no_grad():\n            BLOCK\n")
    assert _screens(_in(wrap, ORIGINAL), _in(wrap, SITE)) == ("checked", "checked")


@pytest.mark.parametrize("case", ["shadowed def", "enclosing with", "enclosing if", "decorator", "moved",
                                  "no else"])
def test_a_kept_run_out_of_place_is_refuted(case):
    before, mended = _in(FORWARD, ORIGINAL), _in(FORWARD, SITE)
    if case == "shadowed def":   # the guard in a dead first `forward`, the live one unguarded
        live = "    def forward(self, h):\n        " + NEW + "        return y\n"
        before = before.replace("class Model(torch.nn.Module):\n", "class Model(torch.nn.Module):\n    def forward(self, h):\n"
                                "        return h\n")
        mended = mended + live
    if case in ("enclosing with", "enclosing if"):
        outer = "        with torch.no_grad():\n" if case == "enclosing with" else "        if self.training:\n"
        changed = "        if False:\n" if case == "enclosing with" else "        if not self.training:\n"
        wrap = FORWARD.replace("        BLOCK\n", outer + "            BLOCK\n")
        before, mended = _in(wrap, ORIGINAL), _in(wrap.replace(outer, changed), SITE)
    if case == "decorator":
        mended = mended.replace("    def forward", '    @torch.autocast("cpu", enabled=False)\n    def forward')
    if case == "moved":   # the kept run placed after a statement that stood after it
        before = _in(FORWARD, ORIGINAL + "h = h + 1\n")
        mended = _in(FORWARD, "h = h + 1\n" + SITE)
    if case == "no else":
        mended = _in(FORWARD, SITE.split("else:\n    y = torch")[0] + NEW)
    assert _screens(before, mended) == ("refuted", "refuted"), case


def test_a_property_getter_beside_its_setter_is_checked():
    """helper-106 8: the setter of the same name had replaced the getter's address."""
    prop = """\
    import torch
    class Model(torch.nn.Module):
        @property
        def out(self):
            h = self.h
            BLOCK
            return y
        @out.setter
        def out(self, v):
            self.h = v
    """
    assert _screens(_in(prop, ORIGINAL), _in(prop, SITE)) == ("checked", "checked")


def test_two_sites_in_one_block_check_against_the_original():
    """A certificate re-check reads the final mended file and the original (before both rewrites):
    another site rewritten in the same block leaves this one in place."""
    other = "if h.mean() > 0:\n    z = h\nelse:\n    z = -h\n"
    other_new = "z = torch.where(h.mean() > 0, h, -h)\n"
    assert _screens(_in(FORWARD, ORIGINAL + other), _in(FORWARD, SITE + other_new)) == ("checked", "checked")
