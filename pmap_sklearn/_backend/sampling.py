"""Joint labellings drawn from the distribution a solver's marginals belong to.

A solver that can draw from its distribution directly has a ``sample(potentials, n_draws, rng,
clamp)`` method: forward filtering, backward sampling on chains (:class:`ChainSolver`), each
node from its own marginal for a fully factorised approximation (:class:`MeanFieldSolver`).
Any other solver with marginals draws by the chain rule,
:math:`P(y) = \\prod_i P(y_i \\mid y_{<i})`: the nodes of every sample are drawn one position
at a time from the marginals given the nodes already drawn, passed to the solver as clamps —
exact wherever the marginals are (forests, enumeration), one marginal call per position for
all the samples and draws at once.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_generator
from .potentials import Potentials
from .viterbi import _node_positions


def sample_labellings(
    solver, potentials: Potentials, n_draws: int, random_state=None, clamp=None
) -> np.ndarray:
    """``n_draws`` joint labellings of every sample from the solver's distribution.

    Parameters
    ----------
    solver : Solver
        A solver with its own ``sample`` method or with marginals.
    potentials : Potentials
    n_draws : int
    random_state : int, Generator, RandomState or None
    clamp : ndarray of shape (n_nodes,), optional
        Labels of clamped nodes (``-1`` = free): the draws are conditional on them.

    Returns
    -------
    ndarray of shape (n_draws, n_nodes)

    Raises
    ------
    ValueError
        For a solver with neither (MAP-only solvers: draw perturbed MAPs instead).
    """
    rng = check_generator(random_state)
    own = getattr(solver, "sample", None)
    if own is not None:
        return own(potentials, n_draws, rng, clamp)
    if not solver.has_marginals:
        raise ValueError(
            f"the {solver.name!r} solver computes no marginals, so it cannot draw from the "
            f"model's distribution: draw perturbed MAPs (method='perturb') or use a solver "
            f"with marginals"
        )
    return _chain_rule(solver, potentials, n_draws, rng, clamp)


def _chain_rule(solver, potentials: Potentials, n_draws, rng, clamp) -> np.ndarray:
    """Draws node position by position from the marginals given the nodes drawn before, every
    sample repeated ``n_draws`` times in one batch."""
    p = potentials
    n_samples, n_nodes = p.n_samples, p.n_nodes
    copies = p.take(np.tile(np.arange(n_samples), n_draws))
    fixed = np.full(n_nodes, -1, dtype=np.intp) if clamp is None else np.asarray(clamp)
    fixed = np.tile(fixed.astype(np.intp), n_draws)
    _, position, _ = _node_positions(copies.lengths)
    for pos in range(int(p.lengths.max(initial=0))):
        nodes = np.flatnonzero((position == pos) & (fixed < 0))
        if len(nodes) == 0:
            continue
        node = solver.marginals(copies, fixed).node[nodes]
        with np.errstate(divide="ignore"):
            logits = np.log(np.clip(node, 0.0, None))
        fixed[nodes] = (logits + rng.gumbel(size=logits.shape)).argmax(axis=1)
    return fixed.reshape(n_draws, n_nodes)
