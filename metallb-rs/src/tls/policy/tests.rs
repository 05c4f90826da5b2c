//! The TLS flags' table, and real handshakes under the resulting policy.

use super::*;

fn flags(min: &str, suites: &[&str], curves: &[&str]) -> TlsFlags {
    TlsFlags {
        min_version: min.to_owned(),
        cipher_suites: suites.iter().map(|s| s.to_string()).collect(),
        curve_preferences: curves.iter().map(|s| s.to_string()).collect(),
    }
}

#[rstest::rstest]
#[case::default_is_tls13("", &[], &[], "Ok(Tls13 [] [])")]
#[case::tls13("VersionTLS13", &[], &[], "Ok(Tls13 [] [])")]
#[case::tls12("VersionTLS12", &[], &[], "Ok(Tls12 [] [])")]
#[case::suites_with_tls12(
    "VersionTLS12",
    &["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"],
    &[],
    "Ok(Tls12 [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256] [])"
)]
#[case::curves("", &[], &["CurveP384", "X25519"], "Ok(Tls13 [] [CurveP384, X25519])")]
#[case::unknown_version(
    "TLS1.2", &[], &[],
    "Err(--tls-min-version \"TLS1.2\": not a TLS version (use VersionTLS12 or VersionTLS13; empty means VersionTLS13))"
)]
#[case::tls10(
    "VersionTLS10", &[], &[],
    "Err(--tls-min-version \"VersionTLS10\": rustls offers TLS 1.2 and 1.3 only (use VersionTLS12 or VersionTLS13))"
)]
#[case::suites_with_tls13(
    "", &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"], &[],
    "Err(--tls-cipher-suites: cipher suites cannot be configured with TLS 1.3 (add --tls-min-version VersionTLS12, or drop --tls-cipher-suites))"
)]
#[case::cbc_suite(
    "VersionTLS12", &["TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"], &[],
    "Err(--tls-cipher-suites \"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA\": not a TLS 1.2 suite rustls offers (rustls offers ECDHE suites with AES-GCM or ChaCha20-Poly1305 only: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256))"
)]
#[case::p521("", &[], &["CurveP521"], "Err(--tls-curve-preferences \"CurveP521\": not a curve rustls offers (use X25519, CurveP256 or CurveP384))")]
fn flags_decide_the_policy(
    #[case] min: &str,
    #[case] suites: &[&str],
    #[case] curves: &[&str],
    #[case] want: &str,
) {
    let got = match decide(&flags(min, suites, curves)) {
        Ok(p) => format!(
            "Ok({:?} [{}] [{}])",
            p.min_version,
            p.tls12_suites.join(", "),
            p.curves.join(", ")
        ),
        Err(e) => format!("Err({e})"),
    };
    assert_eq!(got, want);
}

/// A TLS 1.2-only client against a server following `policy`: whether
/// the handshake succeeds.
fn tls12_client_connects(policy: &TlsPolicy) -> bool {
    use crate::tls::tests::AnyCert;
    use rustls::pki_types::ServerName;
    let resolver = Arc::new(crate::tls::Resolver::default());
    let bundle =
        crate::certs::self_signed("localhost", std::time::SystemTime::now()).expect("certificate");
    resolver.set(crate::certs::certified_key(&bundle).expect("key"));
    let server = server_config(policy, resolver).expect("server config");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .expect("tls 1.2")
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    let mut client = rustls::ClientConnection::new(
        Arc::new(client),
        ServerName::try_from("localhost").expect("name"),
    )
    .expect("client");
    let mut server = rustls::ServerConnection::new(server).expect("server");
    // Hand the flights back and forth in memory until one side fails or
    // both are done.
    for _ in 0..10 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).expect("client writes");
        }
        let mut slice = &buf[..];
        while !slice.is_empty() {
            server.read_tls(&mut slice).expect("server reads");
        }
        if server.process_new_packets().is_err() {
            return false;
        }
        let mut buf = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut buf).expect("server writes");
        }
        let mut slice = &buf[..];
        while !slice.is_empty() {
            client.read_tls(&mut slice).expect("client reads");
        }
        if client.process_new_packets().is_err() {
            return false;
        }
        if !client.is_handshaking() && !server.is_handshaking() {
            return true;
        }
    }
    false
}

#[test]
fn a_tls12_client_is_refused_by_default_and_served_with_version_tls12() {
    let default = decide(&TlsFlags::default()).expect("default");
    assert!(!tls12_client_connects(&default));
    let tls12 = decide(&flags("VersionTLS12", &[], &[])).expect("tls 1.2");
    assert!(tls12_client_connects(&tls12));
    // Only RSA suites named: this ECDSA certificate has none to use.
    let rsa_only = decide(&flags(
        "VersionTLS12",
        &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
        &[],
    ))
    .expect("rsa suites");
    assert!(!tls12_client_connects(&rsa_only));
}
