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


def test_tensor_check_declines_a_parent_modules_try_around_the_child(tmp_path):
    # helper-85's F9: the parent's `except RuntimeError` fell back to zeros in eager; with the
    # check in the graph the mended model raised instead (eager, aot_eager, inductor backends)
    src = (DIR / "tensor_check_parent_try.py").read_text()
    res = RULES["tensor-check"].rewrite(cst.parse_module(src), _line(src, "torch._check_tensor_all"))
    assert isinstance(res, Decline) and "`forward` has a `try` with a handler" in res.reason, res


def test_tensor_check_in_a_utility_file_ignores_library_try_blocks_but_not_a_wrapper_calling_its_argument():
    # transformers' import_utils.py holds torch_compilable_check beside 47 try/with blocks around
    # library calls (`importlib.metadata.version(name)`, `x.jax()`): none runs model code
    head = ("import importlib.metadata\n\nimport torch\n\n\ndef version(name):\n    try:\n"
            "        return importlib.metadata.version(name)\n    except Exception:\n        return None\n\n\n"
            "def is_jax(x):\n    try:\n        return x.jax() is not None\n    except Exception:\n        return False\n\n\n")
    check = "def check(cond):\n    torch._check_tensor_all(cond, lambda: \"cond must hold\")\n"
    src = head + check
    res = RULES["tensor-check"].rewrite(cst.parse_module(src), _line(src, "torch._check_tensor_all"))
    assert not isinstance(res, Decline), res.reason
    wrapper = head + "def tolerant(fn):\n    def run(*a):\n        try:\n            return fn(*a)\n" \
                     "        except RuntimeError:\n            return None\n    return run\n\n\n" + check
    res = RULES["tensor-check"].rewrite(cst.parse_module(wrapper), _line(wrapper, "torch._check_tensor_all"))
    assert isinstance(res, Decline) and "`tolerant` has a `try` with a handler" in res.reason, res


def test_a_torch_mode_context_around_the_check_in_its_own_function_declines():
    # helper-85: `@sdpa_kernel(...)` on the check's own function left flash SDPA disabled
    src = (DIR / "nograd_parent.py").read_text()
    src = src.replace("        with torch.no_grad():\n            return fn(*a)\n", "        return fn(*a)\n")
    src = src.replace("        with torch.no_grad():\n            h = self.enc(x)\n", "        h = self.enc(x)\n")
    own = src.replace("    def forward(self, x):\n        if torch.isnan(x).any():",
                      "    @torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)\n"
                      "    def forward(self, x):\n        if torch.isnan(x).any():")
    assert own != src
    res = RULES["predicated-validation"].rewrite(cst.parse_module(own), _line(own, "if torch.isnan"))
    assert isinstance(res, Decline) and "sdpa_kernel" in res.reason and "leaves the mode set" in res.reason, res


def test_an_item_write_to_a_tensor_made_in_the_call_is_no_state_change():
    # helper-86's m9: `h[h.isnan()] = 0.0` on `h = text + audio` declined the check above it
    from mend.rules._common import fresh_locals, state_change

    fn = cst.parse_module("def forward(self, text, audio, buf):\n    h = text + audio\n    h[h.isnan()] = 0.0\n"
                          "    buf[0] = 1.0\n    return h\n").body[0]
    assert fresh_locals(fn) == {"h"}
    assert state_change(fn) == "buf[0] = 1.0"   # a parameter's item write still is one
    fn = cst.parse_module("def forward(self, text, audio):\n    h = text + audio\n    h[0] = log.append(1)\n"
                          "    return h\n").body[0]
    assert state_change(fn) == "h[0] = log.append(1)"


@pytest.mark.parametrize("name, rule, needle, words", [
    # helper-87's F4: `import torch as T`, `with T.no_grad(): return enc.forward(x)` in a helper
    ("h87_b1_tc_alias.py", "tensor-check", "torch._check_tensor_all", "with T.no_grad()"),
    # F5: a parent's plain `torch.set_grad_enabled(False)` call, and one imported under another name
    ("h87_g2_tc_setgrad.py", "tensor-check", "torch._check_tensor_all", "sets torch's global state"),
    ("h87_f1_sge_alias.py", "predicated-validation", "if torch.isnan(x).any():", "sets torch's global state"),
    # a module-level `try: return enc.forward(x)` in a file of nn.Modules (the differential test caught it)
    ("h87_g1_tc_try.py", "tensor-check", "torch._check_tensor_all", "has a `try` with a handler"),
])
def test_helper_87s_spellings_of_a_parent_context_decline(name, rule, needle, words):
    src = (DIR / name).read_text()
    res = RULES[rule].rewrite(cst.parse_module(src), _line(src, needle))
    assert isinstance(res, Decline) and words in res.reason, res
