"""The solver protocol: what every MAP / marginal oracle offers the learners.

A solver takes :class:`~pmap_sklearn._backend.potentials.Potentials` and answers

- ``map(potentials, clamp=None)``: ``argmax_y f_n(y)`` of every sample (some nodes clamped);
- ``clamped_maps(potentials, nodes, labels, weights)``: the MAP ``y*_A`` and, for each query q,
  the MAP with node ``nodes[q]`` clamped to ``labels[q]`` (``y*_B``), returned as the weighted
  sum ``Σ_q weights[q] [φ(y*_B,q) − φ(y*_A)]`` of their statistics (a :class:`ClampedSolution`:
  the learner never sees the layout of the clamped labellings);
- optionally ``marginals(potentials, clamp=None)``: exact node / pairwise marginals and ``log Z``.

A new solver is one class: :class:`Solver` implements ``clamped_maps`` from ``map`` (each
clamped problem solved from scratch, in bounded chunks); a solver with a faster way
(max-product pointers on chains, dynamic graph cuts) provides ``_incremental_clamped_maps``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from numbers import Integral

import numpy as np
from sklearn.utils import check_scalar

from .._parallel import chunks_by_size
from .._utils import ranges, user_stacklevel
from .._validation import NonFiniteError
from .capabilities import Capabilities, PairwiseKind, PairwiseTerms
from .potentials import Potentials, Statistics, add_clamped_differences, forbid_states


def check_count(value, name: str) -> int:
    """A solver parameter that counts (sweeps, cycles, hops, labellings) as an int >= 1, checked
    as scikit-learn's ``check_scalar`` does (numpy integers accepted): a TypeError for another
    type (a bool included, though Python counts it as an int), a ValueError below 1, both naming
    ``name``."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(check_scalar(value, name, Integral, min_val=1))


@dataclass
class ClampedSolution:
    """Result of :meth:`Solver.clamped_maps`.

    Parameters
    ----------
    map_labels : ndarray of shape (n_nodes,)
        ``y*_A``, the MAP labelling of every sample.
    solved : ndarray of shape (Q,) of bool
        The queries that were solved (with Gumbel reduction, those whose label differs from
        ``y*_A``; the others contribute exactly zero).
    statistics : Statistics
        ``Σ_q weights[q] [φ(y*_B,q) − φ(y*_A)]`` over the solved queries.
    """

    map_labels: np.ndarray
    solved: np.ndarray
    statistics: Statistics

    def perturbation_gap(self, perturbation: np.ndarray) -> float:
        """The perturbation part of the weighted score differences.

        Parameters
        ----------
        perturbation : ndarray of shape (n_nodes, K)
            A unary perturbation ``z`` that was included in the solved potentials.

        Returns
        -------
        float
            ``Σ_q weights[q] [z(y*_B,q) − z(y*_A)]``.
        """
        return self.statistics.dot_unary(perturbation)


@dataclass
class Marginals:
    """Result of :meth:`Solver.marginals`.

    Parameters
    ----------
    statistics : Statistics
        Expected sufficient statistics: node marginals ``P(y_d = k)`` (n_nodes, K) and pairwise
        marginals in the shape of the potentials' kind.
    log_partition : ndarray of shape (n_samples,)
        ``A_n = log Σ_y exp f_n(y)`` (over the labellings that respect the clamps).
    """

    statistics: Statistics
    log_partition: np.ndarray

    @property
    def node(self) -> np.ndarray:
        """Node marginals ``P(y_d = k)``, shape (n_nodes, K)."""
        return self.statistics.unary


#: Class attributes of the protocol before :class:`Capabilities` (translated, with a warning).
_LEGACY = ("max_states", "needs_attractive")


