"""Load code at runtime from the project's source."""
import mlrun

project = mlrun.get_or_create_project("sourced", context="./")
project.set_source(source="git://github.com/mlrun/project-archive.git", pull_at_runtime=True)
fn = project.set_function(name="nuclio", handler="nuclio_func:nuclio_handler",
                          image="mlrun/mlrun", kind="nuclio", with_repo=True)
