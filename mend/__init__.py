"""GraphMend: find, rewrite and prove fixes for TorchDynamo graph breaks.

Data flows one way: target -> detect -> plan -> verify -> emit
(see the GraphMend paper, Kashmira et al., arXiv 2509.16248).
"""

__version__ = "0.1.0"