class Solver:
    """Base class of the solvers (the protocol is described in :ref:`solvers`).

    A solver declares these class attributes:

    - ``name`` (str): its name in ``structure(solver=name)``;
    - ``capabilities`` (:class:`~pmap_sklearn.solvers.Capabilities`): the labels, pairwise
      kinds and terms, graphs, clamps and marginals it handles. Structures and estimators
      check a model against them before any work. When a subclass leaves it out, it inherits
      its parent's, with ``marginals`` true exactly when it implements ``marginals``.
    """

    name = ""
    capabilities = Capabilities()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "capabilities" not in cls.__dict__:
            cls.capabilities = replace(
                cls.capabilities,
                marginals=cls.marginals is not Solver.marginals,
                k_best=cls.k_best is not Solver.k_best,
            )
        legacy = {name: cls.__dict__[name] for name in _LEGACY if name in cls.__dict__}
        if legacy:  # the protocol before capabilities: translate, and say so
            warnings.warn(
                f"{cls.__name__} sets {sorted(legacy)}: declare capabilities = "
                "Capabilities(max_states=..., terms=PairwiseTerms.ATTRACTIVE) instead (the "
                "class attributes will stop working in 0.3)",
                FutureWarning,
                stacklevel=user_stacklevel(),
            )
            changes = {}
            if "max_states" in legacy:
                changes["max_states"] = legacy["max_states"]
            if legacy.get("needs_attractive"):
                changes["terms"] = PairwiseTerms.ATTRACTIVE
            cls.capabilities = replace(cls.capabilities, **changes)
            for name in legacy:
                delattr(cls, name)  # the properties read the capabilities again

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def max_states(self) -> int | None:
        """The largest number of labels it solves (None: any), from ``capabilities``."""
        return self.capabilities.max_states

    @property
    def needs_attractive(self) -> bool:
        """Whether it needs attractive pairwise terms — binary submodular, or Potts weights
        ``<= 0`` for metric solvers (structures then keep their pairwise weights in that set),
        from ``capabilities``."""
        return self.capabilities.terms in (PairwiseTerms.ATTRACTIVE, PairwiseTerms.METRIC)

    @property
    def has_marginals(self) -> bool:
        """Whether it computes marginals, from ``capabilities``."""
        return self.capabilities.marginals

    # ---- checks ----------------------------------------------------------------------------
    def check_states(self, n_states: int) -> None:
        """Check that the solver handles a number of labels.

        Parameters
        ----------
        n_states : int
            K, the number of labels of the models to solve.

        Raises
        ------
        ValueError
            If models with ``n_states`` labels are beyond this solver.
        """
        if self.max_states is not None and n_states > self.max_states:
            raise ValueError(self._states_message(n_states))

    def _states_message(self, n_states: int) -> str:
        return (
            f"the {self.name} solver handles at most {self.max_states} labels, got K = {n_states}"
        )

    def _check(self, potentials: Potentials, clamp=None) -> None:
        """Checks before every call, in one vectorised pass: the argument types, the graph
        (:meth:`Potentials.check_graph`), the number of labels, finite scores and the clamp.

        Raises
        ------
        TypeError
            If ``potentials`` is not a :class:`Potentials`.
        ValueError
            Naming the argument and, for the graph, the edge and its sample.
        NonFiniteError
            If a score is NaN or infinite.
        """
        if not isinstance(potentials, Potentials):
            raise TypeError(
                f"the {self.name} solver takes Potentials, got {type(potentials).__name__}"
            )
        potentials.check_graph()
        self.check_states(potentials.n_states)
        if (
            getattr(potentials.layout, "constraints", None) is not None
            and not self.capabilities.constraints
        ):
            raise ValueError(
                f"the {self.name} solver honours no transition constraints: use a solver "
                "that does (ChainStructure(solver='viterbi')) or a model without constraints"
            )
        for name in ("unary", "pairwise"):
            values = getattr(potentials, name)
            if not values.size or np.isfinite(values).all():
                continue
            bad = ~np.isfinite(values)
            if name == "unary" and self.capabilities.infinite_scores:
                bad &= values != -np.inf  # -inf: a label of probability zero
            if bad.any():
                sample = _first_bad_sample(potentials, name, bad)
                raise NonFiniteError(
                    f"the {name} scores of sample {sample} are not finite (NaN or overflow): "
                    "scale the features (e.g. with NodeTransformer(StandardScaler())) or "
                    "regularise more"
                )
        if clamp is not None:
            check_labels(clamp, potentials, "clamp", free=True)

    # ---- the protocol --------------------------------------------------------------------
    def map(self, potentials: Potentials, clamp=None, n_jobs=None) -> np.ndarray:
        """MAP labelling of every sample.

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int, optional
            Processes for solvers that work sample by sample.

        Returns
        -------
        labels : ndarray of shape (n_nodes,)
        """
        raise NotImplementedError

    def perturbed_rounds(self, potentials: Potentials, perturbations, clamp=None) -> np.ndarray:
        """MAP labellings of ``potentials`` with each perturbation of a block of rounds added
        to the unary scores (the rounds of perturb-and-MAP marginals and samples).

        Solvers that can reuse work across rounds (a graph whose edges do not change)
        override it; the labellings are those of :meth:`map` of each perturbed model.

        Parameters
        ----------
        potentials : Potentials
        perturbations : ndarray of shape (R, n_nodes, K)
        clamp : ndarray of shape (n_nodes,), optional

        Returns
        -------
        labels : ndarray of shape (R, n_nodes)
        """
        labels = np.empty(perturbations.shape[:2], dtype=np.intp)
        for round_, perturbation in enumerate(perturbations):
            labels[round_] = self.map(potentials.add_unary(perturbation), clamp)
        return labels

    def clamped_maps(
        self,
        potentials: Potentials,
        nodes,
        labels,
        weights,
        *,
        skip_agreeing: bool = False,
        dynamic: bool = True,
        n_jobs=None,
        sets=None,
    ) -> ClampedSolution:
        """MAP labelling and weighted single-node clamped maximisers.

        Parameters
        ----------
        potentials : Potentials
        nodes : ndarray of shape (Q,)
            Global node of each query, in increasing order.
        labels : ndarray of shape (Q,)
            The label each query clamps its node to; with ``sets``, the set (a row of
            ``sets``) its node is restricted to.
        weights : ndarray of shape (Q,)
            Weight of each query in the returned statistics.
        skip_agreeing : bool, default=False
            Gumbel reduction: do not solve the queries whose label (set) holds the MAP's label
            at their node (their maximiser is ``y*_A`` itself: zero contribution).
        dynamic : bool, default=True
            Use the solver's incremental path if it has one (False: solve every clamped problem
            from scratch; both give the same maximisers).
        n_jobs : int, optional
        sets : ndarray of shape (n_sets, K) of bool, optional
            Set-valued clamps: query q restricts its node to the labels ``sets[labels[q]]``
            (the states of a visible label, with hidden states). Its maximiser is the best
            labelling with the node in the set, the node's own scores included, so the
            perturbation of a clamped node counts where a single-label clamp leaves it out
            (the perturb-and-MAP estimate of ``log Σ_{k ∈ S} P(y_d = k)``).

        Returns
        -------
        ClampedSolution
        """
        self._check(potentials)
        nodes, labels, weights = check_queries(potentials, nodes, labels, weights, sets)
        if sets is not None:
            sets = np.asarray(sets, dtype=bool)
            if (sets.sum(axis=1)[labels] == 1).all():  # single labels after all
                labels, sets = sets.argmax(axis=1)[labels], None
        if dynamic and self._incremental_clamped_maps is not None:
            if sets is None:
                return self._incremental_clamped_maps(
                    potentials, nodes, labels, weights, skip_agreeing, n_jobs
                )
            if self._incremental_sets:
                return self._incremental_clamped_maps(
                    potentials, nodes, labels, weights, skip_agreeing, n_jobs, sets=sets
                )
        return self._copied_clamped_maps(
            potentials, nodes, labels, weights, skip_agreeing, n_jobs, sets
        )

    def _copied_clamped_maps(
        self, potentials, nodes, labels, weights, skip_agreeing, n_jobs, sets=None
    ):
        """Every clamped problem solved on its own copy of its sample, in bounded chunks (from
        the MAP when the solver takes a warm start); a set-valued clamp forbids the other
        labels of its node (:func:`forbid_states`)."""
        map_labels = self.map(potentials, n_jobs=n_jobs)
        solved = solved_queries(map_labels, nodes, labels, skip_agreeing, sets)
        nodes, labels, weights = nodes[solved], labels[solved], weights[solved]
        statistics = Statistics.zeros(potentials)
        copies = potentials.node_sample[nodes]
        for chunk in chunks_by_size(potentials.lengths[copies]):
            replicated = potentials.take(copies[chunk])
            local = nodes[chunk] - potentials.node_offsets[copies[chunk]]
            clamped = replicated.node_offsets[:-1] + local
            if sets is None:
                clamp = np.full(replicated.n_nodes, -1)
                clamp[clamped] = labels[chunk]
            else:
                clamp, forbidden = None, np.zeros(replicated.unary.shape, dtype=bool)
                forbidden[clamped] = ~sets[labels[chunk]]
                unary = forbid_states(
                    replicated.unary, forbidden, replicated.pairwise, replicated.n_edges
                )
                replicated = replace(replicated, unary=unary)
            start = {}
            if self.capabilities.warm_start:  # each clamped copy starts from the MAP
                start["init"] = map_labels[ranges(potentials.node_offsets, copies[chunk])]
            labellings = self.map(replicated, clamp, n_jobs=n_jobs, **start)
            add_clamped_differences(
                statistics, potentials, map_labels, copies[chunk], labellings, weights[chunk]
            )
        return ClampedSolution(map_labels, solved, statistics)

    #: ``(potentials, nodes, labels, weights, skip_agreeing, n_jobs) -> ClampedSolution`` on
    #: checked queries: a solver's incremental path for ``dynamic=True`` (None: from scratch).
    _incremental_clamped_maps = None
    #: Whether the incremental path also takes set-valued clamps (``sets=`` keyword).
    _incremental_sets = False

    def marginals(self, potentials: Potentials, clamp=None) -> Marginals:
        """Exact marginals and log-partition of every sample (solvers that can).

        Parameters
        ----------
        potentials : Potentials
            The models.
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        Marginals
            Expected sufficient statistics and the log-partition function of every sample.

        Raises
        ------
        ValueError
            If the solver computes no marginals (graph cuts).
        """
        raise ValueError(
            f"the {self.name} solver computes no marginals: use a solver with exact marginals "
            "(forward-backward on chains, brute force on tiny models) or perturb-and-MAP "
            "estimates"
        )

    def k_best(self, potentials: Potentials, k: int, clamp=None):
        """The ``k`` most probable labellings of every sample, exactly (solvers with the
        ``k_best`` capability).

        Parameters
        ----------
        potentials : Potentials
        k : int
            Labellings per sample (>= 1).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        labels : ndarray of shape (k, n_nodes)
            Row r: the labelling of rank r of every sample (the MAP first).
        log_probabilities : ndarray of shape (n_samples, k)
            Non-increasing along a row; ``-inf`` where a sample has fewer than r + 1
            labellings of positive probability.

        Raises
        ------
        ValueError
            If the solver lists no k-best labellings (all but list Viterbi on chains and
            enumeration on tiny models).
        """
        raise ValueError(
            f"the {self.name} solver lists no k-best labellings: use a solver that does "
            "(ChainStructure(solver='viterbi'), solver='brute_force' on tiny models) or the "
            "frequencies of perturbed MAPs"
        )


