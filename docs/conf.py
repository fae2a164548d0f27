"""Sphinx configuration of the pmap_sklearn documentation.

Build: ``python -m pip install ".[docs]" && python -m sphinx -W -b html docs docs/_build/html``.
"""

import importlib.metadata
import re
import shutil
import sys
from pathlib import Path

from threadpoolctl import threadpool_limits

import pmap_sklearn
from pmap_sklearn.datasets._paths import candidate_roots

# The gallery runs its examples in this process: one BLAS thread each. The examples' products
# are small, and on a busy machine OpenBLAS's second thread spins instead of helping (a
# logistic regression of the scene example: 14 CPU-s with two threads, 2.1 s with one).
threadpool_limits(1)

project = "pmap_sklearn"
author = "the pmap_sklearn developers"
copyright = "2026, the pmap_sklearn developers"
release = version = pmap_sklearn.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = [
    "_build",
    "results",
    "auto_examples/*.ipynb",
    "**.py",
    "**.zip",
    "user_guide/generated_*.rst",
]
templates_path = ["_templates"]

autosummary_generate = True
autodoc_default_options = {"inherited-members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# The public API's docstrings are checked: every parameter documented and typed, a Returns
# section wherever something is returned.
numpydoc_validation_checks = {"PR01", "PR02", "PR04", "RT01"}
numpydoc_validation_exclude = {
    r"\.get_params$",
    r"\.set_params$",
    r"\.set_\w+_request$",
    r"\.get_metadata_routing$",
    r"\.fit_transform$",
    r"\.set_output$",
    r"\.__init__$",
    r"\.__call__$",
    # enumerations: their "parameters" are Enum's functional API
    r"\.(PairwiseKind|PairwiseTerms|GraphKind)$",
}


def _skip_scikit_learn_members(app, what, name, obj, skip, options):
    """Leave out what the estimators inherit from scikit-learn (metadata routing, get_params…):
    scikit-learn documents it, and its docstrings refer to scikit-learn's own glossary."""
    module = getattr(obj, "__module__", None) or ""
    return True if module.startswith("sklearn") else None


def _write_solver_table() -> None:
    """The capabilities table of every registered solver, from the solvers' own declarations
    (included by the user guide's solver page, so it cannot drift from the code)."""
    from pmap_sklearn.solvers import SOLVERS

    columns = [
        ("name", "solver="),
        ("max_states", "K"),
        ("pairwise", "pairwise kinds"),
        ("terms", "pairwise terms"),
        ("graphs", "graphs"),
        ("clamps", "clamps"),
        ("marginals", "marginals"),
        ("beliefs", "belief sessions"),
        ("marginal_map", "marginal MAP"),
        ("group_max", "group maxima"),
        ("k_best", "k-best"),
        ("map_quality", "MAP"),
    ]
    lines = [".. list-table::", "   :header-rows: 1", ""]
    lines.append("   * - " + "\n     - ".join(title for _, title in columns))
    for name, solver in SOLVERS.items():
        row = {"name": f"``{name!r}``", **solver.capabilities.row()}
        lines.append("   * - " + "\n     - ".join(row[key] for key, _ in columns))
    target = Path(__file__).parent / "user_guide" / "generated_solver_table.rst"
    text = "\n".join(lines) + "\n"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


def setup(app):
    app.connect("autodoc-skip-member", _skip_scikit_learn_members)
    app.connect("build-finished", _bundle_mathjax)
    app.connect("build-finished", _refuse_remote_assets)
    _write_solver_table()


# Formulas render with no network: MathJax 3 (the TeX-to-HTML component, its fonts and the TeX
# extensions it loads on demand) is copied into the built site from the sphinx-mathjax-offline
# wheel (a docs dependency fetched by pip), and the build fails if a page loads a script or a
# style sheet from outside the site.
mathjax_path = "mathjax/tex-chtml.js"
_MATHJAX_PARTS = ["tex-chtml.js", "input", "output/chtml", "ui", "a11y"]


def _bundle_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source = Path(
        importlib.metadata.distribution("sphinx-mathjax-offline").locate_file(
            "sphinx-mathjax-offline/static/mathjax"
        )
    )
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in _MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


_TAG = re.compile(r"<(script|link)\b[^>]*>", re.I)
_REMOTE_URL = re.compile(r"""\s(?:src|href)=["']?(?:https?:)?//""", re.I)
_LOADED_LINK = re.compile(r"""rel=["']?(?:stylesheet|preload|modulepreload)""", re.I)


def _refuse_remote_assets(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    remote = set()
    for page in Path(app.outdir).rglob("*.html"):
        for tag in _TAG.finditer(page.read_text(encoding="utf-8")):
            loads = tag.group(1).lower() == "script" or _LOADED_LINK.search(tag.group(0))
            if loads and _REMOTE_URL.search(tag.group(0)):
                remote.add(f"{page.relative_to(app.outdir)}: {tag.group(0)}")
    if remote:
        raise RuntimeError("pages load assets from outside the site: " + "; ".join(sorted(remote)))


myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = "pmap_sklearn"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    # the gallery's pages have no sections to list: their code gets the room (100 columns);
    # named one by one (a wildcard would also match "**")
    "secondary_sidebar_items": {
        "**": ["page-toc", "sourcelink"],
        "auto_examples/index": [],
        **{
            f"auto_examples/{example.stem}": []
            for example in (Path(__file__).parent.parent / "examples").glob("plot_*.py")
        },
    },
}
html_static_path = ["_static"]
html_css_files = ["custom.css"]
# long names wrap where a word ends (after "_" or ".", before a capital), never mid-word
html_js_files = ["wrap_names.js"]
# "On this page" lists an API page's methods by their own names (calibrate_marginals()), not
# prefixed with the class's
toc_object_entries_show_parents = "hide"
# pages with no sub-pages have nothing to show in the left sidebar
html_sidebars = {"getting_started": [], "api": []}

# Examples on the shared data (OCR, horses, treebank, CoNLL-2002, CamVid, Mulan's multi-label
# sets) leave the gallery without it.
_NEEDS = {
    "plot_ocr_words": "ocr/letter.data.gz",
    "plot_horse_segmentation": "weizmann_horse/rgb",
    "plot_semi_supervised": "weizmann_horse/rgb",
    "plot_region_confidence": "weizmann_horse/rgb",
    "plot_pos_tagging": "ud_english_ewt/en_ewt-ud-train.conllu.gz",
    "plot_named_entities": "conll2002/esp.train.gz",
    "plot_crfsuite_tutorial": "conll2002/esp.train.gz",
    "plot_sparse_l1": "conll2002/esp.train.gz",
    "plot_active_learning": "conll2002/esp.train.gz",
    "plot_tag_uncertainty": "conll2002/esp.train.gz",
    "plot_token_embeddings": "conll2002/esp.train.gz",
    "plot_scene_segmentation": "camvid/testannot",
    "plot_multilabel_classification": "multilabel/scene-train.arff.gz",
}
_MISSING = [
    name
    for name, relative in _NEEDS.items()
    if not any((root / relative).exists() for root in candidate_roots())
]
if _MISSING:
    print(f"shared data not found: the gallery leaves out {', '.join(_MISSING)}", file=sys.stderr)

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"demo\.py" + "".join(rf"|{name}\.py" for name in _MISSING),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "show_memory": False,
    # its page of timings loads DataTables from a CDN
    "write_computation_times": False,
}
