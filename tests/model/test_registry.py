"""The registries of the architectural options: one list of each option's
values, read by the model, the constraints, the documentation and the check
of a fitted model's structure."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skattn import AttentionClassifier, AttentionTransformer
from skattn._estimators.resolve import fitted_structure
from skattn._model.attribution import pooling_attention
from skattn._model.model import ModelConfig, build_model
from skattn._model.options import (
    ATTENTION_PATTERNS,
    POSITIONAL_ENCODINGS,
    REGISTRIES,
)
from skattn._model.patterns import pattern_config
from skattn._model.pooling import POOLINGS, needs_fixed_length
from skattn._model.registry import Registry


@pytest.mark.parametrize("option", sorted(REGISTRIES))
def test_an_unknown_value_fails_listing_the_known_ones(option):
    config = ModelConfig(n_features=3, d_model=4, n_heads=2).replace(
        **{option: "unknown"}
    )
    known = ", ".join(repr(name) for name in REGISTRIES[option]._entries)
    message = f"{option}='unknown' is not one of the known values: {known}."
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build_model(config)


def test_a_value_registered_twice_is_refused():
    registry = Registry("kind").add("a", 1, "first.")
    with pytest.raises(ValueError, match="kind='a' is registered twice"):
        registry.add("a", 2, "again.")
    assert registry.get("a") == 1
    assert registry.choices() == '{"a"}'
    assert registry.descriptions() == ['``"a"``: first.']
    assert Registry("kind").add("a", 1, "x").add(None, None, "y").choices() == (
        '{"a"} or None'
    )


# the options whose parameter also takes "auto", resolved from the data
AUTO_OPTIONS = {"pooling"}


@pytest.mark.parametrize("estimator", [AttentionTransformer, AttentionClassifier])
@pytest.mark.parametrize("option", sorted(REGISTRIES))
def test_constraints_and_docstrings_list_every_registered_value(estimator, option):
    registry = REGISTRIES[option]
    constraint = estimator._parameter_constraints[option]
    auto = option in AUTO_OPTIONS
    assert constraint[0].options == set(registry.names()) | (
        {"auto"} if auto else set()
    )
    assert (None in constraint) == registry.allows_none()
    doc = " ".join(estimator.__doc__.split())
    after = ' or "auto",' if auto else ","
    assert f"{option} : {registry.choices()}{after}" in doc
    for line in registry.descriptions():
        assert " ".join(line.split()) in doc


@pytest.mark.parametrize("option", sorted(REGISTRIES))
def test_every_registered_option_fixes_the_fitted_structure(option):
    # a warm start or partial_fit with another value of the option is refused
    config = ModelConfig(n_features=3, d_model=4, n_heads=2)
    structure = fitted_structure(config, {"features_per_token": 1, "data_format": 0})
    assert structure[option] == getattr(config, option)


@pytest.mark.parametrize("option", sorted(REGISTRIES))
def test_every_registered_value_builds_a_model_that_runs(option):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 3))
    for name in REGISTRIES[option].names():
        config = ModelConfig(
            n_features=3, d_model=4, n_heads=2, ff_dim=5, n_positions=3
        ).replace(**{option: name})
        model = build_model(config)
        params = model.init_params(np.random.RandomState(0), np.float64)
        _, pooled, _ = model.forward(params, x, np.array([3, 2]))
        assert pooled.shape[0] == 2 and np.isfinite(pooled).all()


@pytest.mark.parametrize("pooling", POOLINGS.names())
def test_the_model_and_the_estimators_ask_the_pooling_unit(pooling):
    unit = POOLINGS.get(pooling)
    config = ModelConfig(
        n_features=3, d_model=4, n_heads=2, n_positions=5, pooling=pooling
    )
    model = build_model(config)
    assert type(model.pooling) is unit
    assert int(model.token_lengths(5)) == 5 + unit.appends_class_token
    assert needs_fixed_length(pooling) is unit.needs_fixed_length
    params = model.init_params(np.random.RandomState(0), np.float64)
    x = np.random.default_rng(0).standard_normal((2, 5, 3))
    lengths = np.array([5, 5 if unit.needs_fixed_length else 3])
    _, pooled, _ = model.forward(params, x, lengths)
    assert pooled.shape == (2, model.pooling.n_features_out)
    if not unit.attends:
        with pytest.raises(ValueError, match="has no attention over the tokens"):
            pooling_attention(model, params, x, lengths)
        return
    weights = pooling_attention(model, params, x, lengths)
    assert weights.shape == (2, 5) and np.isfinite(weights).all()
    assert_array_equal(weights[1, lengths[1] :], 0)


@pytest.mark.parametrize("kind", POSITIONAL_ENCODINGS.names())
def test_a_positional_encoding_is_trainable_when_training_changes_it(kind):
    unit = POSITIONAL_ENCODINGS.get(kind)(3, 4, 2)
    specs = unit.param_specs().values()
    assert unit.trainable == any(spec.trainable for spec in specs)


def test_every_parameter_outside_the_layers_is_a_documented_fitted_attribute():
    """A unit's parameter that lives outside ``layers_`` (``ParamSpec.attribute``)
    is a fitted attribute of the estimators, in their documentation; every
    parameter of a layer is named in the documentation of ``layers_``."""
    from skattn._estimators.attributes import PARAMETER_ATTRIBUTES

    base = ModelConfig(
        n_features=3, d_model=4, n_heads=2, ff_dim=5, n_positions=3, n_outputs=2,
        token_scale_shape=(3,), token_statistics=("mean",),
    )  # fmt: skip
    configs = [base, base.replace(vocabulary_size=5, token_scale_shape=None)]
    configs += [
        base.replace(**{option: name})
        for option, registry in REGISTRIES.items()
        for name in registry.names()
    ]
    specs = {
        name: spec
        for config in configs
        for name, spec in build_model(config).param_specs().items()
    }
    attributes = {spec.attribute for spec in specs.values()} - {None}
    layer_names = {
        name.split(".", 2)[2] for name, spec in specs.items() if spec.attribute is None
    }
    doc = AttentionClassifier.__doc__
    assert attributes <= set(PARAMETER_ATTRIBUTES)
    assert all(attribute in doc for attribute in attributes)
    assert all(f'``"{name}"``' in doc for name in layer_names)
    # every attribute of PARAMETER_ATTRIBUTES but layers_ is some unit's
    assert set(PARAMETER_ATTRIBUTES) - {"layers_"} <= attributes


# The attention patterns: a registry of classes, whose objects the estimators
# take as attention_pattern
# -------------------------------------------------------------------------


def test_the_pattern_constraint_and_docstring_list_every_registered_class():
    for estimator in (AttentionTransformer, AttentionClassifier):
        constraint = estimator._parameter_constraints["attention_pattern"]
        assert set(constraint) == {*ATTENTION_PATTERNS.values(), None}
        doc = " ".join(estimator.__doc__.split())
        for _, value, description in ATTENTION_PATTERNS.items():
            assert f":class:`~skattn.patterns.{value.__name__}`, {description}" in doc


@pytest.mark.parametrize("name", ATTENTION_PATTERNS.names())
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_every_registered_pattern_builds_a_model_that_runs(name, pooling):
    # the pattern of its defaults (a band of 3), described as a plain dict in
    # the configuration, rebuilt as an equal object; its structure fixed
    cls = ATTENTION_PATTERNS.get(name)
    pattern = cls(3) if name == "banded" else cls()
    config = ModelConfig(
        n_features=3,
        d_model=4,
        n_heads=2,
        n_positions=200,
        pooling=pooling,
        attention_pattern=pattern_config(ATTENTION_PATTERNS, pattern),
    )
    assert all(
        isinstance(value, (str, int, type(None)))
        for value in config.attention_pattern.values()
    )
    model = build_model(config)
    unit = model.units[-1][1].pattern  # the last layer's
    assert unit.pattern == pattern
    assert unit.global_token == (pooling == "cls")
    structure = fitted_structure(config, {"features_per_token": 1, "data_format": 0})
    assert structure["attention_pattern"] == pattern
    params = model.init_params(np.random.RandomState(0), np.float64)
    x = np.random.default_rng(0).standard_normal((2, 200, 3))
    _, pooled, _ = model.forward(params, x, np.array([200, 150]))
    assert np.isfinite(pooled).all()