class ExactEvents:
    """Mixin of the solvers whose log-partition function is exact (forward-backward on chains,
    sum-product on forests, enumeration): the exact probability of events "these nodes take
    these labels", from the same queries as the marginals."""

    def event_log_probabilities(self, potentials: Potentials, nodes, labels, events) -> np.ndarray:
        """Exact log-probabilities that sets of nodes take given labels.

        Event q holds when every node ``nodes[i]`` with ``events[i] == q`` takes ``labels[i]``:
        :math:`\\log P(y_A = l_A) = \\log Z(y_A = l_A) - \\log Z`, the log-partition of the
        event's sample with the nodes A clamped minus that of the sample. An event that fixes
        every node of its sample is a whole labelling, :math:`f(l) - \\log Z` (its score, no
        clamped copy); the others are solved on clamped copies of their samples, in bounded
        chunks.

        Parameters
        ----------
        potentials : Potentials
        nodes : array-like of shape (M,)
            Global nodes, each at most once per event.
        labels : array-like of shape (M,)
            The label each of them must take.
        events : array-like of shape (M,)
            The event of each node, ``0..Q-1``: every event has nodes, all in one sample.

        Returns
        -------
        ndarray of shape (Q,)
            ``log P`` of every event (``-inf`` for an event the model forbids).

        Raises
        ------
        ValueError
            For nodes, labels or events out of range, an event without nodes or across
            samples, or a node twice in one event.
        """
        self._check(potentials)
        p = potentials
        labels = np.asarray(labels, dtype=np.intp).ravel()
        order, starts, sample, event_sample = self._events(p, nodes, events, len(labels))
        if not len(order):
            return np.zeros(0)
        nodes, labels = np.asarray(nodes, dtype=np.intp).ravel()[order], labels[order]
        if labels.min() < 0 or labels.max() >= p.n_states:
            raise ValueError(f"event labels must lie in 0..{p.n_states - 1}")
        log_z = self._exact_log_partition(p)[event_sample]
        out = np.empty(len(starts) - 1)
        whole = np.diff(starts) == p.lengths[event_sample]
        if whole.any():  # whole labellings: their score, on a copy of each one's sample
            ids = np.flatnonzero(whole)
            out[ids] = p.take(event_sample[ids]).score(labels[ranges(starts, ids)])
        part = np.flatnonzero(~whole)
        for ids, copies, members, at in _event_copies(p, part, starts, sample, event_sample, nodes):
            clamp = np.full(copies.n_nodes, -1, dtype=np.intp)
            clamp[at] = labels[members]
            out[ids] = self._exact_log_partition(copies, clamp)
        return out - log_z

    def set_event_log_probabilities(
        self, potentials: Potentials, nodes, allowed, events
    ) -> np.ndarray:
        """Exact log-probabilities that sets of nodes take states within given sets.

        Event q holds when every node ``nodes[i]`` with ``events[i] == q`` takes one of the
        states ``allowed[i]``: :math:`\\log P(y_A \\in S_A) = \\log Z(y_A \\in S_A) - \\log Z`,
        the log-partition of the event's sample with the states outside each node's set
        forbidden, minus that of the sample. A visible label split into hidden states is
        such a set (the states of the label): the probability of a labelling is then
        :math:`\\sum_h \\exp f(h) / Z` over the state sequences ``h`` that show it, summed by
        the solver's own recursion (forward-backward restricted to the label's states on
        chains, as for hidden Markov models; Rabiner 1989), never by draws. Events are solved
        on restricted copies of their samples, in bounded chunks.

        Parameters
        ----------
        potentials : Potentials
        nodes : array-like of shape (M,)
            Global nodes, each at most once per event.
        allowed : array-like of shape (M, n_states) of bool
            The states each of them may take.
        events : array-like of shape (M,)
            The event of each node, ``0..Q-1``: every event has nodes, all in one sample.

        Returns
        -------
        ndarray of shape (Q,)
            ``log P`` of every event (``-inf`` for an event the model forbids).

        Raises
        ------
        ValueError
            For nodes or events out of range, ``allowed`` of the wrong shape, an event
            without nodes or across samples, or a node twice in one event.
        """
        self._check(potentials)
        p = potentials
        allowed = np.asarray(allowed, dtype=bool)
        if allowed.ndim != 2 or allowed.shape[1] != p.n_states:
            raise ValueError(
                f"allowed must be a bool array of shape (n_event_nodes, {p.n_states}) (the "
                f"states each node may take), got shape {allowed.shape}"
            )
        order, starts, sample, event_sample = self._events(p, nodes, events, len(allowed))
        if not len(order):
            return np.zeros(0)
        nodes, allowed = np.asarray(nodes, dtype=np.intp).ravel()[order], allowed[order]
        log_z = self._exact_log_partition(p)[event_sample]
        out = np.full(len(starts) - 1, -np.inf)  # a node with no state allowed: impossible
        empty = np.repeat(np.arange(len(out)), np.diff(starts))[~allowed.any(axis=1)]
        events = np.setdiff1d(np.arange(len(out)), empty)
        for ids, copies, members, at in _event_copies(
            p, events, starts, sample, event_sample, nodes
        ):
            forbidden = np.zeros(copies.unary.shape, dtype=bool)
            forbidden[at] = ~allowed[members]
            if self.capabilities.infinite_scores:
                unary = np.where(forbidden, -np.inf, copies.unary)
            else:  # scores below every labelling within the sets: a probability of 0.0
                unary = forbid_states(copies.unary, forbidden, copies.pairwise, copies.n_edges)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[ids] = self._exact_log_partition(replace(copies, unary=unary))
        return out - log_z

    @staticmethod
    def _events(p: Potentials, nodes, events, n_entries: int):
        """The entries of events checked and ordered by event then node: the order, the first
        entry of each event (and one past the last), each entry's sample and each event's."""
        nodes, events = (np.asarray(a, dtype=np.intp).ravel() for a in (nodes, events))
        if not len(nodes) == n_entries == len(events):
            raise ValueError("nodes, labels (or allowed) and events must have the same length")
        if not len(nodes):
            return np.zeros(0, np.intp), np.zeros(1, np.intp), nodes, nodes
        if nodes.min() < 0 or nodes.max() >= p.n_nodes:
            raise ValueError(f"event nodes must lie in 0..{p.n_nodes - 1}")
        n_events = int(events.max()) + 1
        if events.min() < 0 or not np.bincount(events, minlength=n_events).all():
            raise ValueError(f"events must number 0..{n_events - 1}, each with at least one node")
        if len(np.unique(events * p.n_nodes + nodes)) != len(nodes):
            raise ValueError("a node appears twice in one event")
        order = np.lexsort((nodes, events))  # by event, then node
        nodes, events = nodes[order], events[order]
        starts = np.searchsorted(events, np.arange(n_events + 1))
        sample = p.node_sample[nodes]
        event_sample = sample[starts[:-1]]
        if np.any(sample != event_sample[events]):
            bad = int(events[np.flatnonzero(sample != event_sample[events])[0]])
            raise ValueError(f"event {bad} has nodes in two samples: an event lies in one")
        return order, starts, sample, event_sample

    def _exact_log_partition(self, potentials: Potentials, clamp=None) -> np.ndarray:
        """``log Z`` of every sample: the solver's own ``log_partition`` where it has one
        (enumeration, cheaper than its marginals), else that of its marginals."""
        own = getattr(self, "log_partition", None)
        if own is not None:
            return own(potentials, clamp)
        return self.marginals(potentials, clamp).log_partition


