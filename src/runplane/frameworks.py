"""MLRun's ``mlrun.frameworks``: framework auto-logging (apply_mlrun).

Not part of runplane: importing it works, using any of it raises
:class:`~runplane.errors.OutOfScopeError` naming the feature.
"""

from runplane.scope import out_of_scope

__getattr__ = out_of_scope("mlrun.frameworks", "framework auto-logging (apply_mlrun)")
