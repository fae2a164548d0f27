"""The solver protocol, for users who plug in their own MAP / marginal oracle.

A structure turns samples and weights into :class:`Potentials` and asks its solver
(``structure(solver=...)``, a name or an instance) for MAP labellings, single-node clamped
maximisers and, optionally, exact marginals or belief sessions; a :class:`GibbsSampler` draws
samples for contrastive divergence. A new solver subclasses :class:`Solver`, declares
its :class:`Capabilities` and implements ``map``; :meth:`Solver.clamped_maps` then works from
it, and ``marginals`` may be added.
"""

from ._backend import *  # noqa: F403 (the protocol's names, listed once in _backend)
from ._backend import __all__  # noqa: F401
