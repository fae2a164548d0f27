"""PerturbMAPCRF: perturb-and-MAP likelihood learned by double SGD (Shpakova et al. 2018,
Alg. 1; Hazan & Jaakkola 2012)."""

from __future__ import annotations

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._docstrings import shared_docstring
from .._optim.sgd import dot, lazy_when_sparse
from .._utils import store_parameters
from ..perturbation import draw
from ._sgd_learner import ClassWeightedSGD


@shared_docstring
class PerturbMAPCRF(ClassWeightedSGD):
    r"""CRF trained on the perturb-and-MAP likelihood (Hazan & Jaakkola 2012).

    Maximises :math:`\frac1N \sum_n [f(y_n|x_n) - A_G(x_n)] - \frac{\alpha}{2}\|w\|^2`, where
    :math:`A_G(x) = \mathbb{E}_z \max_y [f(y|x) + \sum_d z_d(y_d)]` (zero-mean Gumbel
    :math:`z`) upper-bounds the log-partition function and only needs MAP calls. Each SGD
    step draws a mini-batch, one fresh perturbation per sample, solves the perturbed MAP
    :math:`y^*` and moves
    :math:`w \leftarrow w + \eta\,(\operatorname{mean}(\Psi(x, y) - \Psi(x, y^*)) - \alpha w)`,
    then projects the cut weights to :math:`\le 0`.

    With hidden states (the structure's ``n_states_per_label`` or hidden nodes) the likelihood
    of the visible labels sums over the states, :math:`\log \sum_h \exp f(y, h|x) - A(x)`,
    and its perturb-and-MAP estimate replaces :math:`\Psi(x, y)` by :math:`\Psi(x, y^*_y)`, the
    perturbed MAP restricted to the states of the true labels under the same perturbation (an
    unknown label allows the states of every label).

    Unknown labels (``-1``, e.g. inside a bounding box) are handled by self-training, the
    paper's baseline for weak labels: the model ``w_1`` fitted on the fully labelled samples
    fills them in with its MAP labelling given the known labels, and fitting continues from
    ``w_1`` on all samples (see :class:`~pmap_sklearn.MarginalPerturbMAPCRF` for the marginal
    treatment).

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
        Graph structure of the samples (see :mod:`pmap_sklearn.structures`).
    class_weight : None, "balanced" or dict, default=None
        Weights of the labels, for rare classes: in the stochastic gradient
        :math:`\Psi(x, y) - \Psi(x, y^*)` each node's unary statistics are weighted by its true
        label's weight and each edge's by the mean of its two nodes' — without pairwise terms
        exactly the gradient of class-weighted logistic regression (the Gumbel-max trick) —
        and the logistic start weights each node so. ``"balanced"``:
        ``n_nodes / (K · n_nodes_k)`` over the known training labels, as scikit-learn
        balances classes; a dict ``{label: weight}`` (1 for labels it leaves out).
    alpha : float or "auto", default="auto"
        L2 regularisation strength (the papers' λ). "auto": ``0.2 / n_samples`` with sparse
        node features (crfsuite's ``c2 = 0.1`` on the summed likelihood: the prior on a rare
        word's weights does not grow with the corpus), 0.1 on multi-label data
        (:class:`~pmap_sklearn.MultiLabelStructure`: chosen by cross-validation on the training
        splits of yeast and scene), 1e-4 otherwise.
    l1_ratio : float in [0, 1], default=0.0
        The elastic-net mixing of the penalty, as in scikit-learn's ``SGDClassifier``: the
        objective loses :math:`\alpha (\rho \|w\|_1 + (1 - \rho) \|w\|^2 / 2)` with
        :math:`\rho` = ``l1_ratio`` (0: the L2 penalty alone, the fit of earlier versions bit
        for bit). The L1 part sets weights to exactly zero, for sparse models: it is taken by
        the cumulative penalty of Tsuruoka et al. (2009), which keeps at zero the weights
        that only the noise of the stochastic gradients pushes away from it, with every
        ``learning_rate`` and with the lazy sparse steps; with ``average``, ``coef_`` is the
        average of the iterates on the weights the last iterate keeps (an average is
        non-zero wherever one iterate was). crfsuite's ``c1`` / ``c2`` are
        :func:`~pmap_sklearn.crfsuite_penalty`; the settings that keep the dense model's
        accuracy with far fewer weights are measured in "Sparse models: L1" of the user
        guide.
    max_iter : int or "auto", default="auto"
        Maximum number of epochs. ``"auto"``: 8 with sparse node features (a fixed budget,
        see ``average``), 30 without a stopping rule on ``GraphStructure`` graphs with more
        than two labels, 50 otherwise.
    batch_size : int or "auto", default="auto"
        Samples per SGD step; ``"auto"``: ``min(16, max(2, n_samples // 5))``, about 5
        steps per epoch (with 10 training images a batch of 16 would make one step per
        epoch, and the weights get nowhere: see :ref:`perturb-and-map-grids`); 32 instead of
        16 with sparse node features.
    learning_rate : {"auto", "optimal", "constant", "invscaling", "adagrad"}, default="auto"
        ``"optimal"``: :math:`\eta_t = 1 / (\alpha (t + t0))` with :math:`t0 = 1/(\alpha \eta_0)`
        (the paper's 1/(λh) schedule, started at η0); ``"constant"``: η0; ``"invscaling"``: ``η0 /
        (t+1)^power_t``; ``"adagrad"``: AdaGrad (Duchi et al. 2011), :math:`\eta_0 / \sqrt{\sum_s
        g_s^2}` for the K weights of each node feature, the sum over the feature's past gradients,
        and the L2 penalty by its proximal step — large steps for rare features, small for frequent
        ones. ``"auto"``: ``"adagrad"`` with sparse node features (token features of words, see
        "Sequence labelling" in the user guide) and on ``GraphStructure`` graphs with more
        than two labels (superpixels: see "Scene segmentation"), ``"optimal"`` otherwise.
    eta0 : float or "auto", default="auto"
        Initial step size. ``"auto"`` calibrates it on a subsample of up to 256 samples before
        the first epoch (Bottou's trick: the step size whose one-epoch objective is best,
        searched on a log scale from the smaller of 0.1 and Polyak's step), so the default
        adapts to the scale of the features. The search spends at most one epoch's oracle work
        (a tenth of ``max_iter`` epochs for a fixed budget, if more): on large samples (images)
        the subsample shrinks, keeping a mini-batch and 3,000 nodes. With sparse node features
        each candidate's epoch runs over up to 1,024 samples and is judged on up to 512 others
        (judged on its own samples, a large step wins by memorising their rare words); the
        search starts at 0.4 and keeps it on corpora too small for three such epochs.
    power_t : float, default=0.5
        Exponent of the ``"invscaling"`` schedule.
    average : bool, int or "auto", default="auto"
        Average the SGD iterates (from the start, or after that many samples). ``"auto"``:
        with sparse node features and no stopping rule, the iterates of the second half of the
        ``max_iter`` epochs (tail averaging: it drops the poor early iterates, see "Sequence
        labelling" in the user guide); from the start otherwise.
    tol : float, None or "auto", default="auto"
        Stop when the epoch objective (or validation score) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs; None runs ``max_iter`` epochs. ``"auto"``: 1e-3 with
        ``early_stopping``; otherwise None with sparse node features (the fixed budget of
        tail averaging) and on ``GraphStructure`` graphs with more than two labels, 1e-3
        on other dense ones.
    n_iter_no_change : int, default=5
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the samples and stop on their score (1 − Hamming).
    validation_fraction : float, default=0.1
    warm_start : bool, default=False
        Continue the previous fit (weights, schedule position and average, random stream) on the
        same data (``X`` and ``y``) and parameters (on new data: :meth:`partial_fit`), when the
        previous fit was made with ``warm_start=True``; after a change of the data or of
        ``structure``, ``alpha``, ``l1_ratio``, ``class_weight``, ``unknown_label`` or
        ``ignore_label``, a warm start fits afresh (as ``warm_start=False`` does): the state
        belongs to the last fit's objective.
    n_perturbations : int, default=100
        Perturbations M used by :meth:`predict_marginals` with ``method="perturb"`` (the
        default where the solver has no exact marginals: grids and graphs), and the Gibbs
        chains of ``method="gibbs"``.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations and the sample order; results do not depend on ``n_jobs``.
    n_jobs : int or None, default=None
        Processes for per-sample graph cuts (joblib); chains are solved in one vectorised call.
    {{n_shards}}
    verbose : int, default=0
        Print the objective of the first three epochs, of every tenth of ``max_iter`` and of
        the last (every epoch with ``verbose >= 3``).
    {{unknown_label_known}}
    {{ignore_label}}
    {{init}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
        Weights ``w`` (averaged if ``average``); ``structure_.unpack(coef_)`` splits them.
    structure_ : structure instance
        The fitted structure (dimensions, Ψ, oracle).
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
        Epochs run by the last fit (1 after :meth:`partial_fit`).
    t_ : int
        SGD updates done (across warm starts).
    eta0_ : float
        Initial step size used (the calibrated one when ``eta0="auto"``).
    sgd_settings_ : dict
        The ``learning_rate``, ``batch_size``, ``max_iter``, ``tol`` and ``average`` (samples
        before averaging starts, or a bool) of the last fit, every ``"auto"`` resolved (by
        the first :meth:`partial_fit` of a stream, on its chunk, and kept by the later ones).
    loss_curve_ : list of float
        Negated regularised objective estimate per epoch.
    validation_scores_ : list of float
        Validation score per epoch when ``early_stopping``.

    See Also
    --------
    MarginalPerturbMAPCRF : marginal (Hamming-loss) variant, semi-supervised labels.
    ChainCRF : the exact likelihood, where exact marginals exist.

    References
    ----------
    .. [1] T. Hazan and T. Jaakkola. On the partition function and random maximum a-posteriori
       perturbations. ICML 2012.
    .. [2] T. Shpakova, F. Bach and A. Osokin. Marginal weighted maximum log-likelihood for
       efficient learning of perturb-and-MAP models. UAI 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import PerturbMAPCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> crf = PerturbMAPCRF(random_state=0).fit(X, y)
    >>> crf.score(X, y) > 0.8
    True
    """

    _parameter_constraints: dict = {
        **ClassWeightedSGD._parameter_constraints,
        "class_weight": [None, StrOptions({"balanced"}), dict],
    }

    def __init__(
        self,
        structure="chain",
        *,
        class_weight=None,
        alpha="auto",
        l1_ratio=0.0,
        max_iter="auto",
        batch_size="auto",
        learning_rate="auto",
        eta0="auto",
        power_t=0.5,
        average="auto",
        tol="auto",
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        warm_start=False,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        n_shards=1,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
        init="auto",
    ):
        store_parameters(self, locals())

    #: The perturb-and-MAP likelihood ``f(y) − A_G`` is a lower bound of the Gibbs
    #: likelihood ``f(y) − log Z`` of the same weights (``A_G ≥ log Z``, Hazan & Jaakkola 2012,
    #: Thm. 1): the weights are fitted for the Gibbs model, whose exact marginals
    #: forward–backward computes on chains.
    _exact_marginals_are_the_model = True
    _learns_hidden_states = True

    def _make_oracle(self, batch, labels):
        return perturb_and_map_oracle(
            self.structure_,
            batch,
            labels,
            sample_weight=batch.sample_weight,
            node_weight=self._node_weights(labels),
            n_jobs=self.n_jobs,
        )


