"""The held-out choice of :class:`~pmap_sklearn.TwoStageCRF`: the folds of the out-of-fold
probabilities, and what stage two keeps of what it learned — its unary form, the share of its
pairwise weights and of the class offsets, and its marginals' temperature — chosen on the last
fold, where it can fall back to stage one's own decisions."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from functools import partial
from numbers import Integral

import numpy as np
from sklearn.model_selection import GroupKFold, KFold

from .._backend import PairwiseKind
from .._optim import defaults
from .._validation import check_generator
from ..metrics.segmentation import segmentation_scores
from ..samples import GraphSample
from ._estimator import stage_two_fit


class HeldOutChoice:
    """The folds and the held-out choice of a two-stage estimator (a mixin of
    :class:`~pmap_sklearn.TwoStageCRF`, which provides ``cv``, ``unary``, ``pairwise_scale``,
    ``scoring``, ``random_state`` and ``_crf``, ``_unary_forms``)."""

    def _folds(self, n_samples: int, groups) -> list:
        """The (train, test) sample indices of the out-of-fold probabilities; the test folds
        partition the samples."""
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (n_samples,):
                raise ValueError(
                    f"groups has shape {groups.shape} but X has {n_samples} samples: give one "
                    f"group per sample"
                )
        samples = np.arange(n_samples)
        if not isinstance(self.cv, Integral):  # a scikit-learn splitter
            try:
                folds = list(self.cv.split(samples, groups=groups))
            except TypeError as error:  # e.g. StratifiedKFold: split() needs y
                raise ValueError(
                    f"cv={self.cv!r} cannot split the samples ({error}): TwoStageCRF splits "
                    "whole samples, which have no single class to stratify on; use KFold, "
                    "GroupKFold (with groups=...) or an int"
                ) from None
        elif groups is None:
            seed = check_generator(self.random_state).integers(2**31)
            folds = list(
                KFold(min(self.cv, n_samples), shuffle=True, random_state=seed).split(samples)
            )
        else:
            n_groups = len(np.unique(groups))
            if n_groups < 2:
                raise ValueError(
                    "groups holds a single group: the out-of-fold probabilities need at least "
                    "2 groups"
                )
            folds = list(GroupKFold(min(self.cv, n_groups)).split(samples, groups=groups))
        held_out = [np.asarray(test, dtype=np.intp) for _, test in folds]
        if len(folds) < 2 or not np.array_equal(np.sort(np.concatenate(held_out or [[]])), samples):
            raise ValueError(
                f"cv={self.cv!r} does not partition the samples into test folds (each sample "
                f"held out exactly once, at least 2 folds): use KFold, GroupKFold or an int"
            )
        for k, (train, test) in enumerate(folds):
            train = np.asarray(train, dtype=np.intp)
            if len(train) == 0:
                raise ValueError(
                    f"cv={self.cv!r}: fold {k} has no training sample, so stage one has "
                    "nothing to learn its out-of-fold probabilities from; give a splitter whose "
                    "train folds hold samples (KFold, GroupKFold or an int)"
                )
            if np.intersect1d(train, test).size:
                raise ValueError(
                    f"cv={self.cv!r}: fold {k} trains on samples it tests (e.g. sample "
                    f"{np.intersect1d(train, test)[0]}), so stage two would learn from "
                    "in-sample probabilities; give a splitter whose train and test folds are "
                    "disjoint (KFold, GroupKFold)"
                )
        return folds

    def _choose(
        self,
        samples,
        y,
        labels,
        known,
        classes,
        offsets,
        folds,
        probabilities,
        report,
        sample_weight=None,
    ):
        """What stage two keeps, chosen on held-out samples: a :class:`_Choice` (``"auto"``
        resolved; its ``scores`` None when there was nothing to choose).

        Each candidate unary form is fitted on the out-of-fold samples of all folds but the
        last, and its MAP labellings of the last fold's samples are scored at each pairwise
        scale and share of the class offsets: neither stage two nor the classifier that gave
        those samples their probabilities has seen them, as neither will have seen a new
        sample. With ``sample_weight`` stage two is fitted with the samples' weights, and a
        node counts its size times its sample's weight in the scores and the class shares.
        """
        forms = [self.unary] if self.unary != "auto" else self._unary_forms()
        auto_scale = self.pairwise_scale == "auto"
        scales = defaults.TWO_STAGE_PAIRWISE_SCALES if auto_scale else [float(self.pairwise_scale)]
        shares = defaults.TWO_STAGE_OFFSET_SHARES if auto_scale else (0.0,)
        no_offsets = np.zeros(len(classes))
        if len(forms) == 1 and len(scales) == 1:
            return _Choice(forms[0], "learned", scales[0], 0.0, no_offsets, None, None, None)
        held = np.sort(np.asarray(folds[-1][1], dtype=np.intp))
        rest = np.setdiff1d(np.arange(len(samples)), held)
        held, rest = self._fittable(held, rest, labels, known, classes, offsets)
        nodes = _nodes_of(held, offsets)
        if not known[nodes].any():  # no label to score there: the fitted samples instead
            held = rest
            nodes = _nodes_of(held, offsets)
        held_samples, held_y = [samples[i] for i in held], [y[i] for i in held]
        sizes = _sizes_of(held, samples, offsets, sample_weight)
        scored = known[nodes]
        decisions = probabilities.argmax(axis=1)  # stage one's: the floor of the choice

        def three_scores(predicted):  # predicted: positions in classes
            return segmentation_scores(
                [labels[nodes][scored]],
                [classes[predicted[scored]]],
                labels=classes,
                sample_weight=[sizes[scored]],
            )

        def map_positions(crf, X, delta):
            predicted = crf.predict(_shifted(X, delta))
            return np.searchsorted(classes, np.concatenate([np.ravel(p) for p in predicted]))

        # the class offsets are fitted on (up to TWO_STAGE_OFFSET_SAMPLES of) the samples stage
        # two is fitted on, to keep the class shares (pixels, where nodes have sizes) of stage one's
        # decisions there, and scored on the held-out samples with the rest of the candidate
        spread = np.linspace(0, len(rest) - 1, defaults.TWO_STAGE_OFFSET_SAMPLES)
        fitting = rest[np.unique(spread.astype(int))]
        fitting_samples = [samples[i] for i in fitting]
        fitting_sizes = _sizes_of(fitting, samples, offsets, sample_weight)
        target = _class_shares(decisions[_nodes_of(fitting, offsets)], fitting_sizes, len(classes))
        alone = three_scores(decisions[nodes])

        def held_weights(scoring) -> dict:  # the held-out samples' weights, to a scorer of them
            if sample_weight is None or not _takes_sample_weight(scoring):
                return {}
            return {"sample_weight": sample_weight[held]}

        scores, candidates, allowed, uniforms = {}, {}, {}, {}
        for form in forms:
            report(f"choice: stage two with unary={form!r} on {len(rest)} samples")
            weights = {} if sample_weight is None else {"sample_weight": sample_weight[rest]}
            with stage_two_fit():
                fitted = self._crf(form).fit(
                    [samples[i] for i in rest], [y[i] for i in rest], **weights
                )
            if len(scales) > 1 or scales[0] != 1:
                _check_scalable(fitted)
            smoothings = [("learned", scale) for scale in scales]
            # the uniform Potts weights of every sample's edges, which the refit keeps
            uniform = _uniform_potts(fitted, samples) if form == "scale" else None
            uniforms[form] = uniform
            if auto_scale and uniform is not None:
                smoothings += [("potts", weight) for weight in defaults.TWO_STAGE_POTTS_WEIGHTS]
            for pairwise, scale in smoothings:
                crf = _smoothed(fitted, pairwise, scale, uniform)
                delta = no_offsets
                if len(shares) > 1:
                    delta = _balancing_offsets(
                        partial(map_positions, crf, fitting_samples), target, fitting_sizes
                    )
                for share in shares:
                    key = (form, pairwise, scale, share)
                    candidates[key] = crf, share * delta
                    if self.scoring is not None:
                        shifted = _shifted(held_samples, share * delta)
                        scores[key] = float(
                            self.scoring(crf, shifted, held_y, **held_weights(self.scoring))
                        )
                        allowed[key] = True
                        continue
                    own = three_scores(map_positions(crf, held_samples, share * delta))
                    scores[key] = own["mean_iou"]
                    allowed[key] = _keeps_stage_one(own, alone)
        # the best allowed; ties go to the first form listed, the learned weights, the smaller
        # scale and share
        order = {form: k for k, form in enumerate(forms)}
        kind = {"learned": 0, "potts": 1}

        def rank(key):
            return -scores[key], order[key[0]], kind[key[1]], *key[2:]

        ranked = sorted(scores, key=rank)
        if any(allowed.values()):
            key = next(key for key in ranked if allowed[key])
            # the weights as fitted stand unless the held-out fold shows a clear gain: a
            # few held-out samples cannot tell candidates apart by less than that
            fitted_scale = 1.0 if auto_scale else scales[0]
            as_fitted = [(form, "learned", fitted_scale, 0.0) for form in forms]
            as_fitted = [other for other in as_fitted if allowed[other]]
            if self.scoring is None and as_fitted:
                reference = max(as_fitted, key=lambda other: (scores[other], -order[other[0]]))
                if scores[key] < scores[reference] + defaults.TWO_STAGE_CHOICE_MARGIN:
                    key = reference
        elif ("scale", "learned", 0.0, 0.0) in scores:  # stage one's decisions themselves
            key = ("scale", "learned", 0.0, 0.0)
        else:
            key = ranked[0]
        crf, delta = candidates[key]
        temperature = self._temperature(crf, _shifted(held_samples, delta), held_y, report)
        return _Choice(*key, delta, scores, temperature, uniforms[key[0]])

    def _fittable(self, held, rest, labels, known, classes, offsets):
        """The held-out and fitted samples of the choice, such that stage two is fitted on
        samples that hold every class of the whole fit (its structure takes one score per
        class) and a fully labelled sample (its supervised first stage): the held-out samples
        that supply what the others lack move to the fitted ones, all of them if need be
        (then the choice is scored on the fitted samples)."""
        from .._labels import unknown_mask

        unknown = unknown_mask(labels, self.unknown_label)

        def lacking(fitted) -> tuple:
            nodes = _nodes_of(fitted, offsets) if len(fitted) else np.zeros(0, np.intp)
            seen = labels[nodes][known[nodes]]
            complete = [not unknown[offsets[i] : offsets[i + 1]].any() for i in fitted]
            return np.setdiff1d(classes, seen), not any(complete)

        missing, incomplete = lacking(rest)
        if not missing.size and not incomplete:
            return held, rest
        moved = []
        for i in held:
            nodes = np.arange(offsets[i], offsets[i + 1])
            has_missing = np.isin(labels[nodes][known[nodes]], missing).any()
            if has_missing or (incomplete and not unknown[nodes].any()):
                moved.append(i)
                incomplete = False
        held = np.setdiff1d(held, moved)
        rest = np.union1d(rest, moved).astype(np.intp)
        return (rest if len(held) == 0 else held), rest

    def _temperature(self, crf, X, y, report):
        """The temperature of ``crf``'s marginals fitted on held-out samples (at most
        ``TWO_STAGE_CALIBRATION_SAMPLES`` of them), or None for a stage two without marginals.

        Fitted with the learner's own number of perturbed MAPs: the log-loss counts a label
        no MAP chose as a pseudo-count of 1/(M + 1), so fewer MAPs than predictions take
        would fit a lower temperature than the predicted frequencies need."""
        if not hasattr(crf, "calibrate_marginals") or not hasattr(crf, "predict_marginals"):
            return None
        n_kept = min(len(X), defaults.TWO_STAGE_CALIBRATION_SAMPLES)
        keep = np.unique(np.linspace(0, len(X) - 1, n_kept).astype(int))
        crf = copy.copy(crf)  # its own temperature
        report(f"choice: the temperature of the marginals on {len(keep)} held-out samples")
        try:
            crf.calibrate_marginals([X[i] for i in keep], [y[i] for i in keep])
        except ValueError:  # e.g. no known label among them
            return None
        return crf.marginal_temperature_


class _Choice(typing.NamedTuple):
    """What :meth:`TwoStageCRF._choose` keeps of stage two."""

    unary: str
    pairwise: str
    pairwise_scale: float
    class_offsets_share: float
    class_offsets: np.ndarray
    scores: dict | None
    temperature: float | None
    uniform: np.ndarray | None  # the edge weights of a uniform Potts weight 1 (see _uniform_potts)


def _keeps_stage_one(own: dict, alone: dict) -> bool:
    """Whether a candidate's held-out scores ``own`` keep those of stage one's own decisions,
    ``alone``: its global accuracy at least theirs, its class-average accuracy at most
    ``TWO_STAGE_CLASS_AVERAGE_SLACK`` below (the noise of a held-out fold); among the candidates
    that keep them, the best mean IoU wins ("Scene segmentation" in the user guide)."""
    slack = defaults.TWO_STAGE_CLASS_AVERAGE_SLACK
    return (
        own["global_accuracy"] >= alone["global_accuracy"]
        and own["class_average_accuracy"] >= alone["class_average_accuracy"] - slack
    )


def _class_shares(positions, sizes, n_classes: int) -> np.ndarray:
    """The share of the nodes' size (pixels, or 1 a node) given to each class."""
    shares = np.bincount(positions, weights=sizes, minlength=n_classes)
    return shares / max(shares.sum(), np.finfo(float).tiny)


