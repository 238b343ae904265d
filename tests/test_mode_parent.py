"""helper-85's F4: a check moved into the graph (predicated-validation, tensor-check) whose
caller, elsewhere in the file, runs it inside a torch mode context. Under the eager backend a
check failing inside the graph left the mode set for the process: grad mode off (the next
training step's backward raised), flash SDPA disabled. Both rules now decline, saying why;
autocast and device contexts, measured not to leak, do not decline."""
from __future__ import annotations

import libcst as cst
import pytest

from mend.rules import RULES, Decline
from tests.conftest import FIXTURES

DIR = FIXTURES / "mode_parent"


def _line(src: str, needle: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if needle in t)


@pytest.mark.parametrize("name, rule, needle, context", [
    ("nograd_parent.py", "predicated-validation", "if torch.isnan(x).any():", "with torch.no_grad()"),
    ("tensor_check_nograd_parent.py", "tensor-check", "torch._check_tensor_all", "with torch.no_grad()"),
    ("sdpa_parent.py", "predicated-validation", "if torch.isnan(x).any():",
     "with torch.nn.attention.sdpa_kernel"),
])
def test_a_torch_mode_context_elsewhere_in_the_file_declines(name, rule, needle, context):
    src = (DIR / name).read_text()
    res = RULES[rule].rewrite(cst.parse_module(src), _line(src, needle))
    assert isinstance(res, Decline) and context in res.reason and "leaves that mode set" in res.reason, res


@pytest.mark.parametrize("parent", [
    "        with torch.autocast('cpu', enabled=False):\n            h = self.enc(x)\n",
    "        with torch.device('cpu'):\n            h = self.enc(x)\n",
    "        h = self.enc(x)\n",
])
def test_autocast_device_or_no_context_is_still_fixed(parent):
    src = (DIR / "nograd_parent.py").read_text()
    src = src.replace("        with torch.no_grad():\n            h = self.enc(x)\n", parent)
    src = src.replace("        with torch.no_grad():\n            return fn(*a)\n", "        return fn(*a)\n")
    res = RULES["predicated-validation"].rewrite(cst.parse_module(src), _line(src, "if torch.isnan(x).any():"))
    assert not isinstance(res, Decline), res.reason


def test_a_decorator_and_a_name_imported_from_torch_decline_too():
    src = (DIR / "nograd_parent.py").read_text()
    src = src.replace("        with torch.no_grad():\n            return fn(*a)\n", "        return fn(*a)\n")
    decorated = src.replace("    def forward(self, x):\n        with torch.no_grad():\n            h = self.enc(x)\n",
                            "    @torch.inference_mode()\n    def forward(self, x):\n        h = self.enc(x)\n")
    res = RULES["predicated-validation"].rewrite(cst.parse_module(decorated), _line(decorated, "if torch.isnan"))
    assert isinstance(res, Decline) and "@torch.inference_mode()" in res.reason, res
    imported = src.replace("from torch import nn\n", "from torch import nn\nfrom torch import no_grad\n").replace(
        "        with torch.no_grad():\n            h = self.enc(x)\n", "        with no_grad():\n            h = self.enc(x)\n")
    res = RULES["predicated-validation"].rewrite(cst.parse_module(imported), _line(imported, "if torch.isnan"))
    assert isinstance(res, Decline) and "with no_grad()" in res.reason, res
