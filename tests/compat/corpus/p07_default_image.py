"""Default image: functions without an image use the project's."""
import mlrun

open("mycode.py", "w").write("def handler(context, x=1):\n    return x\n")
project = mlrun.new_project("images", "./proj")
project.set_default_image("myrepo/my-prebuilt-image:v1")
project.set_function("../mycode.py", "prep", handler="handler")
run1 = project.run_function("prep", params={"x": 7}, local=True)
assert run1.outputs["return"] == 7