def perturb_and_map_oracle(
    structure, batch, labels, kind="gumbel", sample_weight=None, n_jobs=None, node_weight=None
):
    r"""The stochastic gradient of the perturb-and-MAP likelihood :math:`\ell = f(y|x) - A_G(x)`.

    Returns ``oracle(part, w, rng) -> (gradient, objective)`` over the samples ``part`` of the
    batch: one fresh perturbation per sample (``kind``, see
    :func:`~pmap_sklearn.perturbation.draw`), the perturbed MAP ``y*``, the gradient :math:`\sum_n
    c_n [\Psi (x_n, y_n) - \Psi (x_n, y*_n)]` and the unbiased estimate :math:`\sum_n c_n [f(y_n) -
    f(y*_n) - z(y*_n)]` of :math:`\sum_n c_n \ell_n` (``c`` = ``sample_weight``, 1 when None;
    ``node_weight`` further weighs each node's terms and each edge's by the mean of its
    nodes', see ``class_weight`` in :class:`PerturbMAPCRF`). With
    sparse node features the gradient is a :class:`~pmap_sklearn._utils.SparseVector` and
    ``oracle.support(part)`` names the weights the step reads, for the engine's lazy updates
    (:func:`~pmap_sklearn._optim.sgd.run_sgd`).
    """
    solver = structure.solver_

    def oracle(part, w, rng):
        sub = batch.subset(part)
        truth = labels[batch.node_index(part)]
        perturbation = draw(rng, sub.n_nodes, structure.n_states_, kind)
        potentials = structure.potentials(sub, w, perturbation)
        perturbed = solver.map(potentials, n_jobs=n_jobs)
        at_truth = 0.0
        if structure.has_hidden_states_:  # the states of the labels: the best under z
            truth = solver.map(structure.restrict(potentials, truth)[0], n_jobs=n_jobs)
            at_truth = perturbation[np.arange(sub.n_nodes), truth]
        weight = None if sample_weight is None else sample_weight[part]
        nodes_weight = None if node_weight is None else node_weight[batch.node_index(part)]
        gradient = structure.joint_feature_difference(
            sub, truth, perturbed, weight, compact=True, node_weight=nodes_weight
        )
        at_map = perturbation[np.arange(sub.n_nodes), perturbed] - at_truth
        if weight is not None:
            at_map = at_map * weight[sub.node_sample]
        if nodes_weight is not None:
            at_map = at_map * nodes_weight
        return gradient, dot(w, gradient) - at_map.sum()

    return lazy_when_sparse(oracle, structure, batch)
