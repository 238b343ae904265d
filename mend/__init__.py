"""GraphMend: find, rewrite and prove fixes for TorchDynamo graph breaks.

Data flows one way: target -> detect -> plan -> verify -> emit
(see the GraphMend paper, Kashmira et al., arXiv 2509.16248).

The Python API (:mod:`mend.api`): ``mend.scan_model(model, *args, **kwargs)`` and
``mend.fix_model(factory)``; ``mend.testing.assert_no_new_graph_breaks`` for tests. They
are imported on first use, so ``import mend`` does not import torch.
"""

__version__ = "0.1.0"

_API = {"scan_model", "fix_model", "ScanResult", "Site", "FixResult"}


def __getattr__(name: str):
    if name in _API:
        from mend import api

        return getattr(api, name)
    raise AttributeError(f"module 'mend' has no attribute {name!r}")


__all__ = sorted(_API)
