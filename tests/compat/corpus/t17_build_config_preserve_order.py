"""build_config keeps the commands in the order given.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_pod.py::test_build_config_preserve_order; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
"""
import mlrun

function = mlrun.new_function("some-function", kind="job")
# run a lot of times as order change
commands = []
for index in range(10):
    commands.append(str(index))
for _ in range(100):
    function.spec.build.commands = []
    function.build_config(commands=commands)
    assert function.spec.build.commands == commands
