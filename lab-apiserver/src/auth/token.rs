//! Bearer tokens this server issues and accepts: `lab.<claims>.<mac>`,
//! the claims (who, which groups, which ServiceAccount, until when) as
//! base64url JSON, authenticated with HMAC-SHA256 under the server's key.
//! A token verifies without server state, so tokens survive a restart of
//! the API server that keeps its key file; a ServiceAccount token is
//! accepted only while its ServiceAccount exists with the UID it was
//! issued for (checked by the caller).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::hmac;
use serde_json::{Value, json};

/// What a token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// User name (`system:serviceaccount:<ns>:<name>` for accounts).
    pub user: String,
    /// Groups beyond the ones every authenticated user has.
    pub groups: Vec<String>,
    /// (namespace, name) of the ServiceAccount the token belongs to.
    pub service_account: Option<(String, String)>,
    /// That ServiceAccount's UID when the token was issued: a token dies
    /// with its account, also when one of the same name replaces it.
    pub account_uid: Option<String>,
    /// Unix seconds after which the token is refused (None: never).
    pub expires: Option<i64>,
}

impl Claims {
    /// A token for ServiceAccount `namespace/name` (UID `uid`).
    pub fn service_account(
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        expires: Option<i64>,
    ) -> Self {
        Self {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            service_account: Some((namespace.into(), name.into())),
            account_uid: uid.map(str::to_owned),
            expires,
        }
    }

    /// A token for a plain user in `groups`.
    pub fn user(user: &str, groups: &[&str]) -> Self {
        Self {
            user: user.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            service_account: None,
            account_uid: None,
            expires: None,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "user": self.user,
            "groups": self.groups,
            "sa": self.service_account.as_ref().map(|(ns, n)| json!({ "namespace": ns, "name": n, "uid": self.account_uid })),
            "exp": self.expires,
        })
    }

    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            user: v["user"].as_str()?.to_owned(),
            groups: v["groups"]
                .as_array()?
                .iter()
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect(),
            service_account: v["sa"].as_object().and_then(|sa| {
                Some((
                    sa.get("namespace")?.as_str()?.to_owned(),
                    sa.get("name")?.as_str()?.to_owned(),
                ))
            }),
            account_uid: v["sa"]["uid"].as_str().map(str::to_owned),
            expires: v["exp"].as_i64(),
        })
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a token of this server (format or signature).
    Invalid,
    /// Past its expiry.
    Expired,
}

/// Signs and verifies tokens with one key.
pub struct Signer {
    key: hmac::Key,
}

impl Signer {
    /// A signer over `secret` (at least 32 bytes of randomness).
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// Fresh random key material.
    pub fn random_secret() -> [u8; 32] {
        let mut secret = [0u8; 32];
        // The system RNG failing leaves no way to issue tokens at all.
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .unwrap_or_else(|_| panic!("the system random number generator failed"));
        secret
    }

    /// The token for `claims`.
    pub fn sign(&self, claims: &Claims) -> String {
        let body = B64.encode(claims.to_json().to_string());
        let mac = hmac::sign(&self.key, body.as_bytes());
        format!("lab.{body}.{}", B64.encode(mac.as_ref()))
    }

    /// The claims of `token`, if this key signed it and it has not
    /// expired at unix time `now`.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, Refused> {
        let mut parts = token.split('.');
        let (Some("lab"), Some(body), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refused::Invalid);
        };
        let mac = B64.decode(mac).map_err(|_| Refused::Invalid)?;
        hmac::verify(&self.key, body.as_bytes(), &mac).map_err(|_| Refused::Invalid)?;
        let json: Value = B64
            .decode(body)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(Refused::Invalid)?;
        let claims = Claims::from_json(&json).ok_or(Refused::Invalid)?;
        match claims.expires {
            Some(exp) if exp < now => Err(Refused::Expired),
            _ => Ok(claims),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_under_their_key_and_until_they_expire() {
        let signer = Signer::new(&Signer::random_secret());
        let claims = Claims::service_account("metallb-system", "speaker", Some("u-1"), Some(100));
        let token = signer.sign(&claims);
        assert_eq!(signer.verify(&token, 99), Ok(claims.clone()));
        assert_eq!(signer.verify(&token, 101), Err(Refused::Expired));
        let other = Signer::new(&Signer::random_secret());
        assert_eq!(other.verify(&token, 0), Err(Refused::Invalid));
        // A changed claim breaks the signature.
        let forged_body = B64.encode(
            Claims::user("admin", &["system:masters"])
                .to_json()
                .to_string(),
        );
        let mac = token.rsplit('.').next().expect("mac");
        assert_eq!(
            signer.verify(&format!("lab.{forged_body}.{mac}"), 0),
            Err(Refused::Invalid)
        );
        assert_eq!(signer.verify("not-a-token", 0), Err(Refused::Invalid));
    }
}
