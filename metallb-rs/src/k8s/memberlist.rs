//! The `memberlist` Secret: the key speakers encrypt and authenticate
//! their gossip with. The controller creates it when missing (as
//! upstream's does), so a fresh install needs no manual step; an existing
//! one is never changed (rotating it would split running speakers).

use super::call::{ErrorClass, call, classify};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use rand::TryRng as _;

/// The Secret's default name.
pub const DEFAULT_SECRET_NAME: &str = "memberlist";
/// The key holding the shared secret.
pub const SECRET_KEY: &str = "secretkey";
/// Random bytes in a new secret (upstream's size).
const SECRET_BYTES: usize = 128;

/// A new Secret `name` in `namespace` holding fresh random bytes from
/// the operating system.
pub fn new_secret(name: &str, namespace: &str) -> anyhow::Result<Secret> {
    let mut key = vec![0u8; SECRET_BYTES];
    rand::rngs::SysRng.try_fill_bytes(&mut key).map_err(|e| {
        anyhow::anyhow!("no randomness from the operating system for the memberlist key: {e}")
    })?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([("app".to_owned(), "metallb".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([(SECRET_KEY.to_owned(), ByteString(key))].into()),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    })
}

/// Creates Secret `name` when it does not exist; true when it created it.
/// A concurrent creation by another replica counts as existing.
pub async fn ensure(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<bool> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    if call(api.get_opt(name)).await?.is_some() {
        return Ok(false);
    }
    match call(api.create(&PostParams::default(), &new_secret(name, namespace)?)).await {
        Ok(_) => Ok(true),
        Err(e) if classify(&e) == ErrorClass::Conflict => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_secrets_hold_distinct_random_keys() {
        let a = new_secret(DEFAULT_SECRET_NAME, "metallb-system").expect("secret");
        let b = new_secret(DEFAULT_SECRET_NAME, "metallb-system").expect("secret");
        let key = |s: &Secret| s.data.as_ref().and_then(|d| d.get(SECRET_KEY)).cloned();
        let (ka, kb) = (key(&a).expect("key"), key(&b).expect("key"));
        assert_eq!(ka.0.len(), SECRET_BYTES);
        assert_ne!(ka, kb);
        assert_eq!(a.metadata.namespace.as_deref(), Some("metallb-system"));
    }
}
