"""A project function run locally sees its context's kind label as local.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_get_or_create_ctx_run_kind_local_from_function; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun

open("simple.py", "w").write(
    """import mlrun


def handler(context, x=1):
    context.log_result("y", x * 2)


def get_ctx_kind_label():
    ctx = mlrun.get_or_create_ctx("func-func")
    return ctx.labels.get("kind")
"""
)
assets_path = "."
project = mlrun.get_or_create_project("dummy-project")
project.set_function(
    name="func",
    func=f"{assets_path}/simple.py",
    handler="get_ctx_kind_label",
    image="mlrun/mlrun",
)
run = project.run_function(
    "func",
    local=True,
)
assert run.state() == "completed", run.state()
assert run.output("return") == "local", run.output("return")
