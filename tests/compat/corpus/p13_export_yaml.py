"""Exporting a project to YAML."""
import mlrun

project = mlrun.new_project("exported", "./")
project.spec.params["x"] = 1
project.export("exported.yaml")
print(project.to_yaml())
assert "exported" in open("exported.yaml").read()
