"""MLRun's ``mlrun.alerts``: alerts.

Not part of runplane: importing it works, using any of it raises
:class:`~runplane.errors.OutOfScopeError` naming the feature.
"""

from runplane.scope import out_of_scope

__getattr__ = out_of_scope("mlrun.alerts", "alerts")
