//! Reads MetalLB objects from YAML files (multi-document, `kind: List`
//! accepted), checks each against its CRD's openAPIV3Schema and its CEL
//! rules (`x-kubernetes-validations`, as on create), and collects
//! them into [`Resources`]. Used by `metallb-rs validate` and tests.

use super::Resources;
use super::error::{ConfigError, ObjectRef};
use crate::api::{self, v1beta1, v1beta2};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Objects read from files, where each came from, and every problem met.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The MetalLB objects and Secrets found.
    pub resources: Resources,
    /// File each object was read from.
    pub origins: BTreeMap<(String, String), PathBuf>,
    /// YAML, schema and type errors, each with its field path.
    pub errors: Vec<(PathBuf, ConfigError)>,
    /// Documents that are not MetalLB objects or Secrets (ignored).
    pub skipped: usize,
}

/// Compiled CRD schemas (and the schema, for its CEL rules), by
/// `(plural, version)`.
pub struct Schemas(BTreeMap<(String, String), (jsonschema::Validator, Value)>);

impl Schemas {
    /// Compiles the schema of every served version of every CRD.
    pub fn compile() -> Self {
        let mut map = BTreeMap::new();
        for crd in api::crds() {
            for version in crd.spec.versions {
                if let Some(schema) = version.schema.and_then(|s| s.open_api_v3_schema) {
                    let schema = serde_json::to_value(schema).expect("schema serializes");
                    let validator =
                        jsonschema::draft4::new(&schema).expect("generated CRD schemas compile");
                    map.insert(
                        (crd.spec.names.plural.clone(), version.name),
                        (validator, schema),
                    );
                }
            }
        }
        Schemas(map)
    }

    /// Every schema violation of `object` (a `plural` at `version`), as
    /// `(field path, message)`; with none, every CEL rule it breaks.
    pub fn check(&self, plural: &str, version: &str, object: &Value) -> Vec<(String, String)> {
        let Some((v, schema)) = self.0.get(&(plural.to_owned(), version.to_owned())) else {
            return vec![(String::new(), format!("no schema for {plural}/{version}"))];
        };
        let errors: Vec<(String, String)> = v
            .iter_errors(object)
            .map(|e| {
                (
                    pointer_to_path(&e.instance_path().to_string()),
                    e.to_string(),
                )
            })
            .collect();
        if !errors.is_empty() {
            return errors;
        }
        crd_cel::validate(object, None, schema)
            .into_iter()
            .map(|v| (v.field, v.message))
            .collect()
    }
}

/// `/spec/addresses/1` -> `spec.addresses[1]`.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').filter(|s| !s.is_empty()) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if seg.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

