"""The real node's cluster DNS: ``<service>.<namespace>.svc.<domain>`` names a Service.

As a cluster's DNS does, a Service with a ClusterIP is answered with that address (the node's
kube-proxy routes it to a ready endpoint, on the Service's port), and a headless Service with
the IPv4 addresses of its *ready* endpoints (its EndpointSlices). So
``kubernetes.default.svc`` leads to the API server on port 443, and dask workers dialing their
scheduler's Service reach the scheduler. A pod that names itself in a headless Service (its
``hostname`` and ``subdomain``, as the MPI Operator's launcher and workers do) is answered at
``<hostname>.<service>.<namespace>.svc.<domain>`` with its address once it is ready, as the
cluster's DNS answers it from the EndpointSlice. Anything else (other names, SRV, reverse
lookups, ExternalName Services) gets NXDOMAIN, or an empty answer for a Service name asked for
another record type.

It asks the API server on every question, with no cache and a TTL of 0: a test's pods come and
go within seconds, and a stale answer would be a wrong one. ``RealNode`` runs it as a process
(``python -m testbed.podns``) on the pod bridge's address, and points kubelet's
``clusterDNS`` at it.
"""

from __future__ import annotations

import argparse
import socketserver
import sys
import threading
from pathlib import Path

import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import kube

DOMAIN = "cluster.local"
PORT = 53


class Resolver:
    """Service names to ready endpoint addresses, looked up in the API at each question."""

    def __init__(self, api: client.ApiClient, domain: str = DOMAIN) -> None:
        self.core = client.CoreV1Api(api)
        self.discovery = client.DiscoveryV1Api(api)
        self.suffix = ["svc", *domain.lower().split(".")]

    def service(self, name: str) -> tuple[str, str] | None:
        """(service, namespace) if ``name`` is a Service name of this cluster's domain."""
        labels = name.rstrip(".").lower().split(".")
        if len(labels) != 2 + len(self.suffix) or labels[2:] != self.suffix:
            return None
        return labels[0], labels[1]

    def named(self, name: str) -> tuple[str, str, str] | None:
        """(service, namespace, hostname) if ``name`` is a Service name of this cluster's
        domain, or a pod's hostname in a Service (``hostname`` is empty for a Service)."""
        found = self.service(name)
        if found is not None:
            return found[0], found[1], ""
        labels = name.rstrip(".").lower().split(".")
        if len(labels) != 3 + len(self.suffix) or labels[3:] != self.suffix:
            return None
        return labels[1], labels[2], labels[0]

    def addresses(self, service: str, namespace: str, hostname: str = "") -> list[str]:
        """The ClusterIP of a Service that has one, else its ready endpoints (those of
        ``hostname`` only, when given); none for a Service that does not exist."""
        try:
            spec = self.core.read_namespaced_service(service, namespace).spec
        except ApiException as error:
            if error.status == 404:
                return []
            raise
        if spec is None or spec.type == "ExternalName":
            return []
        if spec.cluster_ip and spec.cluster_ip != "None":
            return [] if hostname else [spec.cluster_ip]
        slices = self.discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}"
        )
        found: list[str] = []
        for piece in slices.items:
            if piece.address_type != "IPv4":
                continue
            for endpoint in piece.endpoints or []:
                conditions = endpoint.conditions
                if conditions is not None and conditions.ready is False:
                    continue
                if hostname and endpoint.hostname != hostname:
                    continue
                found.extend(a for a in endpoint.addresses if a not in found)
        return sorted(found)

    def answer(self, query: dns.message.Message) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return response
        question = query.question[0]
        named = self.named(question.name.to_text())
        if named is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
            return response
        try:
            found = self.addresses(*named)
        except Exception:  # the API is down or refused: say so, the client will retry
            response.set_rcode(dns.rcode.SERVFAIL)
            return response
        if not found:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif question.rdtype == dns.rdatatype.A and question.rdclass == dns.rdataclass.IN:
            response.answer.append(dns.rrset.from_text_list(question.name, 0, "IN", "A", found))
        return response


def serve(resolver: Resolver, host: str, port: int = PORT) -> socketserver.ThreadingUDPServer:
    """A UDP server for ``resolver``; the caller runs ``serve_forever``."""
    log = threading.Lock()  # one line per answer, whole, from concurrent handler threads

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data, sock = self.request
            try:
                query = dns.message.from_wire(data)
            except Exception:  # not DNS: nothing sensible to answer
                return
            response = resolver.answer(query)
            sock.sendto(response.to_wire(), self.client_address)
            question = query.question[0].name.to_text() if query.question else "?"
            answers = [str(r) for rrset in response.answer for r in rrset]
            rcode = dns.rcode.to_text(response.rcode())
            with log:
                print(f"{self.client_address[0]} {question} {rcode} {answers}", flush=True)

    socketserver.ThreadingUDPServer.allow_reuse_address = True
    server = socketserver.ThreadingUDPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.podns", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--listen", required=True, help="the address pods reach, e.g. 10.244.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--domain", default=DOMAIN)
    # Names the node's work dir on the command line, so a crashed node's responder is found
    # and stopped by the next start's teardown like its other processes.
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    resolver = Resolver(kube.api_client(args.kubeconfig, pool=4), args.domain)
    server = serve(resolver, args.listen, args.port)
    print(f"podns: {args.listen}:{args.port} answers *.svc.{args.domain}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
