"""MLRun's ``mlrun.model_monitoring``: model monitoring.

Not part of runplane: importing it works, using any of it raises
:class:`~runplane.errors.OutOfScopeError` naming the feature.
"""

from runplane.scope import out_of_scope

__getattr__ = out_of_scope("mlrun.model_monitoring", "model monitoring")
