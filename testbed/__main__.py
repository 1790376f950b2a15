"""``python -m testbed up|down|status|build|image``: drive the testbed by hand, and build the
runplane image (``image``: testbed/service_image.py) and the Spark image (``spark-image``:
testbed/spark_image.py)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.cluster import Cluster
    from testbed.realnode import RealNode


def _run_dir(arg: str | None) -> Path:
    from testbed.cluster import runs_root

    path = Path(arg) if arg else runs_root() / "latest"
    if not (path / "state.json").exists():
        raise SystemExit(f"no testbed state in {path}; start one with `python -m testbed up`")
    return path.resolve()


def cmd_build(args: argparse.Namespace) -> int:
    from testbed import build

    build.build(force=args.force, with_images=not args.no_images, tools=not args.no_tools)
    print(build.bin_dir())
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from testbed import cluster, kube, topology

    settings = cluster.Settings(verbosity=args.v, die_with_parent=not args.detach)
    if args.real_node:
        from testbed import build

        build.build()  # the node's images too; a no-op when cached
    running = cluster.start(settings=settings)
    print(f"control plane ready in {running.startup_seconds:.1f}s; run dir {running.run_dir}")
    node = None
    try:
        if not args.no_seed:
            api = kube.api_client(running.kubeconfig)
            groups = topology.node_groups(args.system, args.on_demand, args.spot, args.gpu)
            topology.seed(api, groups)
            print("topology seeded: " + ", ".join(f"{g.name}={g.count}" for g in groups))
        if not args.no_kueue:
            _start_kueue(running, detach=args.detach)
        if args.real_node:
            from testbed.realnode import RealNode

            node = RealNode.start(running, args.node_name, die_with_parent=not args.detach)
            print(
                f"real node {node.name} Ready in {node.timings['start_s']:.1f}s "
                f"(taint {topology.REAL_NODE_TAINT['key']}, image {node.image}); "
                f"logs in {running.logs_dir}"
            )
            if not args.no_metrics_server:
                _start_metrics_server(running, detach=args.detach)
            _start_operators(running, node, args)
    except BaseException:
        try:
            if node:
                node.stop()  # a later step failed (an operator): nothing is left behind
        finally:
            running.stop()
        raise
    print(f"export KUBECONFIG={running.kubeconfig}")
    if args.detach:
        print("detached; stop with `python -m testbed down`")
        return 0
    print("Ctrl-C to stop")

    def _stop(*_: object) -> None:
        raise KeyboardInterrupt

    # Also SIGINT: a shell may start background jobs with SIGINT ignored.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def health() -> dict[str, bool]:
        return {**running.healthy(), **(node.healthy() if node else {})}

    try:
        while all(health().values()):
            time.sleep(1)
        print(f"a component exited: {health()}; logs in {running.logs_dir}")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        try:
            if node:
                node.stop()
        finally:
            running.stop()
            print(f"stopped; logs kept in {running.logs_dir}")


def _start_metrics_server(running: Cluster, detach: bool) -> None:
    """metrics-server for the real node's autoscalers, kept with the control plane's processes
    so that ``status`` shows it and ``down`` stops it."""
    from testbed import metrics_server

    server = metrics_server.start(running, die_with_parent=not detach)
    running.processes.append(server.process)
    running.save_state()
    print(f"metrics-server serving metrics.k8s.io in {server.start_s:.1f}s")


def _start_operators(running: Cluster, node: RealNode, args: argparse.Namespace) -> None:
    """The MPI and Spark operators, watching every namespace, their images on the node; kept
    with the control plane's processes like metrics-server."""
    from testbed import mpi_operator, spark_operator

    chosen = (
        ("MPI Operator", mpi_operator.start, args.no_mpi_operator),
        ("Spark Operator", spark_operator.start, args.no_spark_operator),
    )
    for name, start, left_out in chosen:
        if left_out:
            continue
        began = time.monotonic()
        running.processes.append(start(running, node, not args.detach))
        running.save_state()
        print(f"{name} watching every namespace in {time.monotonic() - began:.1f}s")


