"""The version of skattn a pickled estimator records, checked when it loads.

Every public estimator pickles (and stores with skops) the version of skattn
that saved it, ``_skattn_version``, and the format of its state,
``_skattn_state_version``. Loaded by another version of skattn, by this
version with another state format, or from a pickle that records neither, it
raises an :class:`InconsistentVersionError` that names both versions and the
remedy, instead of returning an estimator that fails later on an attribute
its class does not have or reads differently. A pickle of this version and
state format loads silently.

All development versions share one version string (``0.1.0.dev0``), so the
version alone does not tell their states apart: :data:`STATE_VERSION` does.
A change to what an estimator keeps in its pickle (an attribute added,
renamed or read differently) increments it, and the pickles of the other
format are refused. Between two changes of the state, pickles of any commit
of one development version load in any other, as scikit-learn loads the
pickles of its own version string.

Pickles that record no version may name modules that the package does not
have (``skattn._transformer``, ``skattn._predictors``) or classes that a
module does not have (``skattn._estimators.AttentionClassifier``), and pickle
looks a class up before the estimator's ``__setstate__`` runs. At those
paths, :func:`refusing_getattr` gives a stand-in class whose instances
cannot be made or unpickled: loading such a pickle raises the same error.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._version import __version__

# The format of the estimators' pickled state: incremented by a change to
# what an estimator pickles, so that pickles of the earlier format are refused.
STATE_VERSION = 2

VERSION_KEY = "_skattn_version"
STATE_VERSION_KEY = "_skattn_state_version"


class InconsistentVersionError(ValueError):
    """An estimator saved (pickled, or stored with skops) by another version
    of skattn: not loaded.

    Parameters
    ----------
    estimator_name : str
        The class of the pickled estimator.
    original_version : str or None
        The version of skattn that saved it; None when the pickle records none.
    original_state_version : int or None
        The format of its state; None when the pickle records none.

    Attributes
    ----------
    estimator_name, original_version, original_state_version
        As given.
    current_version : str
        The version of skattn that refused it.
    current_state_version : int
        The state format it reads.
    """

    def __init__(self, estimator_name, original_version, original_state_version):
        self.estimator_name = estimator_name
        self.original_version = original_version
        self.original_state_version = original_state_version
        self.current_version = __version__
        self.current_state_version = STATE_VERSION
        super().__init__(
            _message(estimator_name, original_version, original_state_version)
        )

    def __reduce__(self):
        return type(self), (
            self.estimator_name,
            self.original_version,
            self.original_state_version,
        )


def _message(estimator_name, original_version, original_state_version):
    """What was saved by which version, and the two remedies."""
    if original_version is None:
        saved = (
            f"a development version of skattn before {__version__} that "
            "recorded no version"
        )
        saver = "the version of skattn that saved it"
    elif original_version != __version__:
        saved = f"skattn {original_version}"
        saver = f"skattn {original_version}"
    else:
        saved = (
            f"skattn {original_version} with its state in format "
            f"{original_state_version}, of another commit of this development "
            f"version (this one reads format {STATE_VERSION})"
        )
        saver = "the commit of skattn that saved it"
    return (
        f"This {estimator_name} was saved by {saved}; skattn {__version__} "
        "does not load the fitted state of another version. Refit the "
        f"{estimator_name} with skattn {__version__}, or load it with {saver}."
    )


class VersionedState:
    """Mixin of the public estimators: their pickles record the version of
    skattn and the state format, and a pickle of another one is refused.

    It comes first among the base classes, so that the check runs before any
    other ``__setstate__`` reads the state.
    """

    def __getstate__(self):
        state = dict(super().__getstate__())
        state[VERSION_KEY] = __version__
        state[STATE_VERSION_KEY] = STATE_VERSION
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop(VERSION_KEY, None)
        state_version = state.pop(STATE_VERSION_KEY, None)
        if version != __version__ or state_version != STATE_VERSION:
            raise InconsistentVersionError(type(self).__name__, version, state_version)
        super().__setstate__(state)


def refusing_getattr(module, class_names):
    """The module ``__getattr__`` of a path that old pickles name.

    Parameters
    ----------
    module : str
        The module's name.
    class_names : tuple of str
        The estimator classes that pickles name at this path.

    Returns
    -------
    __getattr__ : callable
        Returns, for a name of ``class_names``, a stand-in class that raises
        :class:`InconsistentVersionError` when unpickling makes an instance
        of it or sets its state (those pickles recorded no version), and
        raises ``AttributeError`` for any other name. Looking the name up
        succeeds, so that introspection (``hasattr``, documentation tools)
        never meets the error.
    """
    stand_ins = {name: _refusing_class(module, name) for name in class_names}

    def __getattr__(name):
        try:
            return stand_ins[name]
        except KeyError:
            raise AttributeError(
                f"module {module!r} has no attribute {name!r}"
            ) from None

    return __getattr__


def _refusing_class(module, name):
    """A class named as an estimator of an earlier layout, of which no
    instance can be made or unpickled."""

    def refuse(*args, **kwargs):
        raise InconsistentVersionError(name, None, None)

    return type(
        name,
        (),
        {
            "__module__": module,
            "__doc__": f"Where pickles that record no version found {name}: "
            "making or unpickling one raises InconsistentVersionError.",
            "__new__": refuse,
            "__setstate__": refuse,
        },
    )


class PlainFittedState:
    """Mixin of an estimator whose fitted object is ``_fitted``: pickled as
    the plain dicts, lists, numbers and arrays of its ``to_state()``, and
    rebuilt by ``_fitted_type.from_state`` (so that loading trusts no
    private type)."""

    _fitted_type = None

    def __getstate__(self):
        state = dict(super().__getstate__())
        if "_fitted" in state:
            state["_fitted"] = state["_fitted"].to_state()
        return state

    def __setstate__(self, state):
        if "_fitted" in state:
            fitted = type(self)._fitted_type.from_state(state["_fitted"])
            state = {**state, "_fitted": fitted}
        super().__setstate__(state)
