r"""The base of every structure: samples in, a validated problem out; weights in, potentials out.

A structure is the *model* half of a learner (the estimator is the optimiser). It hands an
estimator a validated :class:`Problem` in one call — :meth:`BaseStructure.fit_problem` for the
training data (labels encoded, ignored nodes dropped, the structure's dimensions fitted),
:meth:`BaseStructure.problem` for prediction — and turns a weight vector ``w`` into
:class:`~pmap_sklearn.Potentials` for its solver. The joint feature map Ψ
(:math:`f(y|x) = w \cdot \Psi (x, y)`) and the hidden states are its two mixins
(:mod:`._joint_feature`, :mod:`._hidden_states`).

Weight layout: ``w = [W.ravel(), v]`` with ``W`` of shape (n_node_features, K) (the node
features include a bias column when ``bias=True``) and ``v`` the pairwise weights: the K×K
transition scores on chains, the weights of the edge features of the Potts term
``Σ_(i,j) (v · ψ_ij) [y_i != y_j]`` on grids and graphs (kept ``<= 0`` for graph cuts, which
need attractive terms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator

from .._backend import (
    GraphKind,
    PairwiseKind,
    PairwiseTerms,
    Potentials,
    Requirements,
    check_capabilities,
    check_solver,
    forbid_states,
)
from .._labels import (
    LabelCodes,
    as_samples,
    check_markers,
    encode,
    encode_known,
    encode_with_sets,
    is_marker,
    known_sequence,
    without_ignored,
)
from .._utils import append_ones_column, stack_rows
from .._validation import as_finite_array
from ..samples import GraphSample, SampleBatch
from ._hidden_states import HiddenStates
from ._joint_feature import JointFeature

__all__ = ["BaseStructure", "Problem"]


def _finite(value, what: str, index: int) -> np.ndarray:
    return as_finite_array(value, f"sample {index}: {what}")


def _without_zero_weights(X, y, sample_weight):
    """``X``, ``y`` and ``sample_weight`` without the samples of weight 0: a fit leaves them
    out as if they were not given (arrays and sparse matrices by rows, sequences by item)."""
    keep = np.flatnonzero(sample_weight > 0)
    if len(keep) == len(sample_weight):
        return X, y, sample_weight
    if len(y) != len(sample_weight):
        raise ValueError(f"y has {len(y)} label arrays but sample_weight has {len(sample_weight)}")

    def take(values):
        if isinstance(values, np.ndarray) or sparse.issparse(values):
            return values[keep]
        return [values[i] for i in keep]

    return take(X), take(y), sample_weight[keep]


#: The most weights a model may have: 2 GiB a copy (the learners keep a few copies).
MAX_WEIGHTS = 2**28


@dataclass(frozen=True)
class Problem:
    """What a structure hands an estimator: the samples validated and stacked, their labels
    encoded.

    Attributes
    ----------
    batch : SampleBatch
        The samples' node features, edges and edge features as flat arrays with offsets.
    labels : ndarray of shape (n_nodes,) or None
        Label codes of every node: ``0..K-1`` (indices in ``classes``), ``-1`` unknown (or not
        counted), ``K`` a hidden node, ``-2 - j`` one of the labels of ``label_sets[j]``;
        None when no labels were given.
    classes : ndarray of shape (K,) or None
        The labels the codes index.
    label_sets : ndarray of shape (n_sets, K) of bool or None
        The labels each set of labels allows (None when no node has one).
    """

    batch: SampleBatch
    labels: np.ndarray | None = None
    classes: np.ndarray | None = None
    label_sets: np.ndarray | None = None

    @property
    def has_unknown(self) -> bool:
        """Whether some visible node's label is not one known label (unknown or a set)."""
        return self.labels is not None and bool(np.any(self.labels < 0))


