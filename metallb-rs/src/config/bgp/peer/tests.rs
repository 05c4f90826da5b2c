//! BGPPeer passwords taken from a Secret, one row each: the Secret's
//! `password` key in, the password or the error as displayed out.

use crate::config::load::{Loaded, Schemas};
use crate::config::{Config, Options};
use rstest::rstest;
use std::path::Path;

/// A BGPPeer with `passwordSecret: {name: s}` and the Secret `s` holding
/// `data: {password: <base64>}`.
fn outcome(base64: &str) -> String {
    let docs = format!(
        "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: peer, namespace: metallb-system}}\n\
         spec: {{myASN: 64500, peerASN: 64501, peerAddress: 10.1.0.1, passwordSecret: {{name: s}}}}\n\
         ---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: metallb-system}}\n\
         type: kubernetes.io/basic-auth\ndata: {{password: '{base64}'}}\n"
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    match Config::build(&loaded.resources, &Options::default()) {
        Ok(c) => format!(
            "password {:?}",
            c.peers[0].password.as_ref().map(|p| p.expose().as_bytes())
        ),
        Err(e) => {
            e.0.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        }
    }
}

#[rstest]
#[case::ascii("czNjcjN0", r#"password Some([115, 51, 99, 114, 51, 116])"#)]
// "pä": the bytes as they are, not re-encoded.
#[case::utf8("cMOk", r#"password Some([112, 195, 164])"#)]
// 0xff 0x74: not text; neither altered (to U+FFFD) nor dropped.
#[case::not_utf8(
    "/3Q=",
    r#"bgppeer "metallb-system/peer": spec.passwordSecret: secret "s": key "password" is not valid UTF-8: set a password of UTF-8 text in the secret and on the router"#
)]
fn secret_password(#[case] base64: &str, #[case] expected: &str) {
    assert_eq!(outcome(base64), expected);
}
