"""get_current_project."""
import mlrun

project = mlrun.get_or_create_project("current", context="./")
assert mlrun.get_current_project().name == "current"
