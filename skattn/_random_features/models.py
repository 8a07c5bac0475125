"""The models of RandomAttentionFeatures: drawn from their seeds, and built.

Each model draws from a seed of its own its configuration (one value of each
parameter's candidates, ``configs.py``), its seeded weights and the levels of
its thresholds (:func:`draw_models`); a configuration and its weights, an
entry of ``models_`` and ``weights_``, build the model (:func:`build_models`,
through its :class:`~skattn._model.model.ModelConfig`, :func:`model_config`;
once per fit, ``fitted.py``); the thresholds of the PPV and LSPV are quantiles of the
models' outputs on a sample of the training sequences (:func:`thresholds`).
Values and arrays in, lists and arrays out: the estimator is in
``estimator.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from .._model.model import ModelConfig, build_model
from .._model.options import band_config
from .configs import MODEL_POOLING, draw_band, stride_of
from .runner import COMPUTE_DTYPE, model_width, output_quantiles

# "ppv" and "lspv" (THRESHOLDED): each feature of a model is compared with
# thresholds, quantiles of its outputs on training data at levels drawn
# uniformly from THRESHOLD_LEVELS (MiniRocket's range for its biases), over
# THRESHOLD_SAMPLES training sequences and at most THRESHOLD_TOKENS of their
# tokens each on average.
THRESHOLD_LEVELS = (0.25, 0.75)
THRESHOLD_SAMPLES = 16
THRESHOLD_TOKENS = 32


def draw_models(
    rng, n_models, candidates, band, n_features, n_tokens, median, n_thresholds
):
    """Each model's configuration, weights and levels of its thresholds.

    Model ``m`` depends only on the ``m``-th seed drawn from ``rng``, so
    that a larger ``n_models`` adds models after the same first ones.

    Parameters
    ----------
    rng : RandomState
        The estimator's ``random_state``, checked.
    n_models : int
        Number of models.
    candidates : dict
        The values each parameter of a configuration draws from, ``"auto"``
        resolved (see ``configs.py``).
    band : (windows, dilations)
        The candidates of the band (:func:`~.configs.band_candidates`);
        ``windows == [None]``: full attention.
    n_features : int
        Features of a token of X.
    n_tokens : int
        Tokens of a table (1 for sequences).
    median : float or None
        The median length of series (None for a table).
    n_thresholds : int
        Thresholds per feature of a model.

    Returns
    -------
    models : list of dict
        The configurations (``models_``).
    weights : list of dict
        The seeded float32 weights, nested (``weights_``).
    levels : list of ndarray of shape (n_thresholds, d_model)
        The quantile levels of each model's thresholds.
    """
    windows, dilations = band
    seeds = rng.randint(np.iinfo(np.int32).max, size=n_models)
    models, weights = [], []
    levels = []  # of the thresholds of each model
    for seed in seeds:
        model_rng = np.random.RandomState(seed)
        config = {
            name: values[model_rng.randint(len(values))]
            for name, values in candidates.items()
        }
        config["patch_stride"] = stride_of(config, median)
        model = build_model(model_config(config, n_features, n_tokens))
        params = model.init_params(model_rng, COMPUTE_DTYPE)
        # variance 1 / n_features instead of Glorot's 2 / (n_features + E):
        # a standardised token's projection has unit variance, as large as
        # the positions (0.5); with Glorot's, a scalar token (n_features=1)
        # drowned in them
        n_features_in = params["input"].shape[0]
        d_model = config["n_heads"] * config["head_dim"]
        params["input"] *= np.sqrt((n_features_in + d_model) / (2 * n_features_in))
        models.append(config)
        weights.append(model.nest(params))
        # drawn after the weights: the weights do not depend on the statistics
        levels.append(
            model_rng.uniform(*THRESHOLD_LEVELS, size=(n_thresholds, d_model))
        )
        if windows != [None]:  # the band last: full models draw as ever
            config.update(
                draw_band(model_rng, windows, dilations, config, median, n_tokens)
            )
    return models, weights, levels


def build_models(models, weights, n_features, n_tokens):
    """The fitted models again, as :class:`~.runner.ModelRunner` takes them.

    Parameters
    ----------
    models, weights : list of dict
        ``models_`` and ``weights_``.
    n_features : int
        Features of a token of X.
    n_tokens : int
        Tokens of a table (1 for sequences).

    Returns
    -------
    list of (model, params, difference)
        Each model, its flat weights and whether it reads the differences.
    """
    built = []
    for config, nested in zip(models, weights, strict=True):
        model = build_model(model_config(config, n_features, n_tokens))
        params, _ = model.flat_init(nested)
        built.append((model, params, config["difference"]))
    return built


def thresholds(runner, sequences, levels, sample_weight, budget):
    """Each model's thresholds (see ``thresholds_``): threshold ``k`` of
    feature ``j`` of model ``m`` at quantile ``levels[m][k, j]`` of its
    outputs on at most ``THRESHOLD_SAMPLES`` sequences of positive weight,
    evenly spread over the training set."""
    candidates = np.arange(len(sequences))
    if sample_weight is not None:
        candidates = np.flatnonzero(sample_weight > 0)
    n_picks = min(len(candidates), THRESHOLD_SAMPLES)
    picks = np.linspace(0, len(candidates) - 1, n_picks)
    rows = candidates[np.unique(picks.round().astype(int))]
    return output_quantiles(runner, sequences, rows, levels, THRESHOLD_TOKENS, budget)


def model_config(config, n_features, n_tokens):
    """The :class:`ModelConfig` of a model's drawn configuration.

    The models read tokens standardised by :class:`ModelRunner` (in the dtype
    of X), so they have no token standardisation of their own.

    Parameters
    ----------
    config : dict
        An entry of ``models_``.
    n_features : int
        Features of a token of X.
    n_tokens : int
        Tokens of a table (1 for sequences): a learned table's rows.
    """
    return ModelConfig(
        n_features=model_width(config, n_features),
        n_heads=config["n_heads"],
        d_model=config["n_heads"] * config["head_dim"],
        causal=config["causal"],
        positional_encoding=config["positional_encoding"],
        pooling=MODEL_POOLING,
        n_positions=n_tokens,
        patch_size=config["patch_size"],
        patch_stride=config["patch_stride"],
        attention_pattern=band_config(
            config.get("attention_window"), config.get("attention_dilation", 1)
        ),
    )
