//! The webhook's serving certificate, without cert-manager: a CA and a
//! leaf for `<service>.<namespace>.svc`, kept in a Secret that every
//! replica shares, and the caBundle the API server verifies it with.
//! Decides (is the stored pair still good? which caBundle fields are
//! stale?) and generates; reading and writing the Secret and the
//! ValidatingWebhookConfiguration is `k8s::webhook_certs`' job.
//!
//! Validity is checked the way a client checks it (rustls' WebPKI
//! verifier: chain to the stored CA, DNS name, expiry), at now plus
//! [`RENEW_BEFORE`], as upstream's cert-controller does.
//!
//! A renewal keeps what other replicas and the API server already trust
//! ([`renew`]): a new leaf is signed by the stored CA (its key is kept in
//! the Secret), so the caBundle does not change; only when the CA itself
//! must go is a new one made, and the previous CA stays in the caBundle
//! beside it while the leaf it signed is valid - a replica still serving
//! that leaf until its next round (up to a minute) is not refused as
//! "x509: certificate signed by unknown authority".

use base64::Engine as _;
use k8s_openapi::ByteString;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long the CA is valid (cert-controller's 10 years).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a serving certificate is valid (cert-controller's 1 year).
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A pair expiring sooner than this is replaced (cert-controller's 90 days).
pub const RENEW_BEFORE: Duration = Duration::from_secs(90 * 24 * 3600);
/// Keys in the Secret (cert-controller's, so a Secret it made is read).
pub const CA_CERT: &str = "ca.crt";
/// The serving certificate's key in the Secret.
pub const TLS_CERT: &str = "tls.crt";
/// The serving key's key in the Secret.
pub const TLS_KEY: &str = "tls.key";
/// The CA's key in the Secret (as cert-controller keeps it): a leaf is
/// renewed under the same CA.
pub const CA_KEY: &str = "ca.key";

/// Why a certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused to generate.
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The PEM could not be read.
    #[error("reading the webhook certificate: {0}")]
    Pem(String),
    /// rustls refused the key.
    #[error("loading the webhook key: {0}")]
    Key(#[from] rustls::Error),
}

/// A CA and a serving certificate signed by it, as PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The CA certificates (the caBundle): the current CA first, then,
    /// after a CA rotation, the previous one.
    pub ca_pem: String,
    /// The current CA's key (none in a Secret made without it).
    pub ca_key_pem: Option<String>,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Bundle {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle").finish_non_exhaustive()
    }
}

/// The name the API server dials a webhook Service by.
pub fn dns_name(service: &str, namespace: &str) -> String {
    format!("{service}.{namespace}.svc")
}

/// `t` as rcgen's date type (whole seconds; before 1970 reads as 1970).
fn date(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// The CA's parameters: a leaf signed under them and the CA's key
/// chains to every CA certificate made with that key (same subject, same
/// key identifier).
fn ca_params(now: SystemTime) -> Result<rcgen::CertificateParams, CertError> {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "metallb-webhook-ca");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = date(now - Duration::from_secs(3600));
    ca.not_after = date(now + CA_VALIDITY);
    Ok(ca)
}

/// A leaf for `dns` signed by `issuer`: (certificate, key) as PEM.
fn leaf(
    dns: &str,
    now: SystemTime,
    issuer: &rcgen::Issuer<'_, rcgen::KeyPair>,
) -> Result<(String, String), CertError> {
    let key = rcgen::KeyPair::generate()?;
    let mut leaf = rcgen::CertificateParams::new(vec![dns.to_owned()])?;
    leaf.distinguished_name.push(rcgen::DnType::CommonName, dns);
    leaf.not_before = date(now - Duration::from_secs(3600));
    leaf.not_after = date(now + LEAF_VALIDITY);
    let cert = leaf.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A fresh CA and a leaf for `dns`, valid from an hour before `now`
/// (clock skew between nodes).
pub fn generate(dns: &str, now: SystemTime) -> Result<Bundle, CertError> {
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca_cert = ca_params(now)?.self_signed(&ca_key)?;
    let (cert_pem, key_pem) = leaf(dns, now, &rcgen::Issuer::new(ca_params(now)?, ca_key))?;
    Ok(Bundle {
        ca_pem: ca_cert.pem(),
        ca_key_pem: Some(ca_key_pem),
        cert_pem,
        key_pem,
    })
}

/// The first certificate of a PEM text (the current CA of a caBundle).
fn first_pem(pem: &str) -> Option<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let end = pem.find(END)? + END.len();
    Some(format!("{}\n", pem[..end].trim_start()))
}

