"""The attention estimators and what ties them to scikit-learn.

``resolve`` turns an estimator's parameters into the model's description,
``dask`` fits and transforms dask collections block by block, ``docstrings``
shares the parameters' text, ``base`` holds fitting and the fitted state,
``attributes`` the fitted attributes read from it, ``forward`` the fitted
model run on new sequences (the per-token methods), ``transformer`` and
``predictors`` the public classes.

Pickles of development versions recording no version name the classifier and
the regressor in this package (``skattn._estimators.AttentionClassifier``):
either name here is a stand-in class whose instances cannot be made or
unpickled (:func:`~skattn._persistence.refusing_getattr`): loading such a
pickle raises :class:`~skattn._persistence.InconsistentVersionError`, which
names the versions and the remedy.
"""

from .._persistence import refusing_getattr

__getattr__ = refusing_getattr(__name__, ("AttentionClassifier", "AttentionRegressor"))
