"""Sharing fitted models without pickles.

A pickle runs whatever it holds when it is loaded. Two ways share a fitted model without that
(see :doc:`/user_guide/sharing`):

- ``skops.io`` (the ``share`` extra) stores any fitted estimator, structure, transformer or
  :class:`~sklearn.pipeline.Pipeline` of them, and loads only the types a user trusts:
  ``skops.io.load(path, trusted=trusted_types())`` trusts the library's own;
- :func:`save_weights` / :func:`load_weights` write and read a weights-only file: a zip of
  ``.npy`` arrays (``coef_``, ``classes_``, a structure's fitted arrays) and a
  ``settings.json`` (the classes, their parameters and fitted settings, a vectorizer's
  vocabulary), which a service outside Python can read too. Loading reads arrays with
  ``allow_pickle=False`` and rebuilds only the classes of :data:`WEIGHTS_CLASSES`.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import zipfile

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["trusted_types", "save_weights", "load_weights", "WEIGHTS_CLASSES"]

#: The library's types that fitted models hold (estimators, structures, solvers, transition
#: constraints, fit states kept for warm starts, compact arrays of pickles, the vectorizer's
#: feature function) and ``numpy.dtype`` (the transformers' ``dtype`` parameter).
_TRUSTED = (
    "numpy.dtype",
    "pmap_sklearn._backend.brute.BruteForceSolver",
    "pmap_sklearn._backend.constraints.TransitionConstraints",
    "pmap_sklearn._backend.cut.GraphCutSolver",
    "pmap_sklearn._backend.expansion.AlphaExpansionSolver",
    "pmap_sklearn._backend.forest.ForestSolver",
    "pmap_sklearn._backend.ishikawa.IshikawaSolver",
    "pmap_sklearn._backend.label_sets.NonEmptyLabelling",
    "pmap_sklearn._backend.local_search.LocalSearchSolver",
    "pmap_sklearn._backend.mean_field.MeanFieldSolver",
    "pmap_sklearn._backend.messages.MessagePassingSolver",
    "pmap_sklearn._backend.trws.TRWSSolver",
    "pmap_sklearn._backend.viterbi.ChainSolver",
    "pmap_sklearn._clusters.TokenClusters",
    "pmap_sklearn._optim.sgd.SGDState",
    "pmap_sklearn._state.FitState",
    "pmap_sklearn._state.SameAsWeights",
    "pmap_sklearn._state.SparseArray",
    "pmap_sklearn._utils.SparseVector",
    "pmap_sklearn.datasets._treebank.token_features",
    "pmap_sklearn.denoisers.binary.LogSupermodularDenoiser",
    "pmap_sklearn.denoisers.continuous.ContinuousLogSupermodularDenoiser",
    "pmap_sklearn.embeddings.SequenceUnion",
    "pmap_sklearn.embeddings.TokenEmbeddings",
    "pmap_sklearn.learners.chain_crf.ChainCRF",
    "pmap_sklearn.learners.contrastive_divergence.ContrastiveDivergenceCRF",
    "pmap_sklearn.learners.epsilon.EpsilonCRF",
    "pmap_sklearn.learners.marginal.MarginalPerturbMAPCRF",
    "pmap_sklearn.learners.mean_field_crf.MeanFieldCRF",
    "pmap_sklearn.learners.part_clamp.PartClampCRF",
    "pmap_sklearn.learners.perturb_map.PerturbMAPCRF",
    "pmap_sklearn.learners.ssvm.BCFWState",
    "pmap_sklearn.learners.ssvm.StructuredSVM",
    "pmap_sklearn.learners.surrogates.PiecewiseCRF",
    "pmap_sklearn.learners.surrogates.PseudoLikelihoodCRF",
    "pmap_sklearn.learners.two_stage.TwoStageCRF",
    "pmap_sklearn.preprocessing.NodeTransformer",
    "pmap_sklearn.preprocessing.SequenceVectorizer",
    "pmap_sklearn.structures.chain.ChainStructure",
    "pmap_sklearn.structures.flip_channel.FlipChannelGrid",
    "pmap_sklearn.structures.graph.GraphStructure",
    "pmap_sklearn.structures.grid.GridStructure",
    "pmap_sklearn.structures.multilabel.MultiLabelStructure",
    "pmap_sklearn.superpixels.SuperpixelGraphs",
)


def trusted_types() -> list[str]:
    """The fully qualified names of the types a fitted model of the library may hold, for
    ``skops.io.load(path, trusted=trusted_types())``.

    They are the library's estimators, structures, solvers, transformers, the fit states that
    a model fitted with ``warm_start=True`` keeps, the compact arrays of an L1 model, the
    vectorizer's feature function :func:`~pmap_sklearn.datasets.token_features`, and
    ``numpy.dtype``. A model holding other types (a scikit-learn classifier in
    :class:`~pmap_sklearn.TwoStageCRF` or :class:`~pmap_sklearn.NodeTransformer`, a solver
    of your own) lists them in ``skops.io.get_untrusted_types(file=path)``: check them before
    adding them to ``trusted``.

    Returns
    -------
    names : list of str
        The names, sorted (a new list at every call).

    Examples
    --------
    >>> from pmap_sklearn.persistence import trusted_types
    >>> "pmap_sklearn.learners.chain_crf.ChainCRF" in trusted_types()
    True
    """
    return sorted(_TRUSTED)


# ---- the weights-only format ------------------------------------------------------------------
#: The format's name and version in ``settings.json``.
FORMAT, VERSION = "pmap_sklearn.weights", 1

#: The library's trusted types the weights format does not rebuild as objects: the fit states
#: only a warm start reads and the compact arrays of pickles (left out, :data:`_LEFT_OUT`),
#: and the vectorizer's feature function (stored by name, :data:`_FUNCTIONS`).
_NOT_REBUILT = frozenset(
    {
        "pmap_sklearn._optim.sgd.SGDState",
        "pmap_sklearn._state.FitState",
        "pmap_sklearn._state.SameAsWeights",
        "pmap_sklearn._state.SparseArray",
        "pmap_sklearn._utils.SparseVector",
        "pmap_sklearn.datasets._treebank.token_features",
        "pmap_sklearn.learners.ssvm.BCFWState",
    }
)

#: The classes :func:`load_weights` rebuilds, by the name ``settings.json`` gives them: the
#: learners, structures, solvers and token transformers, a Pipeline of them, the vocabulary
#: (``DictVectorizer``) or hashing (``FeatureHasher``) of
#: :class:`~pmap_sklearn.SequenceVectorizer`, and the scikit-learn models that hold only
#: arrays and settings: ``LogisticRegression`` (:class:`~pmap_sklearn.TwoStageCRF`'s default
#: stage one) and the scalers a :class:`~pmap_sklearn.NodeTransformer` may wrap. Models
#: holding other objects (another classifier, a solver of your own) are refused by name:
#: share them with skops.io.
WEIGHTS_CLASSES = {
    qualified.rpartition(".")[2]: qualified
    for qualified in (
        *(t for t in _TRUSTED if t.startswith("pmap_sklearn.") and t not in _NOT_REBUILT),
        "sklearn.pipeline.Pipeline",
        "sklearn.feature_extraction.DictVectorizer",
        "sklearn.feature_extraction.FeatureHasher",
        "sklearn.linear_model.LogisticRegression",
        "sklearn.preprocessing.MaxAbsScaler",
        "sklearn.preprocessing.MinMaxScaler",
        "sklearn.preprocessing.StandardScaler",
    )
}


#: Functions a model may hold as a parameter, by name (the vectorizer's ``token_features``).
_FUNCTIONS = {"token_features": "pmap_sklearn.datasets._treebank.token_features"}

#: numpy's bit generators, by name, that a ``random_state`` parameter may hold.
_BIT_GENERATORS = frozenset({"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"})

#: Attributes left out: the fit state only a warm start reads (a warm start after
#: :func:`load_weights` fits afresh, as after a pickle of ``warm_start=False``).
_LEFT_OUT = frozenset({"_state"})


def _resolve(qualified: str):
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _encoder(arrays: dict):
    """A function turning a value into JSON, its arrays into entries of ``arrays``."""
    functions = {_resolve(q): name for name, q in _FUNCTIONS.items()}

    def encode(value, path):
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, int | np.integer):
            return int(value)
        if isinstance(value, float | np.floating):
            return {"float": repr(float(value))} if not np.isfinite(value) else float(value)
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                return {"object_array": [encode(v, f"{path}[{i}]") for i, v in enumerate(value)]}
            name = path if path not in arrays else f"{path}~{len(arrays)}"
            arrays[name] = value
            return {"array": name}
        if isinstance(value, np.dtype):
            return {"dtype": value.str}
        if isinstance(value, type) and issubclass(value, np.generic):
            return {"scalar_type": np.dtype(value).str}
        if isinstance(value, list):
            return [encode(v, f"{path}.{i}") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"tuple": [encode(v, f"{path}.{i}") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            if all(isinstance(k, str) for k in value):
                return {"dict": {k: encode(v, f"{path}.{k}") for k, v in value.items()}}
            return {
                "pairs": [
                    [encode(k, f"{path}.key{i}"), encode(v, f"{path}.{i}")]
                    for i, (k, v) in enumerate(value.items())
                ]
            }
        if isinstance(value, np.random.Generator):  # a random_state: its bit generator's state
            return {"generator": encode(value.bit_generator.state, f"{path}.state")}
        if isinstance(value, np.random.RandomState):
            return {"random_state": encode(value.get_state(legacy=False), f"{path}.state")}
        if callable(value) and not isinstance(value, type) and value in functions:
            return {"function": functions[value]}
        name = type(value).__name__
        if name not in WEIGHTS_CLASSES or _resolve(WEIGHTS_CLASSES[name]) is not type(value):
            raise TypeError(
                f"save_weights cannot store {path} (a {name} of {type(value).__module__}): "
                "the weights format rebuilds only the classes of "
                "pmap_sklearn.persistence.WEIGHTS_CLASSES; share this model with skops.io "
                "(skops.io.dump, then skops.io.load with trusted=trusted_types())"
            )
        attributes = {
            key: encode(v, f"{path}.{key}")
            for key, v in vars(value).items()
            if key not in _LEFT_OUT
        }
        return {"object": name, "attributes": attributes}

    return encode


def save_weights(estimator, path) -> None:
    """Write a fitted model as weights and settings only: no pickle, no code.

    The file is a zip (``.npz``) of one ``.npy`` array per fitted array (``coef_``,
    ``classes_``, the structure's fitted arrays, named by their path, e.g.
    ``model.coef_``) and ``settings.json``: the format's name and version, and the model
    as nested objects ``{"object": class name, "attributes": {...}}`` whose arrays are
    ``{"array": name}`` (parameters, fitted settings, a vectorizer's vocabulary). The fit
    state kept for warm starts is left out: a warm start after :func:`load_weights` fits
    afresh.

    Parameters
    ----------
    estimator : estimator or Pipeline
        A fitted learner, denoiser, structure or transformer of :data:`WEIGHTS_CLASSES`, or
        a :class:`~sklearn.pipeline.Pipeline` of them. A :class:`~pmap_sklearn.TwoStageCRF`
        whose stage one is not ``LogisticRegression``, a
        :class:`~pmap_sklearn.NodeTransformer` of another transformer than scikit-learn's
        scalers, and a solver of your own are refused by name: share them with ``skops.io``.
    path : str or path-like
        The file to write (``.npz`` by convention).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.
    TypeError
        If the model holds an object the format does not rebuild (named by its path).

    See Also
    --------
    load_weights : Read the file back.
    trusted_types : The types to trust when sharing with ``skops.io`` instead.

    Examples
    --------
    >>> import tempfile, os
    >>> from pmap_sklearn import ChainCRF
    >>> from pmap_sklearn.datasets import make_chain_data
    >>> from pmap_sklearn.persistence import load_weights, save_weights
    >>> data = make_chain_data(n_samples=20, random_state=0)
    >>> model = ChainCRF().fit(data.data, data.target)
    >>> path = os.path.join(tempfile.mkdtemp(), "tagger.npz")
    >>> save_weights(model, path)
    >>> loaded = load_weights(path)
    >>> all((a == b).all() for a, b in zip(loaded.predict(data.data), model.predict(data.data)))
    True
    """
    check_is_fitted(estimator)
    arrays: dict = {}
    node = _encoder(arrays)(estimator, "model")
    settings = {"format": FORMAT, "version": VERSION, "model": node}
    from . import __version__

    settings["pmap_sklearn"] = __version__
    with zipfile.ZipFile(os.fspath(path), "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("settings.json", json.dumps(settings, indent=1))
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(f"{name}.npy", buffer.getvalue())


def _decoder(arrays, path):
    classes = {}

    def cls_of(name):
        if name not in WEIGHTS_CLASSES:
            raise ValueError(
                f"{path} names the class {name!r}, which load_weights does not rebuild (it "
                "rebuilds the classes of pmap_sklearn.persistence.WEIGHTS_CLASSES)"
            )
        if name not in classes:
            classes[name] = _resolve(WEIGHTS_CLASSES[name])
        return classes[name]

    def decode(node):
        if node is None or isinstance(node, bool | int | float | str):
            return node
        if isinstance(node, list):
            return [decode(v) for v in node]
        if not isinstance(node, dict) or len(node) not in (1, 2):
            raise ValueError(f"{path}: settings.json holds an entry of no known kind: {node!r}")
        kind, value = next(iter(node.items()))
        if kind == "array":
            if value not in arrays.files or value == "settings.json":
                raise ValueError(f"{path} has no array {value!r} that settings.json names")
            return arrays[value]
        if kind == "float":
            return float(value)
        if kind == "object_array":
            items = [decode(v) for v in value]
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out
        if kind in ("dtype", "scalar_type"):
            dtype = np.dtype(str(value))
            if dtype.kind not in "biufcUSMm":
                raise ValueError(f"{path}: settings.json names the dtype {value!r}, not plain data")
            return dtype if kind == "dtype" else dtype.type
        if kind == "tuple":
            return tuple(decode(v) for v in value)
        if kind == "dict":
            return {str(k): decode(v) for k, v in value.items()}
        if kind == "pairs":
            return {_hashable(decode(k)): decode(v) for k, v in value}
        if kind in ("generator", "random_state"):
            state = decode(value)
            name = state.get("bit_generator") if isinstance(state, dict) else None
            if name not in _BIT_GENERATORS:
                raise ValueError(f"{path}: settings.json names the bit generator {name!r}")
            if kind == "random_state":
                generator = np.random.RandomState()
                generator.set_state(state)
                return generator
            bits = getattr(np.random, name)()
            bits.state = state
            return np.random.Generator(bits)
        if kind == "function" and value in _FUNCTIONS:
            return _resolve(_FUNCTIONS[value])
        if kind == "object":
            cls = cls_of(value)
            attributes = node.get("attributes", {})
            bad = [k for k in attributes if not k.isidentifier() or k.startswith("__")]
            if bad:
                raise ValueError(f"{path}: {value} has attribute names not allowed: {bad}")
            obj = cls.__new__(cls)
            vars(obj).update({k: decode(v) for k, v in attributes.items()})
            return obj
        raise ValueError(f"{path}: settings.json holds an entry of no known kind: {kind!r}")

    return decode


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, list | tuple) else value


def load_weights(path):
    """Read a model written by :func:`save_weights`, without running any code it holds.

    The arrays are read with ``numpy.load(allow_pickle=False)``; the objects are rebuilt
    from their class names, of :data:`WEIGHTS_CLASSES` only, and their data attributes.

    Parameters
    ----------
    path : str or path-like
        A file of :func:`save_weights`.

    Returns
    -------
    estimator : estimator or Pipeline
        The fitted model; it predicts as the one saved.

    Raises
    ------
    ValueError
        If the file is not a weights file of this library (not a zip, no ``settings.json``,
        another format), has another version of the format, or names a class outside
        :data:`WEIGHTS_CLASSES`.

    See Also
    --------
    save_weights : Write the file.
    """
    name = os.fspath(path)
    try:
        with zipfile.ZipFile(name) as archive:
            settings = json.loads(archive.read("settings.json"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{name} is not a weights file of pmap_sklearn.persistence.save_weights (a zip "
            f"with a settings.json): {error}"
        ) from None
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise ValueError(
            f"{name} is not a weights file of pmap_sklearn.persistence.save_weights: its "
            f"settings.json has no format {FORMAT!r}"
        )
    if settings.get("version") != VERSION:
        raise ValueError(
            f"{name} is in version {settings.get('version')!r} of the weights format; this "
            f"release of pmap_sklearn reads version {VERSION}: save the model again with it, "
            f"or load it with pmap_sklearn {settings.get('pmap_sklearn', '?')}"
        )
    with np.load(name, allow_pickle=False) as arrays:
        return _decoder(arrays, name)(settings["model"])
