"""A stand-in Kubernetes API server for Helm, in memory, on plain HTTP.

It serves what Helm's install, upgrade, rollback, status, get-values and
uninstall call and no more (discovery, create/get/list/replace/patch/delete
of any resource it lists, label selectors on lists), stores objects as JSON,
and logs every request (method, path, query, Accept and Content-Type) so a
test can say exactly what Helm asked of an API server. It checks nothing:
it is not an oracle for kube-apiserver's behaviour, only a way to make Helm
render and walk through its actions without a cluster.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# group/version -> [(plural, kind, namespaced)]
RESOURCES: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [
        ("namespaces", "Namespace", False),
        ("secrets", "Secret", True),
        ("configmaps", "ConfigMap", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("services", "Service", True),
        ("pods", "Pod", True),
        ("events", "Event", True),
    ],
    "apps/v1": [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    "rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True),
        ("rolebindings", "RoleBinding", True),
    ],
    "admissionregistration.k8s.io/v1": [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
        ("validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
        ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
    ],
    "apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition", False)],
    "monitoring.coreos.com/v1": [
        ("podmonitors", "PodMonitor", True),
        ("servicemonitors", "ServiceMonitor", True),
        ("prometheusrules", "PrometheusRule", True),
    ],
    "coordination.k8s.io/v1": [("leases", "Lease", True)],
}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _fields(buf: bytes) -> list[tuple[int, object]]:
    """Protobuf wire format: (field number, varint or bytes) in order."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        out.append((num, value))
    return out


def _map_entry(buf: bytes) -> tuple[str, bytes]:
    f = dict(_fields(buf))
    return f.get(1, b"").decode(), f.get(2, b"")


def secret_from_protobuf(body: bytes) -> dict:
    """A Secret sent as application/vnd.kubernetes.protobuf (what Helm's
    release storage sends), decoded to its JSON form: the envelope
    (magic k8s\\0, runtime.Unknown{typeMeta=1, raw=2}), then the fields
    Helm sets (ObjectMeta name 1, namespace 3, resourceVersion 6, labels 11,
    annotations 12; Secret data 2, type 3, immutable 5)."""
    import base64
    if not body.startswith(b"k8s\x00"):
        raise ValueError("no protobuf magic")
    unknown = dict(_fields(body[4:]))
    meta: dict = {}
    secret: dict = {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
    for num, value in _fields(unknown[2]):
        if num == 1:
            for mnum, mval in _fields(value):
                if mnum in (1, 3, 5, 6):
                    meta[{1: "name", 3: "namespace", 5: "uid", 6: "resourceVersion"}[mnum]] = mval.decode()
                elif mnum in (11, 12):
                    k, v = _map_entry(mval)
                    meta.setdefault("labels" if mnum == 11 else "annotations", {})[k] = v.decode()
        elif num == 2:
            k, v = _map_entry(value)
            secret.setdefault("data", {})[k] = base64.b64encode(v).decode()
        elif num == 3:
            secret["type"] = value.decode()
        elif num == 5:
            secret["immutable"] = bool(value)
    if not meta.get("resourceVersion"):
        meta.pop("resourceVersion", None)
    return secret


def _gv_path(gv: str) -> str:
    return "/api/v1" if gv == "v1" else f"/apis/{gv}"


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str, str, str], dict] = {}  # (gv, plural, ns, name)
        self.rv = 1
        self.log: list[dict] = []

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)


def _selector_matches(selector: str, labels: dict) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif labels.get(term) is None:
            return False
    return True


