//! MetalLB's custom resources as Rust types: group `metallb.io`, the same
//! kinds, versions, field names, defaults and validations as upstream, so a
//! MetalLB user's YAML deserializes unchanged.
//!
//! This module only describes the API: it does no I/O and holds no logic
//! beyond schema generation. Semantic checks live in [`crate::config`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

mod conversion;
pub mod schema;
pub mod v1beta1;
pub mod v1beta2;

/// The API group of every MetalLB kind.
pub const GROUP: &str = "metallb.io";

/// The namespace MetalLB objects live in unless configured otherwise.
pub const DEFAULT_NAMESPACE: &str = "metallb-system";

/// Every CustomResourceDefinition metallb-rs serves, sorted by name, with
/// multi-version kinds merged (BGPPeer: v1beta2 stored, v1beta1 served and
/// deprecated).
pub fn crds() -> Vec<CustomResourceDefinition> {
    let bgppeer = kube::core::crd::merge_crds(
        vec![v1beta1::BGPPeer::crd(), v1beta2::BGPPeer::crd()],
        "v1beta2",
    )
    .expect("BGPPeer v1beta1 and v1beta2 describe the same kind");
    let mut crds = vec![
        v1beta1::IPAddressPool::crd(),
        v1beta1::L2Advertisement::crd(),
        v1beta1::BGPAdvertisement::crd(),
        bgppeer,
        v1beta1::BFDProfile::crd(),
        v1beta1::Community::crd(),
        v1beta1::ServiceL2Status::crd(),
        v1beta1::ServiceBGPStatus::crd(),
        v1beta1::ConfigurationState::crd(),
    ];
    for crd in &mut crds {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
        // controller-gen lists versions oldest first; merge_crds puts the
        // stored one first.
        crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                let mut value = serde_json::to_value(&*schema).expect("schema serializes");
                schema::normalize(&mut value);
                schema::add_root_properties(&mut value);
                // Upstream requires `spec` at the root of IPAddressPool only.
                if crd.spec.names.plural != "ipaddresspools" {
                    if let Some(required) = value.get_mut("required").and_then(Value::as_array_mut) {
                        required.retain(|r| r != "spec");
                        if required.is_empty() {
                            value.as_object_mut().map(|o| o.remove("required"));
                        }
                    }
                }
                *schema = serde_json::from_value(value).expect("normalized schema deserializes");
            }
        }
    }
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    crds
}

/// The openAPIV3Schema of `plural` at `version`, as JSON, for validating
/// objects offline.
pub fn schema_for(plural: &str, version: &str) -> Option<Value> {
    crds()
        .into_iter()
        .find(|crd| crd.spec.names.plural == plural)?
        .spec
        .versions
        .into_iter()
        .find(|v| v.name == version)?
        .schema?
        .open_api_v3_schema
        .map(|s| serde_json::to_value(s).expect("schema serializes"))
}
