//! Any bytes as a BGP message from a peer: decoding must never panic (a
//! malformed message becomes the NOTIFICATION that ends the session), and
//! whatever decodes must re-encode to bytes that decode to the same
//! message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metallb_rs::net::bgp::{Context, HEADER_LEN, Message, decode, decode_header, encode};

fuzz_target!(|data: &[u8]| {
    for four_octet_as in [false, true] {
        let ctx = Context { four_octet_as };
        if let Ok(m) = decode(data, &ctx) {
            let bytes = encode(&m, &ctx);
            assert_eq!(decode(&bytes, &ctx), Ok::<Message, _>(m));
        }
    }
    if let Some(h) = data.get(..HEADER_LEN).and_then(|h| <&[u8; HEADER_LEN]>::try_from(h).ok()) {
        let _ = decode_header(h);
    }
});