def _first_bad_sample(potentials: Potentials, name: str, bad: np.ndarray) -> int:
    """The first sample with a ``bad`` entry (a mask shaped like its ``name`` scores)."""
    if name == "unary":
        return int(potentials.node_sample[np.flatnonzero(bad.any(axis=1))[0]])
    if potentials.pairwise_kind is PairwiseKind.SHARED:
        return 0
    rows = bad.reshape(len(bad), -1).any(axis=1)
    return int(potentials.edge_sample[np.flatnonzero(rows)[0]])


def check_labels(labels, potentials: Potentials, name: str, free: bool) -> np.ndarray:
    """A labelling of every node (a ``clamp`` with ``free=True``: ``-1`` marks a free node;
    an ``init`` without), or a ValueError naming ``name`` and what is wrong.

    Parameters
    ----------
    labels : array-like of shape (n_nodes,)
    potentials : Potentials
    name : str
        The argument, for the messages.
    free : bool
        Whether ``-1`` (a free node) is allowed.

    Returns
    -------
    ndarray of shape (n_nodes,) of int
    """
    labels = np.asarray(labels)
    low = -1 if free else 0
    if labels.shape != (potentials.n_nodes,) or (labels.size and labels.dtype.kind not in "iu"):
        raise ValueError(
            f"{name} must be an int array of shape ({potentials.n_nodes},) (a label per node"
            + (", -1 for a free node" if free else "")
            + f"), got {labels.dtype} of shape {labels.shape}"
        )
    if labels.size and (labels.min() < low or labels.max() >= potentials.n_states):
        bad = int(np.flatnonzero((labels < low) | (labels >= potentials.n_states))[0])
        raise ValueError(
            f"{name} labels must lie in {low}..{potentials.n_states - 1}"
            + (" (-1: free)" if free else "")
            + f"; node {bad} has {int(labels[bad])}"
        )
    return labels.astype(np.intp, copy=False)


