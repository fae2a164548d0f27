"""Linear chains (sequences): any number of labels, a K×K transition table, Viterbi."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import sparse

from .._backend import ChainLayout, GraphKind, PairwiseKind
from .._docstrings import shared_docstring
from .._utils import store_parameters
from .._validation import as_finite_features
from ..samples import GraphSample, ParsedSample, SampleBatch
from ._base import BaseStructure
from ._constraints import over_states, resolve_constraints

__all__ = ["ChainStructure"]


@shared_docstring
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
    {{unary}}
    {{n_states_per_label}}
    constraints : str or dict, optional
        Labellings the model forbids, resolved against the labels seen in ``fit``: a tagging
        scheme by name — ``"BIO"`` (``"IOB2"``: ``I-X`` only after ``B-X`` or ``I-X``),
        ``"IOB1"`` (``B-X`` only between two entities of type X), ``"BIOES"`` / ``"BILOU"``
        (an entity closes with ``E-X`` / ``L-X`` or is one ``S-X`` / ``U-X`` token), labels
        ``"O"`` or ``"<prefix>-<type>"`` — or a dict with ``"transitions"``, the allowed
        ``(from, to)`` label pairs, and optionally ``"start"`` and ``"end"``, the labels a
        chain may start and end with. A forbidden labelling has probability zero in every
        query (MAP, marginals, draws, event probabilities) and in training; the weights of
        forbidden transitions stay zero. Training labels must obey them. Needs the
        ``"viterbi"`` solver.

    Attributes
    ----------
    constraints_ : TransitionConstraints or None
        The fitted constraints over the states (``transitions`` (K, K), ``start`` and
        ``end`` (K,) of bool: what is allowed); None without constraints.
    """

    pairwise_kind = PairwiseKind.SHARED
    graph_kind = GraphKind.CHAIN
    sample_kind = "chain"

    def __init__(
        self,
        n_states: int | None = None,
        *,
        bias: bool = True,
        solver="viterbi",
        unary: str = "linear",
        n_states_per_label=None,
        constraints=None,
    ):
        store_parameters(self, locals())

    def requirements(self, *, clamps: bool = False, marginals: bool = False):
        need = super().requirements(clamps=clamps, marginals=marginals)
        return replace(need, constraints=self.constraints is not None)

    def _fit_classes(self, classes) -> None:
        """Resolve ``constraints`` against the labels (:func:`resolve_constraints`)."""
        self._label_constraints = self._classes_of_constraints = None
        self.constraints_ = None
        if self.constraints is None:
            return
        self._label_constraints = resolve_constraints(self.constraints, classes)
        self._classes_of_constraints = np.asarray(classes)
        self.constraints_ = over_states(self._label_constraints, self.state_labels_)

    def fit_problem(self, X, y, **markers):
        problem = super().fit_problem(X, y, **markers)
        self._check_obeyed(problem, "the training labels")
        return problem

    def problem(self, X, *, known_labels=None, **given):
        problem = super().problem(X, known_labels=known_labels, **given)
        if known_labels is not None:  # (labels to score may break them: probability zero)
            self._check_obeyed(problem, "known_labels")
        return problem

    def _check_obeyed(self, problem, what: str) -> None:
        """Raise if labels break the constraints (unknown labels pass), naming where."""
        constraints = getattr(self, "_label_constraints", None)
        if constraints is None or problem.labels is None:
            return
        codes, batch = problem.labels, problem.batch
        broken = np.flatnonzero(~constraints.allows(codes, batch.node_offsets))
        if not len(broken):
            return
        node = int(broken[0])
        sample = int(batch.node_sample[node])
        position = node - int(batch.node_offsets[sample])
        names = self._classes_of_constraints.tolist()
        label, before = names[codes[node]], codes[node - 1] if position else -1
        if before >= 0 and not constraints.transitions[before, codes[node]]:
            where = f"{names[before]!r} followed by {label!r}"
        elif position == 0 and not constraints.start[codes[node]]:
            where = f"{label!r} at its start"
        else:
            where = f"{label!r} at its end"
        scheme = self.constraints if isinstance(self.constraints, str) else "the dict"
        hint = "correct or drop the sample"
        if scheme.upper() in ("BIO", "IOB2"):
            hint = (
                "an I-X that opens an entity is B-X in BIO, as conlleval reads it "
                "(pmap_sklearn.metrics.to_bio_tags rewrites tags so)"
            )
        raise ValueError(
            f"sample {sample}: {what} break constraints={scheme!r} at node {position} "
            f"({where}): {hint}"
        )

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
        stacked, lengths = self._stacked_as_given([X[i] for i in index])
        if stacked is None:  # some chain needs converting, or is wrong: one by one
            features = [self._chain_features(X[i], i) for i in index]
            for i, chain in zip(index, features, strict=True):
                self._check_width(chain, i)
            lengths = np.fromiter((chain.shape[0] for chain in features), np.intp, len(features))
            stacked = self._stack_features(features)
        node_offsets = np.concatenate([[0], np.cumsum(lengths)])
        not_last = np.ones(node_offsets[-1], dtype=bool)
        not_last[node_offsets[1:] - 1] = False
        heads = np.flatnonzero(not_last)  # every node but each chain's last: edges (d, d + 1)
        return SampleBatch(
            features=stacked,
            node_offsets=node_offsets,
            node_sizes=np.ones(node_offsets[-1]),
            edges=np.stack([heads, heads + 1], axis=1),
            edge_offsets=np.concatenate([[0], np.cumsum(lengths - 1)]),
            edge_features=np.ones((len(heads), 0)),
            label_shapes=[(n,) for n in lengths.tolist()],
        )

    def initial_state_candidates(self, batch: SampleBatch, codes: np.ndarray, rng) -> list:
        """:meth:`initial_states` (k-means), and the uniform segmentation of each run of a
        label among its states in order, the start of left-to-right hidden Markov models
        (Rabiner 1989, segmental k-means): states that count the nodes of a run, as the
        k-means of node features cannot (they do not tell the start of a run from its end).
        The segmentation is left out where no run of a label with several states is longer
        than one node (it would put every node in the first state).

        Parameters
        ----------
        batch : SampleBatch
        codes : ndarray of shape (n_nodes,)
            Label codes (:meth:`prepare_labels`).
        rng : numpy.random.Generator

        Returns
        -------
        list of ndarray of shape (n_nodes,) of int
            The k-means states, then (where runs are longer than a node) the segmentation.
        """
        candidates = super().initial_state_candidates(batch, codes, rng)
        sample = batch.node_sample
        starts = np.ones(batch.n_nodes, dtype=bool)
        starts[1:] = (codes[1:] != codes[:-1]) | (sample[1:] != sample[:-1])
        run = np.cumsum(starts) - 1
        position = np.arange(batch.n_nodes) - np.flatnonzero(starts)[run]
        length = np.bincount(run)[run]
        counts = self.label_states_[: self.n_labels_].sum(axis=1)
        known = (codes >= 0) & (codes < self.n_labels_)
        several = known & (counts[np.where(known, codes, 0)] > 1)
        if not (several & (length > 1)).any():
            return candidates
        segmented = candidates[0].copy()
        k = counts[codes[several]]
        # the j-th of a run's L nodes takes its label's state floor(j k / L)
        first = np.argmax(self.label_states_[codes[several]], axis=1)
        segmented[several] = first + (position[several] * k) // length[several]
        return [*candidates, segmented]

    def _parse_sample(self, x, index):
        features = self._chain_features(x, index)
        n = features.shape[0]
        edges = np.arange(n - 1)[:, None] + np.arange(2)  # (d, d + 1)
        return ParsedSample(features, edges, np.ones((n - 1, 0)), np.ones(n), (n,))

    def _stacked_as_given(self, chains: list):
        """The chains' node features stacked (:meth:`_stack_features`) and their lengths, when
        every chain is already a float64 CSR matrix (a vectoriser's output) or a float64 array
        of the fitted width with at least one node, and all are finite: checked once on the
        stack rather than chain by chain (a treebank is thousands of short chains). ``(None,
        None)`` otherwise: :meth:`_chain_features` then converts each or names what is wrong.
        """
        if not chains:
            return None, None
        if sparse.issparse(chains[0]):
            as_given = all(
                sparse.issparse(x) and x.format == "csr" and x.dtype == np.float64 for x in chains
            )
        else:
            as_given = all(
                type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 2 for x in chains
            )
        width = getattr(self, "n_features_in_", None)
        if not as_given or width is None:
            return None, None
        shapes = np.array([x.shape for x in chains], dtype=np.intp).reshape(-1, 2)
        if shapes[:, 0].min() < 1 or np.any(shapes[:, 1] != width):
            return None, None
        stacked = self._stack_features(chains)
        values = stacked.data if sparse.issparse(stacked) else stacked
        if not np.isfinite(values).all():
            return None, None
        return stacked, shapes[:, 0]

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
        return ChainLayout(getattr(self, "constraints_", None))

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
