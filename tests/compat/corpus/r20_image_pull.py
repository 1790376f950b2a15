"""Image pull configuration with a pull secret."""
import mlrun

fn = mlrun.new_function("pull", kind="job", image="myregistry/image:v1")
fn.set_image_pull_configuration(image_pull_policy="Always",
                                image_pull_secret_name="registry-creds")
