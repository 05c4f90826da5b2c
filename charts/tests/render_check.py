"""The chart's drift check: render charts/metallb-rs through Helm's own
library (helm-sdkpy) and compare, object by object, with the generated
manifests.

helm-sdkpy has no `template` (no client-side dry run), so the chart is
installed into stub_apiserver (in memory, no cluster, no root) and the
release's manifest is what Helm rendered. Checks:

1. default values == manifests/metallb-native.yaml, less the Namespace
   (Helm's release lives in it, so the chart cannot own it) and with
   `helm.sh/resource-policy: keep` on the CRDs (kept on uninstall);
2. prometheus.podMonitor and prometheusRule on == the same, plus
   manifests/prometheus/metallb-native-prometheus.yaml.

Before both, `helm lint` (Helm's library, no cluster): a warning or an
error fails the check.

Usage: python3 charts/tests/render_check.py [REPO_ROOT]; exits 1 on drift
or a lint finding, printing each differing object and field.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stub_apiserver  # noqa: E402

NAMESPACE = "metallb-system"
RELEASE = "metallb-rs"
KEEP = "helm.sh/resource-policy"


def render(chart: Path, values: dict | None) -> list[dict]:
    """The objects Helm renders for `values`, by installing into a stub."""
    import helm_sdkpy as helm

    store = stub_apiserver.Store()
    server, kubeconfig = stub_apiserver.serve(store)
    try:
        cfg = helm.Configuration(namespace=NAMESPACE, kubeconfig=kubeconfig)
        release = asyncio.run(helm.Install(cfg).run(RELEASE, str(chart), values=values, wait=False, timeout=60))
    finally:
        server.shutdown()
    return [d for d in yaml.safe_load_all(release["manifest"]) if d]


# Helm's lint severities (pkg/lint/support): 1 info, 2 warning, 3 error.
LINT_FAILS_FROM = 2


def lint(chart: Path) -> list[str]:
    """Helm lint's warnings and errors. helm-sdkpy drops the messages'
    text (`Err` comes back empty), so a finding names where it is."""
    import helm_sdkpy as helm

    cfg = helm.Configuration(namespace=NAMESPACE, kubeconfig="/nonexistent")
    result = asyncio.run(helm.Lint(cfg).run(str(chart)))
    found = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= LINT_FAILS_FROM]
    print(f"lint: {len(result.get('Messages') or [])} message(s), {len(found)} warning(s) or error(s)")
    return [f"lint: severity {m.get('Severity')} at {m.get('Path')}: {m.get('Err') or '(helm-sdkpy gives no text)'}"
            for m in found]


def load(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def key(o: dict) -> str:
    return f'{o["kind"]} {o["metadata"].get("namespace", "")}/{o["metadata"]["name"]}'.replace(" /", " ")


def normalize(o: dict) -> dict:
    """The allowed difference: the CRDs' keep policy."""
    meta = o.get("metadata", {})
    annotations = meta.get("annotations") or {}
    if o.get("kind") == "CustomResourceDefinition" and annotations.get(KEEP) == "keep":
        annotations.pop(KEEP)
        if not annotations:
            meta.pop("annotations")
    return o


def diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}"
            if k not in a:
                out.append(f"{p}: only in the chart: {b[k]!r}"[:300])
            elif k not in b:
                out.append(f"{p}: only in the manifest: {a[k]!r}"[:300])
            else:
                out += diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: manifest {a!r} != chart {b!r}"[:300]]


def compare(name: str, want: list[dict], got: list[dict]) -> list[str]:
    want = {key(o): o for o in want if o["kind"] != "Namespace"}
    got = {key(normalize(o)): o for o in got}
    problems = [f"{name}: {k}: missing from the chart" for k in want if k not in got]
    problems += [f"{name}: {k}: not in the manifest" for k in got if k not in want]
    for k in sorted(set(want) & set(got)):
        problems += [f"{name}: {k}: {d}" for d in diff(want[k], got[k])]
    print(f"{name}: {len(got)} object(s) rendered, {len(want)} expected, "
          f"{len(problems)} difference(s)")
    return problems


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    chart = root / "charts" / "metallb-rs"
    native = load(root / "manifests" / "metallb-native.yaml")
    prometheus = load(root / "manifests" / "prometheus" / "metallb-native-prometheus.yaml")
    # Helm writes its caches under HOME; keep them out of the user's.
    os.environ.setdefault("HELM_CACHE_HOME", tempfile.mkdtemp(prefix="helm-cache-"))
    problems = lint(chart)
    problems += compare("defaults", native, render(chart, None))
    problems += compare(
        "prometheus",
        native + prometheus,
        render(chart, {"prometheus": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}),
    )
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
