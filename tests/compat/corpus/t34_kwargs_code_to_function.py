"""A kwargs handler gets the parameters it does not name in **kwargs, and returns them.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_local_runtime_with_kwargs_with_code_to_function (without its rundb_mock fixture); the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun

open("kwargs.py", "w").write(
    """def func(context, x, **kwargs):
    context.logger.info(x)
    context.logger.info(kwargs)
    return kwargs


def func_with_default(context, x=4, **kwargs):
    context.logger.info(x)
    context.logger.info(kwargs)
    if not kwargs:
        raise Exception("kwargs is empty")
    return kwargs
"""
)
assets_path = "."
mlrun.get_or_create_project("default", allow_cross_project=True)
function = mlrun.code_to_function(
    "kwarg",
    filename=f"{assets_path}/kwargs.py",
    image="mlrun/mlrun",
    kind="job",
    handler="func",
)
kwargs = {"y": 3, "z": 4}
params = {"x": 2}
params.update(kwargs)
result = function.run(local=True, params=params)
assert result.outputs["return"] == kwargs, result.outputs
