"""One Helm action on the chart through Helm's own library (helm-sdkpy),
against the API server of KUBECONFIG: what the chart tests in
lab-apiserver/tests/helm.rs run.

Usage: python3 charts/tests/helm_action.py KUBECONFIG ACTION [VALUES_JSON]
ACTION: install | upgrade | status | history | rollback | uninstall
(rollback goes back to revision 1). Prints the action's result as JSON;
exits 1 with Helm's error on failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

NAMESPACE = "metallb-system"
RELEASE = "metallb-rs"


def main() -> int:
    import helm_sdkpy as helm

    kubeconfig, action = sys.argv[1], sys.argv[2]
    values = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    chart = str(Path(__file__).resolve().parents[1] / "metallb-rs")
    # Helm writes its caches under HOME; keep them out of the user's.
    os.environ.setdefault("HELM_CACHE_HOME", tempfile.mkdtemp(prefix="helm-cache-"))
    cfg = helm.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig)
    run = {
        "install": lambda: helm.Install(cfg).run(RELEASE, chart, values=values, wait=False, timeout=60),
        "upgrade": lambda: helm.Upgrade(cfg).run(RELEASE, chart, values=values, wait=False),
        "status": lambda: helm.Status(cfg).run(RELEASE),
        "history": lambda: helm.History(cfg).run(RELEASE),
        "rollback": lambda: helm.Rollback(cfg).run(RELEASE, 1),
        "uninstall": lambda: helm.Uninstall(cfg).run(RELEASE, wait=False),
    }[action]
    try:
        result = asyncio.run(run())
    except Exception as e:  # Helm's errors: say which action and why
        print(f"helm {action}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