def _balancing_offsets(map_positions, target, sizes, n_iter=12, step=0.3) -> np.ndarray:
    """Offsets δ (one per class, mean 0) on the log-probabilities under which the MAP
    labellings ``map_positions(δ)`` give each class the share ``target`` of the nodes' size.

    A damped fixed-point iteration on the log-ratio of the shares (the MAP labelling is
    piecewise constant in δ, so each step is clipped to ±1 and scaled by ``step``).
    """
    floor = 1e-3  # a class absent from both stays put; one absent from either moves at most
    delta = np.zeros(len(target))
    wanted = np.log(np.maximum(target, floor))
    for _ in range(n_iter):
        gap = wanted - np.log(
            np.maximum(_class_shares(map_positions(delta), sizes, len(target)), floor)
        )
        if np.abs(gap).max() < 0.01:
            break
        delta += step * np.clip(gap, -1.0, 1.0)
        delta -= delta.mean()
    return delta


def _shifted(samples, delta) -> list:
    """Stage-two samples with ``delta`` added to every node's log-probabilities."""
    if not np.any(delta):
        return list(samples)
    return [
        dataclasses.replace(x, node_features=x.node_features + delta)
        if isinstance(x, GraphSample)
        else np.asarray(x) + delta
        for x in samples
    ]