/// The YAML files named by `paths`: files as given, directories searched
/// for `*.yaml` / `*.yml` / `*.json` (recursively, sorted).
pub fn expand(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()?;
            entries.sort();
            for e in entries {
                let is_yaml = e
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json");
                if e.is_dir() || is_yaml {
                    out.extend(expand(&[e])?);
                }
            }
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

impl Loaded {
    /// Loads every document of `text` (read from `path`).
    pub fn add_text(&mut self, path: &Path, text: &str, schemas: &Schemas) {
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let file = ObjectRef::new("file", "", &path.display().to_string());
            match serde::Deserialize::deserialize(doc)
                .map(|v: serde_yaml::Value| serde_json::to_value(v))
            {
                Ok(Ok(Value::Null)) => {}
                Ok(Ok(value)) => self.add_value(path, value, schemas),
                Ok(Err(e)) => self.errors.push((
                    path.into(),
                    ConfigError::new(&file, format!("document {}", i + 1), e.to_string()),
                )),
                Err(e) => {
                    self.errors.push((
                        path.into(),
                        ConfigError::new(
                            &file,
                            format!("document {}", i + 1),
                            format!("invalid YAML: {e}"),
                        ),
                    ));
                    // The YAML stream cannot resume after a syntax error.
                    break;
                }
            }
        }
    }

    /// Loads one decoded object (or a `List` of them).
    pub fn add_value(&mut self, path: &Path, value: Value, schemas: &Schemas) {
        let api_version = value["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        if kind.ends_with("List") && value["items"].is_array() {
            if let Value::Array(items) = value["items"].clone() {
                for item in items {
                    self.add_value(path, item, schemas);
                }
            }
            return;
        }
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let namespace = value["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let obj = ObjectRef::new(&kind, &namespace, &name);
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        if group != api::GROUP {
            if api_version == "v1" && kind == "Secret" {
                self.typed(path, &obj, value, |r, s| r.secrets.push(s));
            } else {
                self.skipped += 1;
            }
            return;
        }
        if name.is_empty() {
            self.errors.push((
                path.into(),
                ConfigError::new(&obj, "metadata.name", "missing name"),
            ));
            return;
        }
        let plural = match kind.as_str() {
            "IPAddressPool" => "ipaddresspools",
            "L2Advertisement" => "l2advertisements",
            "BGPAdvertisement" => "bgpadvertisements",
            "BGPPeer" => "bgppeers",
            "BFDProfile" => "bfdprofiles",
            "Community" => "communities",
            "ServiceL2Status" => "servicel2statuses",
            "ServiceBGPStatus" => "servicebgpstatuses",
            "ConfigurationState" => "configurationstates",
            _ => {
                self.errors.push((
                    path.into(),
                    ConfigError::new(
                        &obj,
                        "kind",
                        format!("{kind:?} is not a {} kind", api::GROUP),
                    ),
                ));
                return;
            }
        };
        let schema_errors = schemas.check(plural, version, &value);
        if !schema_errors.is_empty() {
            for (field, message) in schema_errors {
                self.errors
                    .push((path.into(), ConfigError::new(&obj, field, message)));
            }
            return;
        }
        self.origins.insert((kind.clone(), name), path.into());
        match (kind.as_str(), version) {
            ("IPAddressPool", _) => {
                self.typed(path, &obj, value, |r, o: v1beta1::IPAddressPool| {
                    r.pools.push(o)
                })
            }
            ("L2Advertisement", _) => {
                self.typed(path, &obj, value, |r, o| r.l2_advertisements.push(o))
            }
            ("BGPAdvertisement", _) => {
                self.typed(path, &obj, value, |r, o| r.bgp_advertisements.push(o))
            }
            ("BGPPeer", "v1beta1") => self.typed(path, &obj, value, |r, o: v1beta1::BGPPeer| {
                r.peers.push(o.into())
            }),
            ("BGPPeer", _) => {
                self.typed(path, &obj, value, |r, o: v1beta2::BGPPeer| r.peers.push(o))
            }
            ("BFDProfile", _) => self.typed(path, &obj, value, |r, o| r.bfd_profiles.push(o)),
            ("Community", _) => self.typed(path, &obj, value, |r, o| r.communities.push(o)),
            // Status kinds are written by MetalLB itself: schema-checked only.
            _ => {}
        }
    }

    fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &Path,
        obj: &ObjectRef,
        value: Value,
        push: impl FnOnce(&mut Resources, T),
    ) {
        match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(o) => push(&mut self.resources, o),
            Err(e) => {
                let field = e.path().to_string();
                let field = if field == "." { String::new() } else { field };
                self.errors.push((
                    path.into(),
                    ConfigError::new(obj, field, e.into_inner().to_string()),
                ));
            }
        }
    }
}

/// Loads every file under `paths`. I/O errors are reported per file.
pub fn load_paths(paths: &[PathBuf]) -> Loaded {
    let schemas = Schemas::compile();
    let mut loaded = Loaded::default();
    let files = match expand(paths) {
        Ok(f) => f,
        Err(e) => {
            let obj = ObjectRef::new(
                "file",
                "",
                &paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
            loaded.errors.push((
                PathBuf::new(),
                ConfigError::new(&obj, "", format!("cannot read: {e}")),
            ));
            return loaded;
        }
    };
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => loaded.add_text(&file, &text, &schemas),
            Err(e) => {
                let obj = ObjectRef::new("file", "", &file.display().to_string());
                loaded.errors.push((
                    file.clone(),
                    ConfigError::new(&obj, "", format!("cannot read: {e}")),
                ));
            }
        }
    }
    loaded
}