/// A new pair to store in place of the Secret's `data`, keeping what is
/// trusted (see the module docs): a leaf signed by the stored CA when
/// that CA is still good past [`RENEW_BEFORE`]; else a new CA, with the
/// stored one beside it in the caBundle while the stored leaf is valid.
pub fn renew(
    data: Option<&BTreeMap<String, ByteString>>,
    dns: &str,
    now: SystemTime,
) -> Result<Bundle, CertError> {
    let text = |key: &str| {
        data.and_then(|d| d.get(key))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .filter(|s| !s.is_empty())
    };
    let current_ca = text(CA_CERT).and_then(|pem| first_pem(&pem));
    if let (Some(ca_pem), Some(ca_key_pem)) = (&current_ca, text(CA_KEY))
        && let Ok(ca_key) = rcgen::KeyPair::from_pem(&ca_key_pem)
    {
        let (cert_pem, key_pem) = leaf(dns, now, &rcgen::Issuer::new(ca_params(now)?, ca_key))?;
        let same_ca = Bundle {
            ca_pem: ca_pem.clone(),
            ca_key_pem: Some(ca_key_pem),
            cert_pem,
            key_pem,
        };
        // Fails when the key is not the CA's, or the CA expires too soon.
        if valid_at(&same_ca, dns, now + RENEW_BEFORE).is_ok() {
            return Ok(same_ca);
        }
    }
    let mut fresh = generate(dns, now)?;
    if let (Some(ca_pem), Some(cert_pem)) = (current_ca, text(TLS_CERT)) {
        let previous = Bundle {
            ca_pem,
            ca_key_pem: None,
            cert_pem,
            key_pem: String::new(),
        };
        if valid_at(&previous, dns, now).is_ok() {
            fresh.ca_pem.push_str(&previous.ca_pem);
        }
    }
    Ok(fresh)
}

/// A self-signed certificate for `host` (its CN and name), for a server
/// whose clients do not verify it (the metrics without
/// `--metrics-cert-dir`, as upstream); valid from an hour before `now`
/// for [`LEAF_VALIDITY`].
pub fn self_signed(host: &str, now: SystemTime) -> Result<Bundle, CertError> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec![host.to_owned()])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, host);
    params.not_before = date(now - Duration::from_secs(3600));
    params.not_after = date(now + LEAF_VALIDITY);
    let cert = params.self_signed(&key)?;
    Ok(Bundle {
        ca_pem: cert.pem(),
        ca_key_pem: None,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// What to do with the Secret's contents.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// The stored pair is good until past the renewal margin.
    Use(Bundle),
    /// Generate a new pair and store it.
    Renew {
        /// Why, for the log.
        reason: String,
    },
}

/// Decides on the Secret's `data` (none: no Secret, or an empty one, as
/// the manifests ship it).
pub fn decide(data: Option<&BTreeMap<String, ByteString>>, dns: &str, now: SystemTime) -> Decision {
    let text = |key: &str| -> Result<String, String> {
        let bytes = data
            .and_then(|d| d.get(key))
            .filter(|b| !b.0.is_empty())
            .ok_or_else(|| format!("no {key}"))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| format!("{key} is not PEM text"))
    };
    let bundle = match (text(CA_CERT), text(TLS_CERT), text(TLS_KEY)) {
        (Ok(ca_pem), Ok(cert_pem), Ok(key_pem)) => Bundle {
            ca_pem,
            ca_key_pem: text(CA_KEY).ok(),
            cert_pem,
            key_pem,
        },
        (a, b, c) => {
            let reason = [a, b, c]
                .into_iter()
                .filter_map(Result::err)
                .collect::<Vec<_>>()
                .join(", ");
            return Decision::Renew { reason };
        }
    };
    if let Err(e) = certified_key(&bundle) {
        return Decision::Renew {
            reason: e.to_string(),
        };
    }
    match valid_at(&bundle, dns, now + RENEW_BEFORE) {
        Ok(()) => Decision::Use(bundle),
        Err(e) => Decision::Renew {
            reason: format!("not valid for {dns} {RENEW_BEFORE:?} from now: {e}"),
        },
    }
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(CertError::Pem("no certificate".into()));
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Whether a client trusting only the bundle's CA accepts its leaf for
/// `dns` at time `at`.
pub fn valid_at(b: &Bundle, dns: &str, at: SystemTime) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in certs(&b.ca_pem).map_err(|e| e.to_string())? {
        roots.add(ca).map_err(|e| format!("bad CA: {e}"))?;
    }
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| e.to_string())?;
    let chain = certs(&b.cert_pem).map_err(|e| e.to_string())?;
    let name = ServerName::try_from(dns.to_owned()).map_err(|e| e.to_string())?;
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    verifier
        .verify_server_cert(
            &chain[0],
            &chain[1..],
            &name,
            &[],
            UnixTime::since_unix_epoch(since),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The Secret's data for `b`.
pub fn secret_data(b: &Bundle) -> BTreeMap<String, ByteString> {
    [
        (CA_CERT, Some(&b.ca_pem)),
        (CA_KEY, b.ca_key_pem.as_ref()),
        (TLS_CERT, Some(&b.cert_pem)),
        (TLS_KEY, Some(&b.key_pem)),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), ByteString(v?.clone().into_bytes()))))
    .collect()
}

