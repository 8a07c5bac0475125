"""Reading what the caller passes: input formats, parameter and array checks,
targets and their encodings.

Support of the estimators, below training: nothing here trains a model.
"""
