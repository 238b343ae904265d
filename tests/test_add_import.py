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


@pytest.mark.parametrize("source,host", [
    ('"""Model."""\nimport warnings; import os\ndef f():\n    pass\n', "import warnings; import os; import mend.runtime as _mend_rt"),
    ('import os\nos.environ["A"] = "1"\nimport torch\n\ndef f(): pass\n', "import torch; import mend.runtime as _mend_rt"),
    ('"""d"""\ntry:\n    import a\nexcept ImportError:\n    a = None\nX = 1\n\ndef f(): pass\n',
     "X = 1; import mend.runtime as _mend_rt"),
    ('"""d"""\n__all__ = ["f"]\nimport a\n', "import a; import mend.runtime as _mend_rt"),
])
def test_same_line_moves_no_line_and_follows_the_setup(source, host):
    """``same_line`` (deferred side effects): the import shares the last top-level import line,
    so it runs after setup code above it (``os.environ`` before ``import torch``) and no
    line moves; without an import line, the last plain statement before the first def."""
    got = add_import(cst.parse_module(source), "import mend.runtime as _mend_rt", same_line=True).code
    assert got.count("\n") == source.count("\n") and host in got.splitlines()
    compile(got, "<mended>", "exec")


def test_same_line_without_a_host_takes_a_line_and_the_rule_says_so():
    """Only a docstring at the top level: the import needs a line of its own; the rule's
    warning-identity obligation then says the line may differ instead of claiming it."""
    from mend.rules import deferred_side_effects as de

    got = add_import(cst.parse_module('"""d"""\n\ndef f(): pass\n'), "import a", same_line=True).code
    assert got == '"""d"""\nimport a\n\ndef f(): pass\n'
    source = '"""d"""\n\n\ndef f(x):\n    import warnings\n    warnings.warn("x")\n    return x\n'
    res = de.rewrite(cst.parse_module(source), 6)
    assert isinstance(res, de.RewriteResult), res
    assert res.code.count("\n") > source.count("\n")
    (ident,) = [o for o in res.obligations if o["kind"] == "warning-identity"]
    assert ident["may_differ"] == ["lineno"] and "lineno" not in ident["same"]
    kept = de.rewrite(cst.parse_module("import warnings\n" + source), 7)
    (ident,) = [o for o in kept.obligations if o["kind"] == "warning-identity"]
    assert "lineno" in ident["same"] and "may_differ" not in ident