def _check_scalable(crf) -> None:
    """A ValueError unless the fitted stage two has weights with a pairwise part."""
    structure = getattr(crf, "structure_", None)
    if getattr(crf, "coef_", None) is None or not hasattr(structure, "unpack"):
        raise ValueError(
            f"pairwise_scale needs a stage two with pairwise weights (coef_ and a structure), "
            f"got {type(crf).__name__}; use pairwise_scale=1"
        )


def _with_pairwise_scale(crf, scale: float):
    """The fitted ``crf`` with its pairwise weights times ``scale`` (a shallow copy with its
    own ``coef_``; ``crf`` itself for a scale of 1)."""
    if scale == 1:
        return crf
    scaled = copy.copy(crf)
    scaled.coef_ = np.array(crf.coef_, dtype=float)
    _, pairwise = scaled.structure_.unpack(scaled.coef_)
    pairwise *= scale
    return scaled


def _uniform_potts(crf, samples) -> np.ndarray | None:
    """Pairwise weights ``v`` of the fitted ``crf`` under which every edge of ``samples`` has
    the Potts weight 1 (``v · ψ_ij = 1``: a constant edge feature, or indicators of the edge
    directions of a grid), or None where stage two's pairwise terms are not one Potts weight
    linear in edge features shared by every edge."""
    structure = getattr(crf, "structure_", None)
    if getattr(structure, "pairwise_kind", None) is not PairwiseKind.POTTS:
        return None
    if not hasattr(structure, "_edge_weight_sets") or not len(samples):
        return None
    batch = structure.prepare(samples)
    edge_features = getattr(batch, "edge_features", None)
    if edge_features is None or len(edge_features) == 0:
        return None
    if structure._edge_weight_sets(batch) is not None:  # edges with weights of their own
        return None
    ones = np.ones(len(edge_features))
    v = np.linalg.lstsq(edge_features, ones, rcond=None)[0]
    return v if np.allclose(edge_features @ v, ones, atol=1e-8) else None