def _start_kueue(running: Cluster, detach: bool) -> None:
    """Kueue with runplane's default setup (flavors from the spot preset, one cohort), kept
    with the control plane's processes so that ``status`` shows it and ``down`` stops it."""
    from testbed import build, kueue

    build.build_kueue()  # a no-op when cached
    started = kueue.start(running, die_with_parent=not detach)
    running.processes.append(started.process)
    running.save_state()
    print(f"kueue {build.KUEUE_VERSION} admitting workloads in {started.start_s:.1f}s")


def cmd_down(args: argparse.Namespace) -> int:
    from testbed.cluster import Cluster
    from testbed.realnode import RealNode

    run_dir = _run_dir(args.run_dir)
    running = Cluster.load(run_dir)
    node = RealNode.load(run_dir)
    try:
        if node and not node.stopped:
            # first, while the apiserver still answers: the node's pods are deleted through it
            node.stop()
            print(f"stopped real node {node.name} in {node.timings['stop_s']:.1f}s; nothing left")
    finally:
        running.stop()
    print(f"stopped {running.run_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from testbed.cluster import Cluster
    from testbed.realnode import RealNode

    run_dir = _run_dir(args.run_dir)
    running = Cluster.load(run_dir)
    health = running.healthy()
    status: dict[str, object] = {
        "run_dir": str(running.run_dir),
        "kubeconfig": str(running.kubeconfig),
        "server": running.server,
        "processes": health,
    }
    node = RealNode.load(run_dir)
    ok = all(health.values())
    if node and not node.stopped:
        node_health = node.healthy()
        ready = node.ready()
        status["real_node"] = {
            "name": node.name,
            "ready": ready,
            "processes": node_health,
            "timings": node.timings,
        }
        ok = ok and ready and all(node_health.values())
    print(json.dumps(status, indent=2))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["image"]:
        from testbed import service_image

        return service_image.main(args[1:])
    if args[:1] == ["postgresql-image"]:
        from testbed import postgres_image

        return postgres_image.main(args[1:])
    if args[:1] == ["spark-image"]:
        from testbed import spark_image

        return spark_image.main(args[1:])
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="build/cache the Go binaries (no-op when cached)")
    p.add_argument("--force", action="store_true")
    p.add_argument("--no-images", action="store_true", help="skip the real node's images")
    p.add_argument(
        "--no-tools",
        action="store_true",
        help="only the control plane (and the real node): not helm, the operators, Kueue",
    )
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("up", help="start a control plane and seed the topology")
    p.add_argument("--detach", action="store_true", help="leave it running and return")
    p.add_argument("--no-seed", action="store_true")
    p.add_argument("--system", type=int, default=1)
    p.add_argument("--on-demand", type=int, default=3)
    p.add_argument("--spot", type=int, default=3)
    p.add_argument("--gpu", type=int, default=1)
    p.add_argument("-v", type=int, default=1, help="component log verbosity")
    p.add_argument(
        "--no-kueue",
        action="store_true",
        help="leave Kueue out (runplane then admits multi-pod runs itself)",
    )
    p.add_argument(
        "--real-node",
        action="store_true",
        help="also start one real node (kubelet + containerd; root, one per machine)",
    )
    p.add_argument("--node-name", help="real node name; must map to loopback in /etc/hosts")
    p.add_argument(
        "--no-metrics-server",
        action="store_true",
        help="with --real-node: leave out metrics-server (autoscalers then see no metrics)",
    )
    p.add_argument(
        "--no-mpi-operator",
        action="store_true",
        help="with --real-node: leave out the MPI Operator and its image (mpijob runs refused)",
    )
    p.add_argument(
        "--no-spark-operator",
        action="store_true",
        help="with --real-node: leave out the Spark Operator and its image (spark runs refused)",
    )
    p.set_defaults(func=cmd_up)
    for name, func in (("down", cmd_down), ("status", cmd_status)):
        p = sub.add_parser(name)
        p.add_argument("--run-dir", help="defaults to the latest run")
        p.set_defaults(func=func)
    sub.add_parser("image", help="build the runplane image (python -m testbed image --help)")
    sub.add_parser("postgresql-image", help="build the chart's PostgreSQL image (--help)")
    sub.add_parser("spark-image", help="build the real node's Spark image (--force)")
    parsed = parser.parse_args(args)
    return int(parsed.func(parsed))


if __name__ == "__main__":
    sys.exit(main())