def check_queries(potentials: Potentials, nodes, labels, weights, sets=None):
    nodes = np.asarray(nodes, dtype=np.intp)
    labels = np.asarray(labels, dtype=np.intp)
    weights = np.asarray(weights, dtype=float)
    if not (nodes.shape == labels.shape == weights.shape) or nodes.ndim != 1:
        raise ValueError("nodes, labels and weights of the clamp queries must be 1-D, same length")
    if not np.isfinite(weights).all():
        raise ValueError("the weights of the clamp queries must be finite (NaN or inf given)")
    if len(nodes):
        if np.any(np.diff(nodes) < 0):
            raise ValueError("clamped_maps needs the query nodes in increasing order")
        if nodes[0] < 0 or nodes[-1] >= potentials.n_nodes:
            raise ValueError(f"query nodes must lie in 0..{potentials.n_nodes - 1}")
        n_choices = potentials.n_states if sets is None else len(sets)
        if labels.min() < 0 or labels.max() >= n_choices:
            what = "labels" if sets is None else "sets"
            raise ValueError(f"query {what} must lie in 0..{n_choices - 1}")
    if sets is not None:
        sets = np.asarray(sets)
        if sets.ndim != 2 or sets.shape[1] != potentials.n_states or sets.dtype != bool:
            raise ValueError(
                f"sets must be a bool array of shape (n_sets, {potentials.n_states}), got "
                f"{sets.dtype} of shape {sets.shape}"
            )
        if not sets.any(axis=1).all():
            raise ValueError("every set of a set-valued clamp must allow at least one label")
    return nodes, labels, weights


