"""Every ``"auto"`` rule of the estimators, as named constants in one place.

Where a setting depends on the data (sparse or dense features, chain, grid or graph, multi-label
rows, size), the estimator resolves its ``"auto"`` value from these constants. Each says what it
holds and why in one line; the measurements behind it are in ``docs/results/defaults.md``
(section named after the constant), which the user guide links. Code reads them as
``defaults.NAME`` at the time of use, so an experiment can set another value for a run.

Nothing here imports the rest of the package.
"""

# ---- the SGD learners (PerturbMAPCRF, MarginalPerturbMAPCRF, MeanFieldCRF) -----------------------

#: Sparse node features (token features of words): AdaGrad, mini-batches of 32, a budget of 8
#: epochs with its second half averaged — the treebank's dev split chose them (defaults.md).
SGD_SPARSE = {"learning_rate": "adagrad", "batch_size": 32, "max_iter": 8, "tol": None}
#: Multi-label rows with sparse features and no bias (``bias=False``: a bias centres them, and
#: they take the dense rule): the same steps for the dense rule's budget of 50 epochs — 8 epochs
#: of a thousand samples are a few hundred steps, short of rare labels (defaults.md).
SGD_MULTILABEL_SPARSE = {**SGD_SPARSE, "max_iter": 50}
#: General graphs with more than two labels (superpixels): AdaGrad for 30 epochs; the schedule's
#: calibrated step is too small to move the pairwise weights there (defaults.md).
SGD_GRAPH_MULTICLASS = {"learning_rate": "adagrad", "max_iter": 30, "tol": None}
#: Dense features, per learner: the ``1/(α t)`` schedule with a stopping rule for the
#: perturb-and-MAP likelihood (OCR small protocol); fixed budgets for the learners whose
#: objectives need them (defaults.md).
SGD_DENSE = {
    "likelihood": {"learning_rate": "optimal", "max_iter": 50, "tol": 1e-3, "batch_size": 16},
    "marginal": {"learning_rate": "optimal", "max_iter": 100, "tol": None, "batch_size": 32},
    "mean_field": {"learning_rate": "adagrad", "max_iter": 30, "tol": None, "batch_size": 16},
}
#: ``tol="auto"`` with ``early_stopping``: the gain the validation score (1 − Hamming) needs.
EARLY_STOPPING_TOL = 1e-3
#: ``init="auto"``: zeros on chains without hidden states (early stopping from zero
#: regularises better on OCR), the logistic start elsewhere (defaults.md).
CHAIN_INIT, OTHER_INIT = "zeros", "logistic"
#: The logistic start: at most this many node rows (a random subset) and L-BFGS iterations —
#: a starting point, not a fit.
LOGISTIC_ROWS, LOGISTIC_ITERATIONS = 10_000, 30
#: ... and at most this many entries where its rows are built dense (the implicitly centred
#: rows of sparse multi-label ``X``: F + 1 a row), about 130 MB of float64.
LOGISTIC_DENSE_ENTRIES = 2**24

# ---- alpha="auto" -----------------------------------------------------------------------------

#: Dense features, by objective: the likelihoods' L2 strength chosen on the OCR small protocol
#: (the node-averaged losses keep it), the structured SVM's at its hinge's scale.
DENSE_ALPHA = {"likelihood": 1e-4, "node_loss": 1e-4, "hinge": 1e-3}
#: Sparse node features: this over the objective's units of evidence — crfsuite's tutorial
#: ``c2 = 0.1`` on the summed likelihood (defaults.md).
SPARSE_ALPHA = 0.2
#: Multi-label data, by objective: 3-fold cross-validation on the standardised training
#: splits of yeast and scene (defaults.md).
MULTILABEL_ALPHA = {"likelihood": 0.1, "node_loss": 0.03, "hinge": 1.0}

# ---- ChainCRF on sparse node features --------------------------------------------------------

#: Sparse node features: crfsuite's default model — weights only for the (feature, label) pairs
#: seen in training (``all_possible_states``), the tutorial's penalty ``c1 = c2 = 0.1`` on the
#: summed likelihood (``alpha = (c1 + 2 c2) / n_samples``, ``l1_ratio = c1 / (c1 + 2 c2)``) and
#: its 100 iterations: crfsuite's accuracy, weights and time on the treebank; every pair keeps
#: 1.5x crfsuite's non-zero weights under the same penalty (20x under L2 alone) for the same
#: accuracy (defaults.md).
CHAIN_CRF_SPARSE = {"all_possible_states": False, "crfsuite_c": (0.1, 0.1), "max_iter": 100}
#: Dense features: every (feature, label) pair, L2 only, up to 1000 L-BFGS iterations (the OCR
#: words' chains stop at ``tol`` in 390-490).
CHAIN_CRF_DENSE = {"all_possible_states": True, "l1_ratio": 0.0, "max_iter": 1000}