def _smoothed(crf, pairwise: str, scale: float, uniform=None):
    """The fitted ``crf`` with the smoothing of a candidate: its learned pairwise weights times
    ``scale`` (``pairwise="learned"``), or a uniform Potts weight ``scale`` on every edge, in
    units of the log-probabilities (``"potts"``: ``−scale λ`` for the unary trust λ of
    ``unary="scale"``, or 1 if it fitted none, along the ``uniform`` weights of
    :func:`_uniform_potts`)."""
    if pairwise == "learned":
        return _with_pairwise_scale(crf, scale)
    smoothed = copy.copy(crf)
    smoothed.coef_ = np.array(crf.coef_, dtype=float)
    unary, weights = smoothed.structure_.unpack(smoothed.coef_)
    if not unary[0] > 0:  # the likelihood trusted the log-probabilities not at all
        unary[0] = 1.0
    weights[:] = -scale * float(unary[0]) * uniform
    return smoothed


def _nodes_of(samples, offsets) -> np.ndarray:
    """The stacked nodes of the samples ``samples``."""
    return np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in samples])


def _sizes_of(indices, samples, offsets, sample_weight=None) -> np.ndarray:
    """The stacked node sizes of the samples ``indices`` (times their sample's weight)."""
    return np.concatenate(
        [
            _node_sizes(samples[i], offsets[i + 1] - offsets[i])
            * (1.0 if sample_weight is None else sample_weight[i])
            for i in indices
        ]
    )


def _takes_sample_weight(scoring) -> bool:
    """Whether the scorer ``scoring(estimator, X, y, ...)`` takes ``sample_weight``."""
    try:
        return "sample_weight" in inspect.signature(scoring).parameters
    except (TypeError, ValueError):
        return False


def _node_sizes(x, n_nodes: int) -> np.ndarray:
    """A sample's node sizes (a superpixel's pixels), 1 for every node without them."""
    sizes = getattr(x, "node_sizes", None)
    return np.ones(n_nodes) if sizes is None else np.asarray(sizes, dtype=float).ravel()


def _rounded(choice) -> str:
    """The chosen candidate's held-out score, and the best of the others'."""
    key = (choice.unary, choice.pairwise, choice.pairwise_scale, choice.class_offsets_share)
    others = [score for other, score in choice.scores.items() if other != key]
    best = f", the best other {max(others):.3f}" if others else ""
    return f"held-out score {choice.scores[key]:.3f}{best}"