/// The caBundle field's value for `b`.
pub fn ca_bundle(b: &Bundle) -> String {
    base64::engine::general_purpose::STANDARD.encode(&b.ca_pem)
}

/// What keeping the caBundle of the webhooks an object calls current
/// takes.
#[derive(Debug, PartialEq)]
pub enum CaBundlePlan {
    /// The object calls no webhook: a configuration without webhooks, a
    /// CRD whose conversion strategy is not Webhook.
    NoWebhook,
    /// Every webhook it calls already carries the bundle.
    Current,
    /// This JSON patch sets the bundle where it is stale.
    Patch(json_patch::Patch),
}

/// Each `clientConfig` in `object` the API server dials - every webhook's
/// of a ValidatingWebhookConfiguration, the conversion webhook's of a
/// CustomResourceDefinition - with its JSON pointer and a patch `test`
/// that guards writing it: the webhook's name (a concurrent edit
/// reordering the list fails the patch instead of writing the wrong
/// entry), the conversion strategy (one switching it off does too).
fn client_configs(
    object: &serde_json::Value,
) -> Vec<(String, &serde_json::Value, serde_json::Value)> {
    let webhooks = object["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, w)| {
            let test = serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": w["name"]});
            (format!("/webhooks/{i}/clientConfig"), &w["clientConfig"], test)
        });
    let conversion = &object["spec"]["conversion"];
    let converts = (conversion["strategy"] == "Webhook"
        && conversion["webhook"]["clientConfig"].is_object())
    .then(|| {
        let test = serde_json::json!({"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"});
        (
            "/spec/conversion/webhook/clientConfig".to_owned(),
            &conversion["webhook"]["clientConfig"],
            test,
        )
    });
    webhooks.chain(converts).collect()
}

/// How to make every webhook `object` calls carry `bundle` as its
/// `clientConfig.caBundle`.
pub fn ca_bundle_plan(object: &serde_json::Value, bundle: &str) -> CaBundlePlan {
    let configs = client_configs(object);
    if configs.is_empty() {
        return CaBundlePlan::NoWebhook;
    }
    let ops: Vec<serde_json::Value> = configs
        .into_iter()
        .filter(|(_, config, _)| config["caBundle"].as_str() != Some(bundle))
        .flat_map(|(at, _, test)| {
            [
                test,
                serde_json::json!({"op": "add", "path": format!("{at}/caBundle"), "value": bundle}),
            ]
        })
        .collect();
    if ops.is_empty() {
        return CaBundlePlan::Current;
    }
    match serde_json::from_value(serde_json::Value::Array(ops)) {
        Ok(patch) => CaBundlePlan::Patch(patch),
        // Only test and add operations are built above, which always read.
        Err(_) => CaBundlePlan::Current,
    }
}