# ---- eta0="auto": the bounded step-size search -----------------------------------------------

#: The oracle work the search may spend, in epochs of the fit: one, or a tenth of
#: ``max_iter`` when a fit runs a fixed budget and that is more (at most a seventh of a default
#: fit's work).
STEP_SEARCH_EPOCHS, STEP_SEARCH_SHARE = 1.0, 0.1
#: The fewest nodes a candidate pass covers when the budget shrinks its subsample: fewer chose
#: steps that label whole images background (defaults.md).
STEP_SEARCH_MIN_NODES = 3000
#: The first step tried for AdaGrad on dense features (its η0 is a weight's first step, where
#: Polyak's step, the search's start otherwise, does not apply).
ADAGRAD_STEP_SEARCH_START = 0.1
#: Sparse node features: candidate passes over 1,024 samples judged on 512 others, from 0.4 —
#: the step that fits both tagging corpora over seeds (defaults.md).
SPARSE_STEP_SEARCH = {"n_calibration": 1024, "held_out": 512, "start": 0.4}

# ---- StructuredSVM (BCFW) ---------------------------------------------------------------------

#: Sparse node features: mini-batches of 16 for 10 passes (single sentences for 50 passes take
#: minutes on a tagging corpus; defaults.md).
SSVM_SPARSE = {"batch_size": 16, "max_iter": 10}
#: Dense features: exact BCFW, one block a step, for 50 passes.
SSVM_DENSE = {"batch_size": 1, "max_iter": 50}
#: Multi-label data: pairwise steps and mini-batches of 16 for up to 200 passes (plain BCFW
#: zig-zags between a block's few labellings near the optimum; defaults.md).
SSVM_MULTILABEL = {"batch_size": 16, "max_iter": 200, "pairwise_steps": True}

# ---- solver="auto" of MultiLabelStructure -----------------------------------------------------

#: Loopy label graphs of at most this many labels are solved exactly by enumeration (2^10
#: labellings a sample, one matrix product for a batch); TRW-S beyond.
MULTILABEL_BRUTE_FORCE_LABELS = 10

# ---- TwoStageCRF's held-out choice (pairwise_scale="auto") ------------------------------------

#: The multiples of stage two's learned pairwise weights it chooses among (0: the unaries).
TWO_STAGE_PAIRWISE_SCALES = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0)
#: The shares of the class offsets it chooses among (1: offsets under which the held-out MAP
#: labellings predict each class as often as stage one's decisions do).
TWO_STAGE_OFFSET_SHARES = (0.0, 0.25, 0.5, 1.0)
#: Uniform Potts weights it also chooses among, on stage one's log-probabilities (one weight
#: on every edge, in the units of the log-probabilities: the smoothing classic pipelines set by
#: hand), where stage two's unary form is one weight and its pairwise terms Potts weights.
TWO_STAGE_POTTS_WEIGHTS = (0.125, 0.25, 0.5, 1.0)
#: How far below stage one's own decisions' class-average accuracy a candidate may fall on the
#: held-out fold (half a point: the noise of a fold of a few dozen frames).
TWO_STAGE_CLASS_AVERAGE_SLACK = 0.005
#: The gain in held-out mean IoU another candidate needs over stage two's weights as fitted.
TWO_STAGE_CHOICE_MARGIN = 0.01
#: The most samples the class offsets are fitted on (evenly spaced among stage two's).
TWO_STAGE_OFFSET_SAMPLES = 64
#: The most held-out samples that fit the temperature of the chosen model's marginals.
TWO_STAGE_CALIBRATION_SAMPLES = 16

# ---- ContinuousLogSupermodularDenoiser ---------------------------------------------------------

#: Training patches of ``max_patches="auto"`` (drawn at random when the images have more).
CONTINUOUS_MAX_PATCHES = 40_000
#: Factors of the prior ``prior_scale="sure"`` tries: a coarse grid on a log scale, then its
#: best point's neighbours at half the spacing.
SURE_SCALES = tuple(2.0**e for e in (-2.0, -1.0, 0.0, 1.0, 2.0))
#: The patch stride of the images on which SURE estimates the risk.
SURE_STRIDE = 4
#: The most signals (rows of X) on which SURE estimates the risk.
SURE_SIGNALS = 1 << 14
#: The most patches (or signals) on which SURE estimates the risk of the MMSE.
SURE_MMSE_SIGNALS = 1 << 11
