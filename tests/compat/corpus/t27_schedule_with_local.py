"""A schedule with a local run is refused, and so is one without a service to keep it.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_schedule_with_local_exploding; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun
import mlrun.errors
from mlrun import new_function

function = new_function()
try:
    function.run(local=True, schedule="* * * * *")
except mlrun.errors.MLRunInvalidArgumentError as excinfo:
    assert "Unexpected schedule='* * * * *' parameter for local function execution" in str(
        excinfo
    ), str(excinfo)
else:
    raise AssertionError("no MLRunInvalidArgumentError")
try:
    function.run(schedule="* * * * *")
except mlrun.errors.MLRunInvalidArgumentError as excinfo:
    assert "Unexpected schedule='* * * * *' parameter for local function execution" in str(
        excinfo
    ), str(excinfo)
else:
    raise AssertionError("no MLRunInvalidArgumentError")
