"""Loading a project from project.yaml."""
import mlrun

open("project.yaml", "w").write(
    "kind: project\n"
    "metadata:\n  name: loaded\n"
    "spec:\n  params:\n    label_column: label\n"
)
project = mlrun.load_project("./")
assert project.name == "loaded"
assert project.spec.params["label_column"] == "label"