def _merge(dst: dict, patch: dict) -> dict:
    """RFC 7386 merge patch (strategic merge treated alike: lists replaced)."""
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            dst.pop(k, None)
        elif isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def make_handler(store: Store):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str, message: str) -> None:
            self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": reason, "message": message, "code": code})

        def _record(self, body: bytes) -> None:
            url = urllib.parse.urlsplit(self.path)
            store.log.append({
                "method": self.command, "path": url.path, "query": url.query,
                "accept": self.headers.get("Accept", ""),
                "content_type": self.headers.get("Content-Type", ""),
                "body_bytes": len(body),
            })

        def _route(self):
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            parts = [p for p in url.path.split("/") if p]
            if parts[:1] == ["api"]:
                gv, rest = "v1", parts[2:] if len(parts) >= 2 else None
            elif parts[:1] == ["apis"] and len(parts) >= 3:
                gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
            else:
                return None, None, None, None, None, query
            ns = None
            if rest and rest[0] == "namespaces" and len(rest) >= 3:
                ns, rest = rest[1], rest[2:]
            plural = rest[0] if rest else None
            name = rest[1] if rest and len(rest) > 1 else None
            sub = rest[2] if rest and len(rest) > 2 else None
            return gv, ns, plural, name, sub, query

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def do_GET(self):
            self._record(b"")
            path = urllib.parse.urlsplit(self.path).path
            if path == "/version":
                return self._send(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0",
                                        "platform": "linux/amd64"})
            if path == "/api":
                return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": []})
            if path == "/apis":
                groups = []
                for gv in RESOURCES:
                    if gv == "v1":
                        continue
                    g, v = gv.split("/")
                    ver = {"groupVersion": gv, "version": v}
                    groups.append({"name": g, "versions": [ver], "preferredVersion": ver})
                return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
            for gv, res in RESOURCES.items():
                if path == _gv_path(gv):
                    return self._send(200, {
                        "kind": "APIResourceList", "groupVersion": gv,
                        "resources": [{"name": p, "singularName": k.lower(), "namespaced": n, "kind": k,
                                       "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                                      for p, k, n in res]})
            gv, ns, plural, name, _sub, query = self._route()
            if gv is None:
                return self._status(404, "NotFound", f"the server could not find {path}")
            with store.lock:
                if name:
                    obj = store.objects.get((gv, plural, ns or "", name))
                    if obj is None:
                        return self._status(404, "NotFound", f'{plural} "{name}" not found')
                    return self._send(200, obj)
                items = [o for (g, p, n, _), o in sorted(store.objects.items())
                         if g == gv and p == plural and (ns is None or n == ns)
                         and _selector_matches(query.get("labelSelector", ""),
                                               o.get("metadata", {}).get("labels") or {})]
                kind = next((k for p, k, _ in RESOURCES.get(gv, []) if p == plural), "Unknown")
                return self._send(200, {"kind": f"{kind}List", "apiVersion": gv,
                                        "metadata": {"resourceVersion": str(store.rv)}, "items": items})

        def _write(self, create: bool):
            body = self._body()
            self._record(body)
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("application/vnd.kubernetes.protobuf") and "/secrets" in self.path:
                obj = secret_from_protobuf(body)
            elif "json" in ctype:
                obj = json.loads(body)
            else:
                return self._status(415, "UnsupportedMediaType", f"stub: {ctype} is not supported")
            gv, ns, plural, name, _sub, query = self._route()
            with store.lock:
                name = name or obj["metadata"]["name"]
                key = (gv, plural, ns or "", name)
                if create and key in store.objects:
                    return self._status(409, "AlreadyExists", f'{plural} "{name}" already exists')
                if not create and key not in store.objects:
                    return self._status(404, "NotFound", f'{plural} "{name}" not found')
                meta = obj.setdefault("metadata", {})
                if ns:
                    meta["namespace"] = ns
                meta.setdefault("uid", f"uid-{store.next_rv()}")
                meta["resourceVersion"] = store.next_rv()
                meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                if query.get("dryRun") != "All":
                    store.objects[key] = obj
                return self._send(201 if create else 200, obj)

        def do_POST(self):
            self._write(create=True)

        def do_PUT(self):
            self._write(create=False)

        def do_PATCH(self):
            body = self._body()
            self._record(body)
            ctype = self.headers.get("Content-Type", "")
            gv, ns, plural, name, _sub, query = self._route()
            key = (gv, plural, ns or "", name)
            with store.lock:
                cur = store.objects.get(key)
                if ctype.startswith("application/apply-patch"):
                    patch = json.loads(body)  # server-side apply: YAML or JSON; Helm sends JSON
                    if cur is None:
                        cur = patch
                        cur.setdefault("metadata", {})["uid"] = f"uid-{store.next_rv()}"
                    else:
                        _merge(cur, patch)
                elif cur is None:
                    return self._status(404, "NotFound", f'{plural} "{name}" not found')
                elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    _merge(cur, json.loads(body))
                else:
                    return self._status(415, "UnsupportedMediaType", f"stub: {ctype} is not supported")
                cur["metadata"]["resourceVersion"] = store.next_rv()
                if query.get("dryRun") != "All":
                    store.objects[key] = cur
                return self._send(200, cur)

        def do_DELETE(self):
            self._body()
            self._record(b"")
            gv, ns, plural, name, _sub, _q = self._route()
            with store.lock:
                obj = store.objects.pop((gv, plural, ns or "", name), None)
            if obj is None:
                return self._status(404, "NotFound", f'{plural} "{name}" not found')
            return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    return Handler


def serve(store: Store) -> tuple[ThreadingHTTPServer, str]:
    """Starts the stub on a free loopback port; returns it and a kubeconfig (YAML)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(store))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig = (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: stub\n  cluster:\n    server: {url}\n"
        "users:\n- name: stub\n  user:\n    token: stub\n"
        "contexts:\n- name: stub\n  context:\n    cluster: stub\n    user: stub\n"
        "current-context: stub\n"
    )
    return server, kubeconfig