def solved_queries(map_labels, nodes, labels, skip_agreeing: bool, sets=None) -> np.ndarray:
    """The queries to solve: all, or with Gumbel reduction those that disagree with the MAP
    (whose set, with ``sets``, does not hold the MAP's label)."""
    if not skip_agreeing:
        return np.ones(len(nodes), dtype=bool)
    if sets is None:
        return map_labels[nodes] != labels
    return ~sets[labels, map_labels[nodes]]


def weighted_marginals(solver: Solver, potentials: Potentials, sample_weight, clamp=None):
    """``solver.marginals(potentials, clamp)`` with each sample's expected statistics weighted
    by its ``sample_weight`` ``c_n``: node marginals and per-edge pairwise marginals times
    their sample's weight, and the shared K×K table's expected transition counts summed as
    :math:`\\sum_n c_n E_n[\\cdot]` — the gradient of :math:`\\sum_n c_n A_n`. The
    log-partitions stay per sample, unweighted (``c @ log_partition`` is the weighted sum).

    A shared table's statistics come summed over the samples, so its weighting is the
    solver's: a solver with ``weighted_marginals`` (the chain solver) weighs them in its own
    passes; any other is called once per distinct weight.

    Parameters
    ----------
    solver : Solver
        A solver with marginals.
    potentials : Potentials
    sample_weight : ndarray of shape (n_samples,) or None
        None: ``solver.marginals`` itself.
    clamp : ndarray of shape (n_nodes,), optional

    Returns
    -------
    Marginals
    """
    if sample_weight is None:
        return solver.marginals(potentials, clamp)
    weights = np.asarray(sample_weight, dtype=float)
    if potentials.pairwise_kind is not PairwiseKind.SHARED:
        marginals = solver.marginals(potentials, clamp)
        statistics = marginals.statistics
        rows = slice(None) if statistics.rows is None else statistics.rows
        node = statistics.unary * weights[potentials.node_sample][rows][:, None]
        per_edge = weights[potentials.edge_sample]  # (E,) Potts, (E, K, K) tables
        pairwise = statistics.pairwise * per_edge.reshape(
            (-1,) + (1,) * (statistics.pairwise.ndim - 1)
        )
        return Marginals(Statistics(node, pairwise, statistics.rows), marginals.log_partition)
    own = getattr(solver, "weighted_marginals", None)
    if own is not None:
        return own(potentials, weights, clamp)
    node = np.zeros(potentials.unary.shape)
    pairwise = np.zeros(np.shape(potentials.pairwise))
    log_partition = np.zeros(potentials.n_samples)
    values, groups = np.unique(weights, return_inverse=True)
    for value, group in zip(values, range(len(values)), strict=True):
        samples = np.flatnonzero(groups == group)
        nodes = ranges(potentials.node_offsets, samples)
        part = solver.marginals(potentials.take(samples), None if clamp is None else clamp[nodes])
        node[nodes] = value * part.statistics.unary
        pairwise += value * part.statistics.pairwise
        log_partition[samples] = part.log_partition
    return Marginals(Statistics(node, pairwise), log_partition)


def _event_copies(p: Potentials, events, starts, sample, event_sample, nodes):
    """The events ``events`` on copies of their samples, in bounded chunks: for each chunk,
    the events' ids, the copies (one per event), the entries of these events (event by
    event) and the nodes of those entries in the copies."""
    for chunk in chunks_by_size(p.lengths[event_sample[events]]):
        ids = events[chunk]
        copies = p.take(event_sample[ids])
        members = ranges(starts, ids)
        copy = np.repeat(np.arange(len(ids)), np.diff(starts)[ids])
        local = nodes[members] - p.node_offsets[sample[members]]
        yield ids, copies, members, copies.node_offsets[copy] + local
