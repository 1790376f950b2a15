"""Creating a project with user_project."""
import mlrun

project = mlrun.new_project("myproj", "./", user_project=True, description="my new project")
print(project.name)
assert project.name.startswith("myproj-")
