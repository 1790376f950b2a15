"""A project saved with a description and parameters, read back from the run DB."""
import mlrun

project = mlrun.get_or_create_project(
    "churn-demo", context="./churn", parameters={"label_column": "label"}
)
project.spec.description = "Churn prediction"
project.save()

db = mlrun.get_run_db()
assert "churn-demo" in db.list_projects()
stored = db.get_project("churn-demo")
assert stored.spec.description == "Churn prediction"
assert stored.spec.params["label_column"] == "label"
print(stored.metadata.name)
