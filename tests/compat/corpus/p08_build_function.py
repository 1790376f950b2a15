"""Cheat sheet: manually build an image."""
import mlrun

open("train_code.py", "w").write("def train_func(context):\n    pass\n")
project = mlrun.get_or_create_project("builds", context="./")
project.set_function("train_code.py", name="trainer", kind="job", image="mlrun/mlrun",
                     handler="train_func", requirements=["pandas==1.3.5"])
project.build_function("trainer", base_image="myrepo/base_image:latest",
                       commands=["mkdir -p /some/path && chmod 0777 /some/path"])
