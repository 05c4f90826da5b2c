//! The TLS flags (`--tls-min-version`, `--tls-cipher-suites`,
//! `--tls-curve-preferences`, upstream's names and Go's spellings) turned
//! into one policy for every HTTPS server of the process, and that policy
//! into a rustls configuration. Pure: the flags are checked in `main`
//! before anything starts, so a bad value is an exit at once naming the
//! flag, never a server that fails its first handshake.
//!
//! rustls offers TLS 1.2 and 1.3 only, and only ECDHE suites with
//! AES-GCM or ChaCha20-Poly1305: names Go accepts beyond those (TLS 1.0,
//! CBC, RSA key exchange, P-521) are refused with what to use instead.

use rustls::crypto::SupportedKxGroup;
use rustls::crypto::ring::{cipher_suite, kx_group};
use rustls::server::ResolvesServerCert;
use rustls::{ServerConfig, SupportedCipherSuite};
use std::sync::Arc;

/// The flags as given (empty: the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFlags {
    /// `--tls-min-version`.
    pub min_version: String,
    /// `--tls-cipher-suites`.
    pub cipher_suites: Vec<String>,
    /// `--tls-curve-preferences`.
    pub curve_preferences: Vec<String>,
}

/// The oldest protocol version served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MinVersion {
    /// TLS 1.2 and 1.3.
    Tls12,
    /// TLS 1.3 only (upstream's default).
    #[default]
    Tls13,
}

/// What every HTTPS server of the process offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsPolicy {
    /// The oldest version.
    pub min_version: MinVersion,
    /// The TLS 1.2 suites, by Go name, in preference order (empty: all
    /// rustls offers; TLS 1.3 suites are never configurable).
    pub tls12_suites: Vec<&'static str>,
    /// The key exchange groups, by Go name, in preference order (empty:
    /// rustls' default order).
    pub curves: Vec<&'static str>,
}

/// A flag value that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// Not a version name.
    #[error(
        "--tls-min-version {0:?}: not a TLS version (use VersionTLS12 or VersionTLS13; empty means VersionTLS13)"
    )]
    UnknownVersion(String),
    /// TLS 1.0/1.1.
    #[error(
        "--tls-min-version {0:?}: rustls offers TLS 1.2 and 1.3 only (use VersionTLS12 or VersionTLS13)"
    )]
    UnsupportedVersion(String),
    /// Suites named with a TLS 1.3 minimum.
    #[error(
        "--tls-cipher-suites: cipher suites cannot be configured with TLS 1.3 (add --tls-min-version VersionTLS12, or drop --tls-cipher-suites)"
    )]
    SuitesWithTls13,
    /// A suite rustls does not offer, or no suite at all.
    #[error(
        "--tls-cipher-suites {0:?}: not a TLS 1.2 suite rustls offers (rustls offers ECDHE suites with AES-GCM or ChaCha20-Poly1305 only: {SUITES_HINT})"
    )]
    UnsupportedSuite(String),
    /// A curve rustls does not offer.
    #[error(
        "--tls-curve-preferences {0:?}: not a curve rustls offers (use X25519, CurveP256 or CurveP384)"
    )]
    UnsupportedCurve(String),
}

const SUITES_HINT: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256";

/// The TLS 1.2 suites rustls offers, by their Go (IANA) names; Go also
/// spells the ChaCha20 ones without `_SHA256`.
const SUITES: &[(&str, &str, SupportedCipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "",
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "",
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "",
        cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "",
        cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The key exchange groups rustls (ring) offers, by Go's names.
const CURVES: &[(&str, &dyn SupportedKxGroup)] = &[
    ("X25519", kx_group::X25519),
    ("CurveP256", kx_group::SECP256R1),
    ("CurveP384", kx_group::SECP384R1),
];

/// Checks the flags; the first bad value is the error.
pub fn decide(flags: &TlsFlags) -> Result<TlsPolicy, TlsError> {
    let min_version = match flags.min_version.as_str() {
        "" | "VersionTLS13" => MinVersion::Tls13,
        "VersionTLS12" => MinVersion::Tls12,
        v @ ("VersionTLS10" | "VersionTLS11") => {
            return Err(TlsError::UnsupportedVersion(v.to_owned()));
        }
        v => return Err(TlsError::UnknownVersion(v.to_owned())),
    };
    let suites: Vec<&str> = flags
        .cipher_suites
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if !suites.is_empty() && min_version == MinVersion::Tls13 {
        return Err(TlsError::SuitesWithTls13);
    }
    let tls12_suites = suites
        .into_iter()
        .map(|name| {
            SUITES
                .iter()
                .find(|(n, alias, _)| *n == name || (!alias.is_empty() && *alias == name))
                .map(|(n, _, _)| *n)
                .ok_or_else(|| TlsError::UnsupportedSuite(name.to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let curves = flags
        .curve_preferences
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|name| {
            CURVES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(n, _)| *n)
                .ok_or_else(|| TlsError::UnsupportedCurve(name.to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TlsPolicy {
        min_version,
        tls12_suites,
        curves,
    })
}

/// A server configuration following `policy`, its certificate from
/// `resolver`, HTTP/1.1 only (upstream turns HTTP/2 off: the rapid-reset
/// CVEs).
pub fn server_config(
    policy: &TlsPolicy,
    resolver: Arc<dyn ResolvesServerCert>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !policy.tls12_suites.is_empty() {
        let named = policy.tls12_suites.iter().filter_map(|name| {
            SUITES
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, _, s)| *s)
        });
        // TLS 1.3's own suites stay: they are not configurable.
        provider.cipher_suites = provider
            .cipher_suites
            .iter()
            .copied()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .chain(named)
            .collect();
    }
    if !policy.curves.is_empty() {
        provider.kx_groups = policy
            .curves
            .iter()
            .filter_map(|name| CURVES.iter().find(|(n, _)| n == name).map(|(_, g)| *g))
            .collect();
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match policy.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