class BaseStructure(HiddenStates, JointFeature, BaseEstimator):
    """Shared machinery of the structures.

    An estimator asks it for a :class:`Problem` once — :meth:`fit_problem` (training data) or
    :meth:`problem` (prediction) — and then for potentials, Ψ and the shape of its outputs. A
    new structure subclasses it and implements these hooks:

    - ``pairwise_kind``: the :class:`~pmap_sklearn.solvers.PairwiseKind` of the pairwise
      potentials it builds (see :class:`~pmap_sklearn.Potentials`);
    - ``graph_kind``: ``GraphKind.CHAIN`` if every sample is a chain, else ``GraphKind.ANY``;
    - ``sample_kind``: what one sample is (see the attribute);
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
    #: What one sample is: ``"chain"`` (a sequence of nodes), ``"grid"`` (an image), ``"graph"``
    #: (any graph), ``"multilabel"`` (a row of ``X`` whose nodes are its labels). The learners'
    #: ``"auto"`` settings (:mod:`pmap_sklearn._optim.defaults`) and the views of
    #: :mod:`pmap_sklearn.inspection` read it, never the structure's class.
    sample_kind = "graph"
    #: How node features make unary scores (structures that take it as a parameter override it)
    unary = "linear"
    #: K when neither ``n_states`` nor labels give it (None: an error)
    _default_n_states: int | None = None

    # ---- the seam: the validated problem an estimator works on ---------------------------------
    def fit_problem(
        self,
        X,
        y,
        *,
        unknown_label=-1,
        ignore_label=None,
        classes=None,
        sample_weight=None,
        refit=None,
    ) -> Problem:
        """Validate training data once, fit the structure and give the problem to learn.

        ``X`` and ``y`` are checked at the API boundary (:meth:`check_input`), the samples of
        weight 0 and the nodes of ``ignore_label`` dropped, the labels encoded and — unless
        ``classes`` is given — the structure's dimensions fitted (:meth:`fit`, on the samples
        kept); then the samples are stacked, with their weights.

        Parameters
        ----------
        X : sequence of samples
        y : sequence of label arrays
            One label per node, of any discrete kind.
        unknown_label : scalar or None, default=-1
            The marker of an unknown label (code ``-1``).
        ignore_label : scalar, optional
            The marker of nodes to drop from the fit (not learnt from, not filled in).
        classes : ndarray, optional
            Known classes (sorted): labels outside them are an error. Those of an earlier fit
            (a warm start, a later ``partial_fit``), or those a first ``partial_fit`` is given.
        sample_weight : ndarray of shape (n_samples,), optional
            Checked weights (:func:`~pmap_sklearn._validation.check_sample_weight`): a sample
            of weight 0 is removed as if it were not in ``X``; the others' weights are the
            batch's ``sample_weight`` (a chain cut at ignored nodes gives each run its weight;
            None when every weight is 1).
        refit : bool, optional
            Whether to fit the structure's dimensions (on these samples, with ``K`` the number
            of ``classes`` when they are given); by default only when ``classes`` is None.

        Returns
        -------
        Problem
            The batch (with the weights of its samples), the label codes of its nodes and the
            classes.

        Raises
        ------
        ValueError
            Naming the first bad sample or label and its problem.
        """
        X, y = self.check_input(X, y, ignore_label)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=float)
            X, y, sample_weight = _without_zero_weights(X, y, sample_weight)
        check_markers(y, unknown_label=unknown_label, ignore_label=ignore_label)
        if ignore_label is not None:
            if is_marker(ignore_label, unknown_label):
                raise ValueError(
                    f"ignore_label and unknown_label are both {ignore_label!r}: a node is either "
                    "ignored (removed from the fit) or unknown (filled in), not both"
                )
            X, y, origin = self._without_ignored(X, y, ignore_label)
            if sample_weight is not None and origin is not None:
                sample_weight = sample_weight[origin]
        if refit is None:
            refit = classes is None
        if classes is None:
            codes, classes, label_sets = encode_with_sets(
                y, unknown_label, n_states=self.fixed_n_states()
            )
            if len(classes) < 2:
                raise ValueError(
                    f"y holds {len(classes)} class{'es' if len(classes) != 1 else ''} "
                    f"{list(classes)}: at least two are needed"
                )
        else:
            codes, _, label_sets = encode_with_sets(y, unknown_label, classes)
        if refit:
            self._fit(X, LabelCodes(codes, len(classes)))
            self._fit_classes(classes)
        batch = self._prepare_checked(X)
        if sample_weight is not None and len(sample_weight) != batch.n_samples:
            raise ValueError(
                f"sample_weight has {len(sample_weight)} weights but X has {batch.n_samples} "
                "samples: give one weight per sample"
            )
        if sample_weight is not None and not np.all(sample_weight == 1.0):
            batch.sample_weight = sample_weight
        labels = self.prepare_labels(batch, codes, allow_unknown=True, label_sets=label_sets)
        return Problem(batch, labels, classes, label_sets)

    def problem(
        self, X, *, index=None, labels=None, known_labels=None, classes=None, markers=()
    ) -> Problem:
        """Validate samples of a fitted structure, with their labels, for a prediction.

        Parameters
        ----------
        X : sequence of samples
        index : slice, optional
            Only the samples ``X[index]`` (errors name a sample by its index in ``X``): how
            predictions take ``X`` in chunks of bounded memory.
        labels : sequence of label arrays, optional
            The labels of every node (``markers`` where a node is not counted), e.g. the
            held-out labels a temperature is fitted on.
        known_labels : sequence of label arrays, optional
            The labels known at prediction, None (or a marker) where a label is free, a set of
            labels where the node takes one of them: the clamps of constrained decoding.
        classes : ndarray, optional
            The estimator's ``classes_`` (needed with labels).
        markers : tuple, default=()
            The markers of nodes that are not counted (unknown, ignored).

        Returns
        -------
        Problem
            The batch, and the label codes (``-1`` where unknown or free) when labels were given.
        """
        batch = self.prepare(X, index)
        label_sets = None
        if labels is not None:
            codes, _ = encode(labels, markers, classes)
        elif known_labels is not None:
            known = known_sequence(known_labels, batch.n_samples)
            known = [
                self._free_labels(batch, i) if entry is None else entry
                for i, entry in enumerate(known)
            ]
            codes, label_sets = encode_known(known, classes, markers)
        else:
            return Problem(batch, None, classes)
        labels = self.prepare_labels(batch, codes, allow_unknown=True, label_sets=label_sets)
        return Problem(batch, labels, classes, label_sets)

    @staticmethod
    def _free_labels(batch: SampleBatch, i: int) -> np.ndarray:
        """The ``known_labels`` of sample ``i`` given as None: None at every node (nothing
        known), shaped like its labels."""
        hidden = 0 if batch.hidden_counts is None else int(batch.hidden_counts[i])
        shape = (int(batch.lengths[i]) - hidden,) if hidden else batch.label_shapes[i]
        return np.full(shape, None, dtype=object)

    def check_input(self, X, y, ignore_label=None):
        """``X`` and ``y`` as an estimator's ``fit`` received them, checked once at the API
        boundary before anything reads them (structures whose users give other arrays than
        sequences of samples and label arrays override it). By default, unchanged: each
        sample is validated when it is parsed.

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

    def _without_ignored(self, X, y, ignore_label):
        """``X, y`` without the ``ignore_label`` nodes, as this structure's kind of sample
        allows, and the index in ``X`` of each sample kept (None: every sample as it was)."""
        if isinstance(y, np.ndarray) and y.dtype != object:
            y = list(y)
        return without_ignored(X, y, ignore_label, self.sample_kind, return_origin=True)

    def _prepare_checked(self, X) -> SampleBatch:
        """The batch of training samples that :meth:`check_input` returned (by default
        :meth:`prepare`, which validates each sample as it parses it)."""
        return self.prepare(X)

    # ---- fitting: learn the dimensions -------------------------------------------------
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
        self._fit(self._check_samples(X), y)
        self._fit_classes(np.arange(self.n_labels_))  # the labels are their codes here
        return self

    def _fit_classes(self, classes) -> None:
        """What the fitted structure needs from the labels themselves (``classes``, in code
        order), after :meth:`_fit`: nothing by default."""

    def _check_samples(self, X):
        """``X`` checked as a whole before :meth:`_fit` reads it (by default unchanged: each
        sample is validated when it is parsed)."""
        return X

    def _fit(self, X, y):
        """:meth:`fit` on checked samples: what subclasses extend."""
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
        self._fit_dimensions(X)
        if self.unary == "scaled" and self.n_features_in_ != self.n_states_:
            raise ValueError(
                f"unary='scaled' takes one score per label as node features (K = "
                f"{self.n_states_}), got {self.n_features_in_} node features: give each node "
                "its K scores (e.g. a classifier's log-probabilities), or use unary='linear'"
            )
        check_capabilities(self.solver_, self.requirements(), type(self).__name__)
        self._check_size()
        return self

    def _fit_dimensions(self, X) -> None:
        """``n_features_in_`` and ``n_edge_features_``, from the first sample."""
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        first = self._parse_sample(X[0], 0)
        self.n_features_in_ = first.features.shape[1]
        self.n_edge_features_ = first.edge_features.shape[1]

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
        if isinstance(y, LabelCodes):  # codes of known classes, which need not all appear
            return max(y.n_classes, 2)
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

    def prepare_labels(
        self, batch: SampleBatch, y, allow_unknown: bool = False, label_sets=None
    ) -> np.ndarray:
        """Validate integer labels ``0..K-1`` against the batch.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        y : sequence of int arrays
            One label per node of each sample (label codes, not classes).
        allow_unknown : bool, default=False
            Whether ``-1`` (unknown label) is accepted, and the codes of ``label_sets``.
        label_sets : ndarray of shape (n_sets, K) of bool, optional
            The sets of labels codes ``-2, -3, ...`` stand for.

        Returns
        -------
        ndarray of shape (n_nodes,)
            The labels of all nodes of the batch, in order.
        """
        if len(y) != batch.n_samples:
            raise ValueError(f"X has {batch.n_samples} samples but y has {len(y)} label arrays")
        n_sets = 0 if label_sets is None else len(label_sets)
        low = -1 - n_sets if allow_unknown else 0
        n_labels = self.n_labels_
        hidden = (
            np.zeros(batch.n_samples, np.intp)
            if batch.hidden_counts is None
            else batch.hidden_counts
        )
        arrays = [np.asarray(yi) for yi in y]
        expected = batch.lengths - hidden
        sizes = np.fromiter((a.size for a in arrays), np.intp, len(arrays))
        whole = {a.dtype for a in arrays if a.size}
        flat = (
            np.concatenate([a.ravel() for a in arrays]).astype(np.intp, copy=False)
            if all(np.issubdtype(dtype, np.integer) for dtype in whole)
            else None
        )
        if (
            flat is None
            or np.any(sizes != expected)
            or any(
                a.ndim > 1 and a.shape != shape
                for a, shape in zip(arrays, batch.label_shapes, strict=True)
            )
            or (flat.size and (flat.min() < low or flat.max() >= n_labels))
        ):  # some sample is wrong (or its labels are floats): read them one by one
            flat = np.concatenate(
                [
                    self._sample_label_codes(i, a, expected[i], batch, low)
                    for i, a in enumerate(arrays)
                ]
            )
        if not hidden.any():
            return flat
        codes = np.full(batch.n_nodes, n_labels, dtype=np.intp)  # hidden nodes: after the labels
        codes[~batch.hidden] = flat
        return codes

    def _sample_label_codes(self, i, yi, expected, batch, low) -> np.ndarray:
        """The label codes of sample ``i`` (its visible nodes), or a ValueError naming what is
        wrong with them."""
        hidden = expected != batch.lengths[i]
        if yi.size != expected or (yi.ndim > 1 and yi.shape != batch.label_shapes[i]):
            shape = (int(expected),) if hidden else batch.label_shapes[i]
            hint = ""
            if yi.ndim == 1 and len(shape) == 2 and yi.size == shape[0]:
                # one label per row of X: a sequence read as a grid image
                hint = "; for sequences (one label per row of X) use structure='chain'"
            raise ValueError(
                f"sample {i}: y has shape {yi.shape}, expected {shape} (one label per "
                f"{'visible ' if hidden else ''}node){hint}"
            )
        if yi.size and not np.issubdtype(yi.dtype, np.integer):
            if not (np.issubdtype(yi.dtype, np.number) and np.all(yi == np.round(yi))):
                raise ValueError(f"sample {i}: labels must be integers, got dtype {yi.dtype}")
        yi = yi.ravel().astype(np.intp)
        n_labels = self.n_labels_
        if yi.size and (yi.min() < low or yi.max() >= n_labels):
            bad = yi[(yi < low) | (yi >= n_labels)][0]
            hint = "; -1 (unknown) is not accepted here" if bad == -1 else ""
            raise ValueError(f"sample {i}: label {bad} out of range {low}..{n_labels - 1}{hint}")
        return yi

    # ---- what users see: labels and marginals of the visible nodes -------------------------
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
            unary = forbid_states(
                unary, batch.hidden[:, None] != hidden_state, pairwise, len(batch.edges)
            )
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

    def node_features(self, batch: SampleBatch, nodes: np.ndarray):
        """The features the unary scores of ``nodes`` read, one row per node: what a per-node
        classifier of the labels fits (the learners' logistic start).

        Parameters
        ----------
        batch : SampleBatch
        nodes : ndarray of int
            Nodes of ``batch``.

        Returns
        -------
        ndarray or CSR matrix of shape (len(nodes), n_node_features)
        """
        return batch.features[nodes]

    def dense_node_feature_width(self) -> int | None:
        """The entries of each row of :meth:`node_features` where it builds its rows dense,
        holding more than the batch does (the learners' logistic start then keeps fewer rows);
        None where the rows are the batch's own.

        Returns
        -------
        int or None
        """
        return None

    def _layout(self, batch):
        return None
