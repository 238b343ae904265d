"""mend.rules._common.add_import puts an import where LibCST's AddImportsVisitor does (the
rules used the visitor before; it re-walks and copies the whole tree, 4 s on a transformers
file), so rewrites and their diffs are unchanged."""
import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from mend.rules._common import add_import

SOURCES = [
    '"""doc"""\nimport os\n# c\nx = 1\n',
    "x = 1\n",
    "",
    '"""only a docstring"""\n',
    "from __future__ import annotations\nimport a\nb = 1\n",
    "__strict__ = True\nimport a\n\n\nb = 2\n",
    "# only a comment\n",
    "import a\n",
    "import a; import b\nx = 1\n",
    '"""d"""\n# a comment first\n\nx = 1\n',
    "import a\nfrom b import c\n# comment\ndef f():\n    import os\n    return os\n",
    "if True:\n    import a\nx = 1\n",
]


def _visitor(module: cst.Module, name: str, asname: str | None) -> str:
    ctx = CodemodContext()
    AddImportsVisitor.add_needed_import(ctx, name, asname=asname)
    return AddImportsVisitor(ctx).transform_module(module).code


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name,asname", [("torch", None), ("mend.runtime", "_mend_rt")])
def test_same_placement_as_libcst(source, name, asname):
    module = cst.parse_module(source)
    got = add_import(module, f"import {name}" + (f" as {asname}" if asname else ""))
    assert got.code == _visitor(module, name, asname)
    assert f"import {name}" in got.code


def test_the_rest_of_the_module_is_untouched():
    source = "import a\n\n\ndef f(x):  # keep me\n    return x\n"
    got = add_import(cst.parse_module(source), "import torch").code
    assert got == "import a\nimport torch\n\n\ndef f(x):  # keep me\n    return x\n"
