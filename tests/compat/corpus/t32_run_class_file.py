"""A class method handler (Class::method) runs from a file, _init_args going to the class.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_run_class_file; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
"""
import mlrun

open("handler.py", "w").write(
    """import mlrun


def myhandler(context: mlrun.MLClientCtx, tag=None):
    artifact_params = {"item": "file_result", "body": b"abc123", "local_path": "result.txt"}
    if tag:
        artifact_params["tag"] = tag
    context.log_artifact(**artifact_params)


def log_artifact_many_tags(context: mlrun.MLClientCtx):
    body = b"abc123"
    context.log_artifact("file_result", body=body, tag="v1")
    context.log_artifact("file_result", body=body, tag="v2")
    context.log_artifact("file_result", body=body, tag="v3")


class MyCls:
    def __init__(self, context=None, a1=1):
        self.context = context
        self.a1 = a1

    def mtd(self, context, x=0, y=0):
        context.log_result("rx", x)
        context.log_result("ry", y)
        context.log_result("ra1", self.a1)
"""
)
function_path = "handler.py"

cases = [
    ({"x": 7}, {"rx": 7, "ry": 0, "ra1": 1}),
    ({"_init_args": {"a1": 9}, "y": 5}, {"rx": 0, "ry": 5, "ra1": 9}),
]
fn = mlrun.new_function("mytst", command=function_path, kind="job")
for params, results in cases:
    run = fn.run(handler="MyCls::mtd", params=params, local=True)
    assert run.status.results == results, run.status.results
