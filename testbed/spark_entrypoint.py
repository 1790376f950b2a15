"""The Spark image's entrypoint: what a driver or executor container runs (``/opt/runplane/``).

Spark on Kubernetes gives its pods' containers arguments only (``driver …`` or ``executor``)
and leaves the command to the image; Spark's own images carry a shell script for it, which
PyPI's pyspark does not ship. This is runplane's, from what Spark's Kubernetes backend passes:

* ``driver ARGS``: ``spark-submit`` in client mode inside the pod, bound to the pod's address
  (``SPARK_DRIVER_BIND_ADDRESS``), with the arguments Spark gave (its properties file, the
  Python runner and the application file: runplane's bootstrap).
* ``executor``: the executor backend's JVM, from the variables Spark sets on the pod
  (``SPARK_DRIVER_URL``, ``SPARK_EXECUTOR_ID``, ``SPARK_EXECUTOR_CORES``, …), with the JVM
  options Spark passes as ``SPARK_JAVA_OPT_<n>`` in their order.

Anything else is run as given, so ``kubectl exec``-style commands and tests still work.
Standard library only: it runs with the image's Debian Python.
"""

from __future__ import annotations

import os
import re
import sys

_JAVA_OPT = re.compile(r"^SPARK_JAVA_OPT_(\d+)$")


def _spark_home() -> str:
    home = os.environ.get("SPARK_HOME")
    if not home:
        raise SystemExit("spark entrypoint: SPARK_HOME is not set in the image")
    return home


def driver(args: list[str]) -> list[str]:
    bind = os.environ.get("SPARK_DRIVER_BIND_ADDRESS", "")
    return [
        os.path.join(_spark_home(), "bin", "spark-submit"),
        "--conf",
        f"spark.driver.bindAddress={bind}",
        "--conf",
        f"spark.executorEnv.SPARK_DRIVER_POD_IP={bind}",
        "--deploy-mode",
        "client",
        *args,
    ]


def java_options(environ: dict[str, str]) -> list[str]:
    """``SPARK_JAVA_OPT_0``, ``_1``, … in numeric order (Spark numbers them as it lists them)."""
    found = [(int(m.group(1)), v) for k, v in environ.items() if (m := _JAVA_OPT.match(k))]
    return [value for _, value in sorted(found)]


def executor(environ: dict[str, str]) -> list[str]:
    java_home = environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else "java"
    classpath = ":".join(
        part
        for part in (
            environ.get("SPARK_CLASSPATH", ""),
            os.path.join(_spark_home(), "jars", "*"),
            environ.get("SPARK_DIST_CLASSPATH", ""),
        )
        if part
    )
    memory = environ["SPARK_EXECUTOR_MEMORY"]
    argv = [java, *java_options(environ), f"-Xms{memory}", f"-Xmx{memory}"]
    if environ.get("SPARK_EXECUTOR_LIBRARY_PATH"):
        argv.append(f"-Djava.library.path={environ['SPARK_EXECUTOR_LIBRARY_PATH']}")
    return [
        *argv,
        "-cp",
        classpath,
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        environ["SPARK_DRIVER_URL"],
        "--executor-id",
        environ["SPARK_EXECUTOR_ID"],
        "--cores",
        environ["SPARK_EXECUTOR_CORES"],
        "--app-id",
        environ["SPARK_APPLICATION_ID"],
        "--hostname",
        environ["SPARK_EXECUTOR_POD_IP"],
        "--resourceProfileId",
        environ.get("SPARK_RESOURCE_PROFILE_ID", "0"),
        "--podName",
        environ.get("SPARK_EXECUTOR_POD_NAME", ""),
    ]


def command(args: list[str], environ: dict[str, str]) -> list[str]:
    if args[:1] == ["driver"]:
        return driver(args[1:])
    if args[:1] == ["executor"]:
        return executor(environ)
    if not args:
        raise SystemExit("spark entrypoint: give 'driver ARGS', 'executor' or a command")
    return args


def main() -> None:
    argv = command(sys.argv[1:], dict(os.environ))
    sys.stdout.flush()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
