"""set_function from an exported YAML."""
import mlrun

mlrun.new_function("from-yaml", kind="job", image="mlrun/mlrun").export("function.yaml")
project = mlrun.get_or_create_project("yaml-fn", context="./")
project.set_function(name="import", func="function.yaml")
assert project.get_function("import").metadata.name == "import"
