"""set_environment with an artifact path."""
import mlrun

project_name, artifact_path = mlrun.set_environment(artifact_path="./artifacts")
print(project_name, artifact_path)
