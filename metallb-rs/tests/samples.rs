//! YAML samples of every kind: the valid ones (covering every field)
//! survive deserialize -> serialize unchanged and pass the generated
//! schema; each invalid one is rejected by the generated openAPIV3Schema at
//! the field path its first line names (`# schema-error: <path>`).

use metallb_rs::api::{v1beta1, v1beta2};
use metallb_rs::config::load::{Loaded, Schemas};
use metallb_rs::config::{Config, Options};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn samples(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/samples")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("samples dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no samples in {}", dir.display());
    files
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            serde_json::to_value(
                <serde_yaml::Value as serde::Deserialize>::deserialize(d).expect("yaml"),
            )
            .expect("json")
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Value {
    let typed: T = serde_path_to_error::deserialize(doc.clone()).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(typed).expect("serializes")
}

fn plural(kind: &str) -> String {
    match kind {
        "Community" => "communities".into(),
        k if k.ends_with("Status") => format!("{}es", k.to_lowercase()),
        k => format!("{}s", k.to_lowercase()),
    }
}

#[test]
fn valid_samples_round_trip_and_pass_the_schema() {
    let schemas = Schemas::compile();
    let mut kinds = std::collections::BTreeSet::new();
    for file in samples("valid") {
        for doc in documents(&file) {
            let kind = doc["kind"].as_str().expect("kind").to_owned();
            let version = doc["apiVersion"]
                .as_str()
                .expect("apiVersion")
                .rsplit('/')
                .next()
                .expect("version")
                .to_owned();
            if kind == "Secret" {
                continue;
            }
            let errors = schemas.check(&plural(&kind), &version, &doc);
            assert!(errors.is_empty(), "{}: {kind}: {errors:?}", file.display());
            let back = match (kind.as_str(), version.as_str()) {
                ("IPAddressPool", _) => round_trip::<v1beta1::IPAddressPool>(&doc),
                ("L2Advertisement", _) => round_trip::<v1beta1::L2Advertisement>(&doc),
                ("BGPAdvertisement", _) => round_trip::<v1beta1::BGPAdvertisement>(&doc),
                ("BGPPeer", "v1beta1") => round_trip::<v1beta1::BGPPeer>(&doc),
                ("BGPPeer", "v1beta2") => round_trip::<v1beta2::BGPPeer>(&doc),
                ("BFDProfile", _) => round_trip::<v1beta1::BFDProfile>(&doc),
                ("Community", _) => round_trip::<v1beta1::Community>(&doc),
                ("ServiceL2Status", _) => round_trip::<v1beta1::ServiceL2Status>(&doc),
                ("ServiceBGPStatus", _) => round_trip::<v1beta1::ServiceBGPStatus>(&doc),
                ("ConfigurationState", _) => round_trip::<v1beta1::ConfigurationState>(&doc),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(back, doc, "{}: {kind} did not round-trip", file.display());
            kinds.insert(format!("{kind}/{version}"));
        }
    }
    assert_eq!(
        kinds.len(),
        10,
        "every kind and BGPPeer version has a sample: {kinds:?}"
    );
}

#[test]
fn valid_samples_make_one_valid_config() {
    let schemas = Schemas::compile();
    let mut loaded = Loaded::default();
    for file in samples("valid") {
        loaded.add_text(
            &file,
            &std::fs::read_to_string(&file).expect("readable"),
            &schemas,
        );
    }
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let config =
        Config::build(&loaded.resources, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.pools.len(), 3);
    assert_eq!(config.peers.len(), 3);
    let router = config
        .peers
        .iter()
        .find(|p| p.name == "router")
        .expect("router");
    assert_eq!(
        router.password.as_ref().map(|p| p.expose()),
        Some("s3cr3t"),
        "passwordSecret resolved"
    );
    let ext = config
        .bgp_advertisements
        .iter()
        .find(|a| a.name == "external")
        .expect("external");
    assert!(
        ext.communities
            .contains(&"65535:65282".parse().expect("community")),
        "alias resolved"
    );
}

#[test]
fn each_invalid_sample_is_rejected_at_its_field() {
    let schemas = Schemas::compile();
    for file in samples("invalid") {
        let text = std::fs::read_to_string(&file).expect("readable");
        let expected = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# schema-error: "))
            .unwrap_or_else(|| {
                panic!(
                    "{}: first line must be `# schema-error: <path>`",
                    file.display()
                )
            });
        let mut loaded = Loaded::default();
        loaded.add_text(&file, &text, &schemas);
        let fields: Vec<&str> = loaded
            .errors
            .iter()
            .map(|(_, e)| e.field.as_str())
            .collect();
        assert!(
            fields.contains(&expected),
            "{}: expected a schema error at {expected:?}, got {:?}",
            file.display(),
            loaded
                .errors
                .iter()
                .map(|(_, e)| e.to_string())
                .collect::<Vec<_>>()
        );
    }
}

/// Upstream's documentation shows L2Advertisements (and BGPAdvertisements)
/// with no `spec` at all; they must load and mean "all pools".
#[test]
fn advertisements_without_spec_deserialize() {
    for kind in [
        "L2Advertisement",
        "BGPAdvertisement",
        "Community",
        "BFDProfile",
    ] {
        let doc = serde_json::json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": kind,
            "metadata": { "name": "example", "namespace": "metallb-system" },
        });
        let ok = match kind {
            "L2Advertisement" => serde_json::from_value::<v1beta1::L2Advertisement>(doc)
                .map(|a| a.spec == Default::default()),
            "BGPAdvertisement" => serde_json::from_value::<v1beta1::BGPAdvertisement>(doc)
                .map(|a| a.spec == Default::default()),
            "Community" => serde_json::from_value::<v1beta1::Community>(doc)
                .map(|a| a.spec == Default::default()),
            _ => serde_json::from_value::<v1beta1::BFDProfile>(doc)
                .map(|a| a.spec == Default::default()),
        };
        assert!(
            ok.unwrap_or_else(|e| panic!("{kind}: {e}")),
            "{kind} spec defaults"
        );
    }
    // A spec that is present but wrong is still an error with its path.
    let bad = serde_json::json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": { "name": "x" }, "spec": { "interfaces": "eth0" },
    });
    let err =
        serde_path_to_error::deserialize::<_, v1beta1::L2Advertisement>(bad).expect_err("invalid");
    assert_eq!(err.path().to_string(), "spec.interfaces");
}
