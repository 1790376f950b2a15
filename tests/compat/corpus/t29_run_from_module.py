"""A handler from an installed module (json.dumps) runs locally; its return is the output.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_run_from_module; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun

fn = mlrun.new_function("mytst", kind="job")
run = fn.run(handler="json.dumps", params={"obj": {"x": 99}}, local=True)
assert run.output("return") == '{"x": 99}', run.output("return")
