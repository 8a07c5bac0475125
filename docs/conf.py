"""Sphinx configuration of the skattn documentation site.

Build the whole site, every gallery example executed, warnings as errors (what
CI builds, in an environment with the ``[docs]`` extra only):

    python -m sphinx -W -b html docs docs/_build/html

``SKATTN_DOCS_GALLERY=none`` executes no example (their pages then show no
output), for work on the text. Nothing here reads the network: no
intersphinx, so references to scikit-learn, numpy or torch render as plain
names.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import os
import re
import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the checkout, whatever skattn is installed.
sys.path.insert(0, str(ROOT))
# Every example draws off-screen, also outside sphinx-gallery's scraper.
os.environ.setdefault("MPLBACKEND", "Agg")

import skattn  # noqa: E402

# -- Project -----------------------------------------------------------------

project = "skattn"
author = "The skattn developers"
copyright = "The skattn developers"  # noqa: A001
release = skattn.__version__
version = re.match(r"\d+\.\d+", release).group()

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"
default_role = "literal"  # `x` in a page reads as ``x``, never as a reference
# an API page's "On this page" lists its methods as fit(), not as
# AttentionTransformer.fit(): the class is the page's title
toc_object_entries_show_parents = "hide"
pygments_style = "sphinx"

# -- API reference: autosummary and numpydoc ----------------------------------

autosummary_generate = True  # writes docs/generated/*.rst (git-ignored)
autodoc_default_options = {"members": True, "inherited-members": True}
autodoc_typehints = "none"
# The class template lists the methods; numpydoc renders each docstring's
# sections (Parameters, Attributes, Examples...) without a second member table.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# Checks of numpydoc's validator that the public docstrings must pass: a
# missing or unknown section and parameters that do not match the signature.
numpydoc_validation_checks = {"PR01", "PR02", "PR03", "GL08"}
numpydoc_validation_exclude = {
    r"\.__init__$",
    r"\.set_\w+_request$",  # written by scikit-learn's metadata routing
    r"\.get_metadata_routing$",
}

# -- Gallery -----------------------------------------------------------------

# Every example is executed, one at a time, so that each page shows its output
# and the times it prints are those of one process on the machine. The
# [docs] extra holds what they import (dask for plot_dask_cluster); plot_text
# runs its pretrained-encoder part only with the [text] extra, and says so.
_GALLERY = os.environ.get("SKATTN_DOCS_GALLERY", "all").strip().lower()
if _GALLERY == "all":
    _filename_pattern = r"\.py$"  # every example, not only plot_*.py
elif _GALLERY == "none":
    _filename_pattern = r"^$"
else:
    raise ValueError(f"SKATTN_DOCS_GALLERY must be 'all' or 'none', got {_GALLERY!r}.")

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": _filename_pattern,
    "within_subsection_order": "FileNameSortKey",
    # a failing example fails the build, at once
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    # "Examples using X" under each API page
    "doc_module": ("skattn",),
    "backreferences_dir": "generated/backreferences",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "remove_config_comments": True,
    "show_memory": False,
    "download_all_examples": False,
    "min_reported_time": 1,
    "parallel": False,
    # No BLAS limit here: skattn already runs BLAS on one thread inside its
    # calls and spreads batches over the cores that limit allows, so a limit of
    # one would only make the examples (and their printed times) single-core.
}

# sphinx-gallery executes the examples in this process: a warning an example
# prints is shown on its page, but must not reach Sphinx's -W.
warnings.filterwarnings(
    "ignore",
    category=UserWarning,
    message="Matplotlib is currently using agg, which is a non-GUI backend",
)

# -- HTML --------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"skattn {release}"
# docs/_static/skattn.css: the sidebars wrap long names (methods, classes of
# the API pages) instead of cutting them
html_static_path = ["_static"]
html_css_files = ["skattn.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
    # the theme must fetch nothing at build time: no version switcher, no
    # icon links to external pages
    "icon_links": [],
}
html_context = {"default_mode": "light"}

# -- Inherited scikit-learn docstrings -----------------------------------------

# get_params, set_output, set_fit_request... come from scikit-learn, whose
# docstrings cross-reference scikit-learn's own pages (:ref:, :term:). Without
# intersphinx those targets do not exist here: keep their text, drop the link.
_SKLEARN_ROLE = re.compile(r":(ref|term|doc):`([^`<]*?)\s*(<[^`>]*>)?`")


def _sklearn_reference_text(match):
    """A term or a titled link keeps its text; a bare label names the source."""
    role, text, target = match.groups()
    if role == "term" or target:
        return text
    return "scikit-learn's documentation"


def _unlink_sklearn_references(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or ""
    if not module.startswith("sklearn"):
        return
    for index, line in enumerate(lines):
        lines[index] = _SKLEARN_ROLE.sub(_sklearn_reference_text, line)


def setup(app):
    # before numpydoc (priority 500) parses the docstring
    app.connect("autodoc-process-docstring", _unlink_sklearn_references, priority=400)