/// The bundle's leaf and key, ready to serve.
pub fn certified_key(b: &Bundle) -> Result<Arc<rustls::sign::CertifiedKey>, CertError> {
    let chain = certs(&b.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(b.key_pem.as_bytes())
        .map_err(|e| CertError::Pem(e.to_string()))?;
    let signer = provider().key_provider.load_private_key(key)?;
    Ok(Arc::new(rustls::sign::CertifiedKey::new(chain, signer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: &str = "metallb-webhook-service.metallb-system.svc";
    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn now() -> SystemTime {
        SystemTime::now()
    }

    fn outcome(d: Decision) -> String {
        match d {
            Decision::Use(_) => "use".into(),
            Decision::Renew { reason } => format!("renew: {reason}"),
        }
    }

    #[test]
    fn a_fresh_pair_verifies_for_its_name_only() {
        let b = generate(DNS, now()).expect("generated");
        assert_eq!(valid_at(&b, DNS, now()), Ok(()));
        assert!(valid_at(&b, "other.metallb-system.svc", now()).is_err());
        assert!(valid_at(&b, DNS, now() + LEAF_VALIDITY + DAY).is_err());
        certified_key(&b).expect("loads");
    }

    #[test]
    fn decisions() {
        let t = now();
        let good = generate(DNS, t).expect("generated");
        let data = secret_data(&good);
        assert_eq!(decide(Some(&data), DNS, t), Decision::Use(good.clone()));
        assert_eq!(
            outcome(decide(None, DNS, t)),
            "renew: no ca.crt, no tls.crt, no tls.key"
        );
        assert_eq!(
            outcome(decide(Some(&BTreeMap::new()), DNS, t)),
            "renew: no ca.crt, no tls.crt, no tls.key"
        );
        let mut garbage = data.clone();
        garbage.insert(TLS_CERT.into(), ByteString(b"nonsense".to_vec()));
        assert_eq!(
            outcome(decide(Some(&garbage), DNS, t)),
            "renew: reading the webhook certificate: no certificate"
        );
        // Expires within the renewal margin.
        let late = t + LEAF_VALIDITY - RENEW_BEFORE + DAY;
        assert!(outcome(decide(Some(&data), DNS, late)).starts_with("renew: not valid for"));
        // Another service name.
        assert!(
            outcome(decide(Some(&data), "x.metallb-system.svc", t))
                .starts_with("renew: not valid for")
        );
        // A leaf of another CA.
        let other = generate(DNS, t).expect("generated");
        let mut mixed = data.clone();
        mixed.insert(CA_CERT.into(), ByteString(other.ca_pem.into_bytes()));
        assert!(outcome(decide(Some(&mixed), DNS, t)).starts_with("renew: not valid for"));
    }

    /// How many CA certificates a caBundle holds.
    fn cas(b: &Bundle) -> usize {
        certs(&b.ca_pem).expect("PEM").len()
    }

    /// A leaf due for renewal is renewed under the same CA: the caBundle
    /// does not change, so a replica still serving the old leaf and the
    /// API server holding the old caBundle agree with the new pair.
    #[test]
    fn a_leaf_renewal_keeps_the_ca() {
        let t = now();
        let old = generate(DNS, t).expect("generated");
        let due = t + LEAF_VALIDITY - RENEW_BEFORE + DAY;
        assert!(matches!(
            decide(Some(&secret_data(&old)), DNS, due),
            Decision::Renew { .. }
        ));
        let new = renew(Some(&secret_data(&old)), DNS, due).expect("renewed");
        assert_eq!(new.ca_pem, old.ca_pem, "the caBundle is unchanged");
        assert_ne!(new.cert_pem, old.cert_pem);
        assert_eq!(valid_at(&new, DNS, due + RENEW_BEFORE), Ok(()));
        assert_eq!(
            decide(Some(&secret_data(&new)), DNS, due),
            Decision::Use(new)
        );
    }

    /// A Secret without the CA's key (or whose CA expires too soon) gets
    /// a new CA, and the caBundle carries the previous CA beside it while
    /// the previous leaf is valid: both leaves verify against it. The
    /// next rotation drops the oldest CA.
    #[test]
    fn a_ca_rotation_keeps_the_previous_ca_trusted() {
        let t = now();
        let old = generate(DNS, t).expect("generated");
        let mut data = secret_data(&old);
        data.remove(CA_KEY);
        let new = renew(Some(&data), DNS, t).expect("renewed");
        assert_ne!(first_pem(&new.ca_pem), first_pem(&old.ca_pem), "a new CA");
        assert_eq!(cas(&new), 2);
        let old_leaf = Bundle {
            ca_pem: new.ca_pem.clone(),
            ..old.clone()
        };
        assert_eq!(
            valid_at(&old_leaf, DNS, t),
            Ok(()),
            "the old leaf is trusted"
        );
        assert_eq!(valid_at(&new, DNS, t), Ok(()));
        // The CA itself near its end: rotated again; the oldest goes.
        let late = t + CA_VALIDITY - RENEW_BEFORE + DAY;
        let mut data = secret_data(&new);
        data.remove(TLS_CERT);
        let newest = renew(Some(&data), DNS, late).expect("renewed");
        assert_eq!(
            cas(&newest),
            1,
            "no leaf of the previous CA to keep trusting"
        );
        assert_eq!(valid_at(&newest, DNS, late), Ok(()));
    }

    /// A stored key that is not the CA's makes a new CA, not a leaf that
    /// chains to nothing.
    #[test]
    fn a_foreign_ca_key_makes_a_new_ca() {
        let t = now();
        let a = generate(DNS, t).expect("generated");
        let b = generate(DNS, t).expect("generated");
        let mut data = secret_data(&a);
        data.insert(
            CA_KEY.into(),
            ByteString(b.ca_key_pem.clone().expect("key").into_bytes()),
        );
        let new = renew(Some(&data), DNS, t).expect("renewed");
        assert_eq!(valid_at(&new, DNS, t), Ok(()));
        assert_ne!(first_pem(&new.ca_pem), first_pem(&a.ca_pem));
    }

    fn patched(object: &serde_json::Value, bundle: &str) -> serde_json::Value {
        let CaBundlePlan::Patch(patch) = ca_bundle_plan(object, bundle) else {
            panic!("expected a patch for {object}")
        };
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch).expect("applies");
        assert_eq!(ca_bundle_plan(&patched, bundle), CaBundlePlan::Current);
        patched
    }

    #[test]
    fn ca_bundle_plan_touches_only_stale_webhooks() {
        let vwc = serde_json::json!({"webhooks": [
            {"name": "a", "clientConfig": {"caBundle": "NEW"}},
            {"name": "b", "clientConfig": {}},
        ]});
        let CaBundlePlan::Patch(patch) = ca_bundle_plan(&vwc, "NEW") else {
            panic!("b is stale")
        };
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            serde_json::json!([
                {"op": "test", "path": "/webhooks/1/name", "value": "b"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "NEW"},
            ])
        );
        assert_eq!(
            patched(&vwc, "NEW")["webhooks"][1]["clientConfig"]["caBundle"],
            "NEW"
        );
        assert_eq!(
            ca_bundle_plan(&serde_json::json!({"webhooks": []}), "NEW"),
            CaBundlePlan::NoWebhook
        );
    }

    #[test]
    fn ca_bundle_plan_sets_a_crds_conversion_webhook_only() {
        let crd = serde_json::json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/convert"}, "caBundle": "OLD"}}}}});
        let CaBundlePlan::Patch(patch) = ca_bundle_plan(&crd, "NEW") else {
            panic!("OLD is stale")
        };
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            serde_json::json!([
                {"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"},
                {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": "NEW"},
            ])
        );
        let after = patched(&crd, "NEW");
        assert_eq!(
            after["spec"]["conversion"]["webhook"]["clientConfig"]["service"],
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
        );
        for no_webhook in [
            serde_json::json!({"spec": {"conversion": {"strategy": "None"}}}),
            serde_json::json!({"spec": {}}),
        ] {
            assert_eq!(ca_bundle_plan(&no_webhook, "NEW"), CaBundlePlan::NoWebhook);
        }
    }
}
