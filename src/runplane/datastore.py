"""MLRun's ``mlrun.datastore``: data items of local files and mounted volumes (``DataItem``,
``get_dataitem``); other data stores are not part of runplane, and using them says so."""

from runplane.bootstrap import DataItem
from runplane.execution import get_dataitem
from runplane.scope import out_of_scope

__all__ = ["DataItem", "get_dataitem"]

__getattr__ = out_of_scope(
    "mlrun.datastore", "data stores other than local files and mounted volumes (V3IO included)"
)
