"""Project parameters."""
import mlrun

project = mlrun.get_or_create_project("params-demo", context="./",
                                      parameters={"label_column": "label"})
print(project.get_param("label_column"))
assert project.spec.params["label_column"] == "label"
