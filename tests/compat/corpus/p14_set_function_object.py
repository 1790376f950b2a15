"""set_function with a function object."""
import mlrun

project = mlrun.get_or_create_project("objects", context="./")
fn = mlrun.new_function("made", kind="job", image="mlrun/mlrun")
project.set_function(fn)
assert project.get_function("made").metadata.name == "made"
