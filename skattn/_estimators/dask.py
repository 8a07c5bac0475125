"""Dask collections: lazy blocked outputs and training streamed through Adam.

The estimators' methods hand a dask collection to this module in one line
(``if is_dask_collection(X): return ...``); everything else in skattn works on
numpy arrays and lists. dask is imported inside the functions, never when
skattn is imported: :func:`is_dask_collection` recognises a collection without
importing dask, which cannot have made one if it is not in ``sys.modules``.

Outputs. ``transform``, ``transform_sequences``, ``attention_weights`` and
the predictions of a dask array chunked along the samples are
:func:`dask.array.map_blocks` of the in-memory method: one task per block,
which runs the method on that block (in batches within ``working_memory``) on
whichever worker holds it. A dask bag of ragged sequences gives a bag of each
sequence's result, one call of the method per partition.

Training. ``fit`` and ``partial_fit`` of a dask array are ``partial_fit`` of
one block after another, as dask-ml's ``Incremental``: Adam is sequential, so
the blocks are too. Each step is one small dask computation: the block is
produced on a worker (read, generated or computed there), the step runs on
that worker, and the model (parameters and Adam's moments, kilobytes to a few
megabytes) returns to the client, which sends it with the next block's step.
The client never holds a block, and the cluster holds the block of the step
under way, not the data set (one graph for a whole epoch, as dask-ml builds,
let idle workers load every block ahead of the chain).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import math
import sys
import warnings

import numpy as np
from sklearn import config_context, get_config
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from .._input.validation import _get_output_config
from .._training.adam import resolve_patience, warn_if_diverged
from .._training.state import History


def is_dask_collection(X):
    """Whether ``X`` is a dask collection (array, bag, dataframe, delayed).

    Never imports dask: without dask in ``sys.modules`` no collection exists.
    """
    if "dask" not in sys.modules:
        return False
    from dask.base import is_dask_collection as _is_dask_collection

    return _is_dask_collection(X)


def _sklearn_config():
    """scikit-learn's configuration of the caller, for the tasks on the workers.

    A worker is another process (or thread): ``working_memory`` set with
    ``sklearn.config_context`` around the call would not reach it, as
    :class:`sklearn.utils.parallel.Parallel` forwards it to joblib's workers.
    Per-block outputs stay numpy arrays (``transform_output="default"``).
    """
    return {**get_config(), "transform_output": "default"}


# Outputs, block by block
# -----------------------


def blocked_outputs(est, method, X, **kwargs):
    """Lazy ``getattr(est, method)(X, **kwargs)`` of a dask array or bag.

    Parameters
    ----------
    est : fitted estimator
        Copied: the lazy result computes with the model fitted at this call,
        whatever later fits change.
    method : str
        The in-memory method to run on each block (``"transform"``, ...).
    X : dask.array.Array or dask.bag.Bag
        A 2D (table) or 3D array chunked along the samples only, or a bag of
        sequences of shape (n_tokens_i, n_features).
    **kwargs
        Passed to the method (``layer``, ``max_bytes``).

    Returns
    -------
    dask.array.Array or dask.bag.Bag
        For an array, an array with X's chunks along the samples and one
        chunk along each other axis, of the in-memory result's dtype; for a
        bag, a bag of the result of each sequence, in order.
    """
    import dask
    import dask.array as da
    import dask.bag as db

    check_is_fitted(est)
    _check_default_output(est, method)
    est = copy.deepcopy(est)
    # one copy of the model in the graph, shared by its tasks
    model = dask.delayed(est, pure=True)
    if isinstance(X, db.Bag):
        return X.map_partitions(
            _partition_outputs, model, method, kwargs, _sklearn_config()
        )
    _check_array(X, f"{type(est).__name__}.{method}")
    # one sequence of zeros gives the result's shape beyond the samples and
    # its dtype, and checks X's width and length against fit's now, not at
    # compute time
    probe = getattr(est, method)(np.zeros((1, *X.shape[1:]), dtype=X.dtype), **kwargs)
    n_axes = probe.ndim
    extra = {}
    if n_axes < X.ndim:
        extra["drop_axis"] = list(range(n_axes, X.ndim))
    elif n_axes > X.ndim:
        extra["new_axis"] = list(range(X.ndim, n_axes))
    return da.map_blocks(
        _block_outputs,
        X,
        model,
        method,
        kwargs,
        _sklearn_config(),
        probe[:0],
        chunks=(X.chunks[0], *((n,) for n in probe.shape[1:])),
        dtype=probe.dtype,
        meta=probe[:0],
        **extra,
    )


def _block_outputs(block, est, method, kwargs, config, empty):
    """The method on one block (a task on a worker); ``empty`` for a block of
    no sample."""
    if len(block) == 0:
        return empty
    with config_context(**config):
        return getattr(est, method)(block, **kwargs)


def _check_default_output(est, method):
    """Refuse ``set_output`` containers for a lazy transform: a DataFrame of
    pandas or polars holds its data in memory."""
    if method != "transform":
        return
    container = _get_output_config("transform", est)["dense"]
    if container != "default":
        raise ValueError(
            f"{type(est).__name__}.transform of a dask array is a lazy dask array, "
            f"and set_output(transform={container!r}) (of the estimator or "
            "sklearn.set_config) asks for an in-memory DataFrame. Compute X first "
            "(X.compute()), or keep the output lazy: est.set_output("
            "transform='default'), then dask.dataframe.from_dask_array(est."
            "transform(X), columns=est.get_feature_names_out())."
        )


def _partition_outputs(partition, est, method, kwargs, config):
    """The method on one partition of a bag: a list of per-sequence results."""
    sequences = list(partition)
    if not sequences:
        return []
    with config_context(**config):
        return list(getattr(est, method)(sequences, **kwargs))


def _check_array(X, call, *, bags=True):
    """A dask array of sequences or a table, chunked along the samples only
    (``bags``: the caller reads dask bags too, for the message).

    Raises
    ------
    TypeError
        For another dask collection (a dataframe, a delayed object).
    ValueError
        For an array of another dimension, or chunked along a token or
        feature axis: a sequence must be whole in one block, and rechunking it
        is an all-to-all exchange of the data, which skattn leaves to the user
        to ask for.
    """
    import dask.array as da

    if not isinstance(X, da.Array):
        import dask.bag as db

        if isinstance(X, db.Bag) and not bags:
            raise TypeError(
                f"{call} streams the blocks of a dask array through Adam and "
                "cannot train on a dask bag. Fit on its sequences in memory "
                "(X.compute(), a list of arrays), or on a 3D dask array of "
                "sequences of one length; a fitted model transforms and "
                "predicts a bag."
            )
        reads = "dask arrays chunked along the samples"
        if bags:
            reads += " and dask bags of sequences"
        raise TypeError(
            f"{call} reads {reads}; got {type(X).__module__}.{type(X).__name__}. "
            "Convert a dask dataframe with .to_dask_array(lengths=True)."
        )
    if X.ndim not in (2, 3):
        raise ValueError(
            f"{call} reads a 2D dask array (a table) or a 3D one (sequences); got "
            f"{X.ndim} dimension(s), shape {X.shape}. Ragged sequences go in a "
            "dask bag, one array of shape (n_tokens_i, n_features) per element."
        )
    split = [axis for axis in range(1, X.ndim) if len(X.chunks[axis]) > 1]
    if split:
        whole = ", ".join(f"{axis}: -1" for axis in range(1, X.ndim))
        raise ValueError(
            f"{call} needs a dask array chunked along the samples (axis 0) only: "
            "each block must hold whole sequences. Got "
            f"{len(X.chunks[split[0]])} chunks along axis {split[0]} (chunks "
            f"{X.chunks[split[0]]}). Rechunk with X.rechunk({{{whole}}})."
        )


# Training, block by block
# ------------------------


def blocked_fit(
    est, X, y, sample_weight, *, incremental, classes=None, X_val=None, y_val=None
):
    """``fit`` or ``partial_fit`` of a dask array: Adam streamed over its blocks.

    ``fit``: ``max_iter`` epochs, each a ``partial_fit`` of every block in an
    order permuted from ``random_state`` (with ``shuffle``), starting afresh
    (or from the fitted weights with ``warm_start``, Adam's moments afresh).
    ``partial_fit``: one pass over the blocks in their order. Each
    ``partial_fit`` shuffles the rows of its block.

    Returns
    -------
    fitted : dict
        The fitted state for ``est`` (see :meth:`BaseAttention._adopt`): that
        of a working copy trained on the blocks, its history counting epochs
        (``n_iter_``) with one loss per epoch (``loss_curve_``): the blocks'
        losses weighted by their summed sample weight.
    fresh : bool
        Whether the fit started afresh (the former fitted state goes).
    """
    name = type(est).__name__
    call = f"{name}.{'partial_fit' if incremental else 'fit'}"
    _check_array(X, call, bags=False)
    if est.solver != "adam":
        raise ValueError(
            f"{call} of a dask array streams its blocks through Adam, and "
            f"solver={est.solver!r} cannot stream: L-BFGS takes the gradient of "
            "the whole data set at every step and line search. Use solver='adam', "
            "or compute X into memory."
        )
    if X_val is not None or y_val is not None:
        raise ValueError(
            f"{call} of a dask array takes no X_val and y_val: it cannot hold a "
            "validation set out of the stream. Pass early_stopping=False."
        )
    if est.early_stopping is True and not incremental:
        raise ValueError(
            f"{call} of a dask array cannot stop early on a validation score: it "
            "would hold out and score a validation split of the stream every "
            "epoch. Set early_stopping=False (or 'auto', off for dask arrays); "
            "training still stops when the training loss has not improved by tol "
            "for n_iter_no_change epochs."
        )
    n_blocks = len(X.chunks[0])
    if any(math.isnan(n) for n in X.chunks[0]):
        raise ValueError(
            f"{call} needs the chunk sizes of X along the samples; they are "
            "unknown (nan). Call X.compute_chunk_sizes() first."
        )
    if y is None and est.objective in ("classification", "regression"):
        raise ValueError(
            f"{name} requires y to be passed, but the target y is None "
            f"(objective={est.objective!r})."
        )
    y_blocks = _aligned(y, X, "y", call)
    weight_blocks = _aligned(sample_weight, X, "sample_weight", call)
    blocks = [index for index, n in enumerate(X.chunks[0]) if n]  # not empty
    if not blocks:
        raise ValueError(f"{call}: X has no samples (shape {X.shape}).")

    fitted = hasattr(est, "_fitted")
    fresh = not fitted or not (est.warm_start or incremental)
    work = clone(est) if fresh else copy.deepcopy(est)
    if not fresh and not incremental:
        # fit with warm_start: Adam's moments start afresh, as in memory
        work.discard_optimizer_state()
    objective, labels = _objective(est, y, y_blocks, fresh)
    if objective == "classification" and classes is None and fresh:
        # partial_fit needs every class at its first call
        classes = np.unique(labels)
    if objective is not None and "objective" in work.get_params():
        # each block's partial_fit learns the objective of the whole y, not of its
        # own block's targets (whole numbers in one block of a continuous y)
        work.set_params(objective=objective)
    if objective is None:  # nothing is learned: the model is seeded on one block
        work = _fit_step(work, X.blocks[blocks[0]], None, None, None, False)
        return _fitted_state(work, work._fitted), fresh

    block_weights = np.asarray(X.chunks[0], dtype=np.float64)
    if sample_weight is not None:
        block_weights = np.array(
            [
                _block_sum(w) if n else 0.0
                for w, n in zip(weight_blocks, X.chunks[0], strict=True)
            ]
        )
    n_epochs = 1 if incremental else est.max_iter
    n_iter_no_change = resolve_patience(est.n_iter_no_change, validating=False)
    orders = [np.arange(n_blocks)] * n_epochs
    if not incremental and est.shuffle:
        orders = block_orders(est.random_state, n_blocks, n_epochs)
    sizes = np.asarray(X.chunks[0])
    orders = [order[sizes[order] > 0] for order in orders]  # no empty block
    stopped = False
    # one entry of the history per epoch, not one per block's partial_fit
    history = work._fitted.history.copy() if not fresh else History()
    for order in orders:
        n_losses = len(work.loss_curve_) if hasattr(work, "_fitted") else 0
        t = work.t_ if hasattr(work, "_fitted") else 0
        for index in order:
            work = _fit_step(
                work,
                X.blocks[index],
                y_blocks[index],
                weight_blocks[index],
                classes,
                True,
            )
        losses = np.asarray(work.loss_curve_[n_losses:])
        weights = block_weights[order]
        loss = float(np.sum(losses * weights) / np.sum(weights))
        history.end_epoch(loss, work.t_ - t, est.tol)
        if not incremental and history.no_improvement_count > n_iter_no_change:
            stopped = True
            break
    if not incremental and not stopped:
        warnings.warn(
            f"Stochastic optimizer: maximum iterations ({est.max_iter}) reached "
            "and the optimization hasn't converged yet.",
            ConvergenceWarning,
            stacklevel=3,
        )
    if not incremental:
        learning_rate = work._fitted.optimizer_state["learning_rate_init"]
        warn_if_diverged(history, learning_rate, stacklevel=4)
    return _fitted_state(work, work._fitted.replace(history=history)), fresh


def block_orders(random_state, n_blocks, n_epochs):
    """The block order of each epoch of ``fit`` on a dask array (with shuffle).

    Parameters
    ----------
    random_state : int, RandomState instance or None
        The estimator's ``random_state``.
    n_blocks, n_epochs : int
        Blocks along the samples, and epochs.

    Returns
    -------
    list of ndarray of int
        The permutation of the blocks of each epoch, in order: from a random
        stream of their own, so that ``partial_fit``'s draws (row shuffles,
        dropout) are those of the same blocks passed in memory.
    """
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    rng = np.random.RandomState(seed)
    return [rng.permutation(n_blocks) for _ in range(n_epochs)]


def _fit_step(est, x, y, sample_weight, classes, incremental):
    """One ``partial_fit`` (or seeding ``fit``) of one block, on a worker."""
    import dask

    step = dask.delayed(_fit_block, pure=False)
    (est,) = dask.compute(
        step(est, x, y, sample_weight, classes, incremental, _sklearn_config())
    )
    return est


def _fit_block(est, x, y, sample_weight, classes, incremental, config):
    """The task of :func:`_fit_step`: the estimator, trained on the block."""
    with config_context(**config):
        if not incremental:
            return est.fit(x)
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        if classes is not None:
            kwargs["classes"] = classes
        return est.partial_fit(x, y, **kwargs)


def _block_sum(weights):
    """The sum of a block of weights, computed where the block is."""
    import dask

    return float(dask.compute(weights.sum())[0])


def _aligned(values, X, name, call):
    """The blocks of ``values`` (None, an array or a dask array) along X's."""
    import dask.array as da

    n_blocks = len(X.chunks[0])
    if values is None:
        return [None] * n_blocks
    if not isinstance(values, da.Array):
        values = np.asarray(values)
    if values.ndim == 0 or values.shape[0] != X.shape[0]:
        n_values = values.shape[0] if values.ndim else "a scalar"
        raise ValueError(
            f"{call}: X has {X.shape[0]} samples but {name} has {n_values}."
        )
    if not isinstance(values, da.Array):
        values = da.from_array(values, chunks=(X.chunks[0], *values.shape[1:]))
    # the same rows as X's blocks (a 1-D array rechunks cheaply)
    values = values.rechunk({0: X.chunks[0], **{a: -1 for a in range(1, values.ndim)}})
    return [values.blocks[index] for index in range(n_blocks)]


def _as_1d(y):
    """A column vector of labels as a 1-D dask array."""
    return y[:, 0] if y.ndim == 2 else y


def _objective(est, y, y_blocks, fresh):
    """What the estimator learns from y, as ``check_target`` decides it for
    the whole y in memory, and y's labels (None when they are not needed).

    The targets are small beside X (one number per sample): they are
    computed once, here, when the objective or the classes depend on them.
    """
    import dask.array as da

    if est.objective is None or y is None:
        return None, None
    if est.objective == "regression" or (est.objective != "auto" and not fresh):
        return est.objective, None
    labels = np.asarray(da.concatenate(y_blocks).compute())
    if est.objective == "classification":
        return "classification", _as_1d(labels)
    kind = type_of_target(labels, input_name="y")
    objective = "classification" if kind in ("binary", "multiclass") else "regression"
    return objective, _as_1d(labels)


def _fitted_state(work, fitted):
    """The fitted attributes of the working copy ``work`` (not its
    parameters), with ``fitted`` as its fitted model."""
    parameters = work.get_params(deep=False)
    state = {key: value for key, value in vars(work).items() if key not in parameters}
    return {**state, "_fitted": fitted}
