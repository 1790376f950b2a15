"""The pod's script: ``python3 /runplane/bootstrap/__main__.py``, this file beside the folder
that holds the package (:data:`.pod.SHIPPED_AS`); also ``python -m runplane.bootstrap``."""

import os
import sys

if __package__:
    from .pod import main
else:  # a pod's script: the package is found beside it, whatever the interpreter's flags
    # (-I, -P or PYTHONSAFEPATH leave the script's folder off sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from runplane_bootstrap.pod import main  # type: ignore[import-not-found,no-redef]

if __name__ == "__main__":
    sys.exit(main())
