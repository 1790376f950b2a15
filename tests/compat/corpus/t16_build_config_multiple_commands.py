"""build_config(commands=) adds commands once each.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_pod.py::test_build_config_with_multiple_commands; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
Fails on MLRun 1.12.1 (drift since that commit): build_config(commands=) replaces the commands instead of adding to them.
"""
import mlrun

image = "mlrun/mlrun"
fn = mlrun.new_function("some-function", "some-project", "some-tag", image=image, kind="job")
fn.build_config(commands=["pip install pandas", "pip install numpy"])
assert len(fn.spec.build.commands) == 2

fn.build_config(commands=["pip install pandas"])
assert len(fn.spec.build.commands) == 2
