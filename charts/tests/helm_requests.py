"""What Helm asks of an API server, action by action: install, upgrade
(speaker.logLevel debug), status, get-values, history, rollback, uninstall of
charts/metallb-rs through helm-sdkpy against stub_apiserver, printing each
distinct request (method, path pattern, query keys, Content-Type) with its
count. The list the lab API server must serve for `cargo xtask test`'s Helm
steps; run it again after changing the chart or upgrading helm-sdkpy.

Usage: python3 charts/tests/helm_requests.py [REPO_ROOT]
"""

from __future__ import annotations

import asyncio
import collections
import re
import sys
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stub_apiserver  # noqa: E402

NAMESPACE = "metallb-system"
RELEASE = "metallb-rs"


def pattern(path: str) -> str:
    """/api/v1/namespaces/NS/secrets/NAME -> /api/v1/namespaces/{ns}/secrets/{name}."""
    parts = path.split("/")
    base = 3 if parts[1:2] == ["api"] else 4  # /api/V or /apis/G/V
    rest = parts[base:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = ["namespaces", "{ns}"] + rest[2:]
    if len(rest) in (2, 4):  # R/NAME or namespaces/{ns}/R/NAME
        rest = rest[:-1] + ["{name}"]
    return "/".join(parts[:base] + rest)


def summary(log: list[dict]) -> list[str]:
    counts: collections.Counter = collections.Counter()
    for e in log:
        query = ",".join(sorted(urllib.parse.parse_qs(e["query"]).keys()))
        counts[(e["method"], pattern(e["path"]), query, e["content_type"].split(";")[0])] += 1
    return [f"{n:3} {m} {p}{'?' + q if q else ''} {c}".rstrip() for (m, p, q, c), n in sorted(counts.items())]


def main() -> int:
    import helm_sdkpy as helm

    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    chart = str(root / "charts" / "metallb-rs")
    store = stub_apiserver.Store()
    server, kubeconfig = stub_apiserver.serve(store)
    cfg = helm.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig)
    actions = [
        ("install", helm.Install(cfg).run(RELEASE, chart, wait=False, timeout=60)),
        ("upgrade (speaker.logLevel=debug)",
         helm.Upgrade(cfg).run(RELEASE, chart, values={"speaker": {"logLevel": "debug"}}, wait=False, timeout=60)),
        ("status", helm.Status(cfg).run(RELEASE)),
        ("get-values", helm.GetValues(cfg).run(RELEASE)),
        ("history", helm.History(cfg).run(RELEASE)),
        ("rollback (to 1)", helm.Rollback(cfg).run(RELEASE, 1)),
        ("uninstall", helm.Uninstall(cfg).run(RELEASE, wait=False, timeout=60)),
    ]
    failed = 0
    for name, action in actions:
        start = len(store.log)
        try:
            result = asyncio.run(action)
            brief = result
            if isinstance(result, dict) and "version" in result:
                brief = {"version": result["version"], "status": result.get("info", {}).get("status")}
            print(f"== {name}: ok {str(brief)[:300]}")
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print(f"== {name}: FAILED {type(e).__name__}: {e}"[:600])
        for line in summary(store.log[start:]):
            print("   " + line)
    left = sorted(k for k in store.objects if k[1] != "secrets" or not k[3].startswith("sh.helm.release"))
    print(f"== left after uninstall: {[f'{p}/{n}' for _, p, _, n in left]}")
    server.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
