"""Adding a workflow (Kubeflow Pipelines) to a project."""
import mlrun

open("pipeline.py", "w").write("def pipeline():\n    pass\n")
project = mlrun.get_or_create_project("flows", context="./")
project.set_workflow(name="main", workflow_path="pipeline.py")
project.save()
