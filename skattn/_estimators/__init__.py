"""The attention estimators and what ties them to scikit-learn.

``resolve`` turns an estimator's parameters into the model's description,
``dask`` fits and transforms dask collections block by block, ``docstrings``
shares the parameters' text, ``base`` holds fitting and the fitted state,
``transformer`` and ``predictors`` the public classes.
"""
