"""A run name with '/' is refused as malformed.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_invalid_name; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun
from mlrun import new_function


def my_func(context, p1=1, p2="a-string", input_name="infile.txt"):
    input_str = context.get_input(input_name).get()
    context.log_result("accuracy", p1 * 2)
    context.log_artifact("chart", body="abc")


try:
    # name cannot have / in it
    new_function().run(name="asd/asd", handler=my_func)
except ValueError as excinfo:
    assert (
        "Field 'run.metadata.name' is malformed. 'asd/asd' does not match required pattern"
        in str(excinfo)
    ), str(excinfo)
else:
    raise AssertionError("no ValueError")
