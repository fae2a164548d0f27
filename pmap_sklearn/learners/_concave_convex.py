"""The concave-convex procedure of the latent structured SVM (Yu & Joachims 2009), a mixin of
:class:`~pmap_sklearn.StructuredSVM`: impute the hidden states, solve the convex structured SVM
on them far enough that its objective falls below the previous round's, and stop, keeping the
best weights, when a round no longer lowers the latent objective."""

from __future__ import annotations

import copy
from dataclasses import fields

import numpy as np

from .._optim import sgd as _sgd
from .._utils import SparseVector

#: Budgets of ``max_iter`` passes a round may take, at most, to bring its convex objective
#: below the previous round's latent objective (its value at the round's start).
ROUND_BUDGETS = 4


class ConcaveConvex:
    """The latent structured SVM's outer loop (a mixin of ``StructuredSVM``)."""

    def _concave_convex(self, batch, targets, state, rng, max_iter: int) -> None:
        r"""The latent structured SVM by the concave-convex procedure (Yu & Joachims 2009).

        Each round imputes the hidden states, :math:`h_n = \arg\max_h f(y_n, h | x_n)` (the
        MAP restricted to the states of each node's label), and minimises the convex upper
        bound :math:`C_t(w) = (\alpha/2)\|w\|^2 + (1/N) \sum_n \max_{y, h} [\Delta + f(y, h)]
        - f(y_n, h_n)` of the latent objective :math:`P(w)`, which it touches at the weights
        :math:`w_{t-1}` the states were imputed from: so :math:`P(w_t) \le C_t(w_t) \le
        P(w_{t-1})` once the round's solve brings :math:`C_t` below its value at the start.
        A round solves from the previous dual (BCFW's blocks carry over for the samples whose
        imputation did not change, :meth:`_carry_dual`) for ``max_iter`` passes, and for up to
        :data:`ROUND_BUDGETS` times that while :math:`C_t(w_t) > P(w_{t-1})` and its duality
        gap is above ``tol``. The procedure stops when the latent objective falls by less than
        ``tol``, or at ``latent_iter`` rounds; a round that raises it is undone (the fit keeps
        the weights, and the dual, of the best round) and ends the procedure, so
        ``latent_objectives_`` never rises. The first round runs from each start the
        structure offers (``initial_state_candidates``: k-means within each label; on chains
        also each run of a label segmented among its states) and keeps the start of lowest
        latent objective, as CCCP's restarts are chosen; a warm start re-imputes from the
        fitted weights.
        """
        codes, theta = targets
        structure = self.structure_
        allowed = structure.allowed_states(codes)
        imputed = getattr(state, "imputed", None)
        objectives = []

        def one_round(states, start):
            """Solve the round imputed as ``states``; its latent objective and next states."""
            self._carry_dual(batch, state, getattr(state, "imputed", None), states)
            state.imputed = states
            for _ in range(ROUND_BUDGETS):
                self._solve(batch, (states, theta, allowed), state, rng, max_iter)
                convex = self._objective(batch, state.estimate, states, theta, allowed)
                gaps = getattr(state, "gaps", None)  # BCFW's; the subgradient method has none
                if convex <= start or (gaps and gaps[-1] < self.tol):
                    break
            return self._latent_objective(batch, state.estimate, codes, theta, allowed)

        rounds = self.latent_iter
        if imputed is None or len(imputed) != batch.n_nodes:
            # the first round from each start the structure offers; the lowest objective wins
            state.imputed = None
            fresh, tried = _snapshot(state), []
            for start_states in structure.initial_state_candidates(batch, codes, rng):
                _restore(state, fresh)
                objective, states = one_round(start_states, np.inf)
                tried.append((objective, states, _snapshot(state)))
            objective, states, kept = min(tried, key=lambda t: t[0])
            _restore(state, kept)
            objectives.append(objective)
            rounds -= 1
        else:  # a warm start: from the fitted weights, whose latent objective is the start
            first, states = self._latent_objective(batch, state.estimate, codes, theta, allowed)
            objectives.append(first)
        best = _snapshot(state)
        for _ in range(rounds):
            if len(objectives) > 1 and objectives[-2] - objectives[-1] < self.tol:
                break
            objective, next_states = one_round(states, objectives[-1])
            if objective > objectives[-1]:  # undo the round, keep the best
                _restore(state, best)
                break
            objectives.append(objective)
            states, best = next_states, _snapshot(state)
        self.latent_objectives_ = objectives

    def _objective(self, batch, w, states, theta, allowed) -> float:
        r"""The structured SVM objective :math:`(\alpha/2)\|w\|^2 + (1/N) \sum_n H_n(w)` with
        the states ``states`` as each sample's truth (the round's convex problem)."""
        minus_hinge = self._hinge_oracle(batch, states, theta, allowed)(slice(None), w, None)[1]
        return float(0.5 * self.alpha_ * (w @ w) - minus_hinge / batch.n_samples)

    def _latent_objective(self, batch, w, codes, theta, allowed):
        r"""The latent objective :math:`P(w) = (\alpha/2)\|w\|^2 + (1/N) \sum_n \max_{y,h}
        [\Delta + f(y, h)] - \max_h f(y_n, h)` and the states :math:`\arg\max_h f(y_n, h)`
        it imputes."""
        states = self._map(batch, w, clamp=codes)
        return self._objective(batch, w, states, theta, allowed), states

    def _carry_dual(self, batch, state, old, new) -> None:
        """Carry the optimiser's state over to a new imputation: BCFW keeps the blocks of the
        samples whose states did not change (their corners did not move) and restarts the
        others at their new zero corner (all the mass on ``y = h^{new}``, loss 0), so the dual
        stays feasible; the averages of the iterates restart. (Keeping every block's mass and
        moving its corner to the new states is feasible too, but moves ``w`` by
        :math:`\\Psi(h^{new}) - \\Psi(h^{old})` over :math:`\\alpha N`, far from both rounds'
        optima when :math:`\\alpha` is small.)"""
        if isinstance(state, _sgd.SGDState):
            state.average, state.n_averaged = None, 0
            return
        if old is None or state.blocks is None or len(state.blocks) != batch.n_samples:
            return  # a new dual: nothing to carry
        changed = np.flatnonzero(
            np.bincount(batch.node_sample, old != new, minlength=batch.n_samples) > 0
        )
        for i in changed:
            block = state.blocks[i]
            if isinstance(block, SparseVector):
                state.coef.reshape(-1, block.values.shape[1])[block.index] -= block.values
                state.blocks[i] = None
            elif block is not None:
                state.coef -= block
                block[:] = 0.0
        state.block_losses[changed] = 0.0
        if state.atoms is not None:
            for i in changed:
                state.atoms[i] = None
        if state.average is not None:  # the average restarts at the next step
            state.average, state.n_steps = np.zeros_like(state.average), 0


def _snapshot(state) -> dict:
    """A copy of the optimiser's state (all but its random stream) and of its imputation."""
    kept = {f.name: copy.deepcopy(getattr(state, f.name)) for f in fields(state) if f.name != "rng"}
    kept["imputed"] = getattr(state, "imputed", None)
    return kept


def _restore(state, snapshot: dict) -> None:
    """Put back a :func:`_snapshot` of ``state``."""
    for name, value in snapshot.items():
        setattr(state, name, value)
