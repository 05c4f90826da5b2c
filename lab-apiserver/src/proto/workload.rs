//! The protobuf form of the Deployment `kubectl create deployment` sends
//! (it has no JSON fallback): the fields that command can set, decoded to
//! JSON. Fields outside these messages are skipped by the decoder.

use super::meta::{ObjectMeta, meta, put};
use prost::Message;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Message)]
pub(super) struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    match_labels: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct ContainerPort {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    host_port: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    container_port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct Container {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    image: Option<String>,
    #[prost(string, repeated, tag = "3")]
    command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    args: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    ports: Vec<ContainerPort>,
    #[prost(string, optional, tag = "14")]
    image_pull_policy: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct PodSpec {
    #[prost(message, repeated, tag = "2")]
    containers: Vec<Container>,
    #[prost(string, optional, tag = "3")]
    restart_policy: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct PodTemplateSpec {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodSpec>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct DeploymentStrategy {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct DeploymentSpec {
    #[prost(int32, optional, tag = "1")]
    replicas: Option<i32>,
    #[prost(message, optional, tag = "2")]
    selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    template: Option<PodTemplateSpec>,
    #[prost(message, optional, tag = "4")]
    strategy: Option<DeploymentStrategy>,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct Deployment {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<DeploymentSpec>,
}

fn container(c: Container) -> Value {
    let mut out = Map::new();
    put(&mut out, "name", json!(c.name));
    put(&mut out, "image", json!(c.image));
    put(&mut out, "command", json!(c.command));
    put(&mut out, "args", json!(c.args));
    let ports: Vec<Value> = c
        .ports
        .into_iter()
        .map(|p| {
            let mut port = Map::new();
            put(&mut port, "name", json!(p.name));
            put(&mut port, "hostPort", json!(p.host_port));
            put(&mut port, "containerPort", json!(p.container_port));
            put(&mut port, "protocol", json!(p.protocol));
            Value::Object(port)
        })
        .collect();
    put(&mut out, "ports", json!(ports));
    put(&mut out, "imagePullPolicy", json!(c.image_pull_policy));
    Value::Object(out)
}

/// The JSON form of a protobuf apps/v1 Deployment.
pub(super) fn deployment(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let d = Deployment::decode(raw)?;
    let spec = d.spec.unwrap_or_default();
    let template = spec.template.unwrap_or_default();
    let pod = template.spec.unwrap_or_default();
    let mut pod_spec = Map::new();
    put(
        &mut pod_spec,
        "containers",
        json!(
            pod.containers
                .into_iter()
                .map(container)
                .collect::<Vec<_>>()
        ),
    );
    put(&mut pod_spec, "restartPolicy", json!(pod.restart_policy));
    let mut out_spec = Map::new();
    put(&mut out_spec, "replicas", json!(spec.replicas));
    out_spec.insert(
        "selector".into(),
        json!({ "matchLabels": spec.selector.unwrap_or_default().match_labels }),
    );
    out_spec.insert(
        "template".into(),
        json!({ "metadata": meta(template.metadata), "spec": pod_spec }),
    );
    if let Some(t) = spec.strategy.and_then(|s| s.type_) {
        out_spec.insert("strategy".into(), json!({ "type": t }));
    }
    Ok(json!({ "metadata": meta(d.metadata), "spec": out_spec }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_kubectl_create_deployment_sends() {
        let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        let d = Deployment {
            metadata: Some(ObjectMeta {
                name: Some("web".into()),
                labels: labels.clone(),
                ..Default::default()
            }),
            spec: Some(DeploymentSpec {
                replicas: Some(2),
                selector: Some(LabelSelector {
                    match_labels: labels.clone(),
                }),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels,
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: Some("nginx".into()),
                            image: Some("nginx".into()),
                            ports: vec![ContainerPort {
                                container_port: Some(80),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        restart_policy: None,
                    }),
                }),
                strategy: Some(DeploymentStrategy::default()),
            }),
        };
        let v = deployment(&d.encode_to_vec()).expect("decodes");
        assert_eq!(
            v,
            json!({
                "metadata": { "name": "web", "labels": { "app": "web" } },
                "spec": {
                    "replicas": 2,
                    "selector": { "matchLabels": { "app": "web" } },
                    "template": {
                        "metadata": { "labels": { "app": "web" } },
                        "spec": { "containers": [{ "name": "nginx", "image": "nginx", "ports": [{ "containerPort": 80 }] }] },
                    },
                },
            })
        );
    }
}
