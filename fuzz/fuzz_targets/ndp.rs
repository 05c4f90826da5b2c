//! Any bytes as an IPv6 packet / Ethernet frame through the NDP parser and
//! responder: never panics; a parsed message re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metallb_rs::net::ethernet::Mac;
use metallb_rs::net::ndp::Packet;
use metallb_rs::speaker::announcer::ndp_response;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        assert_eq!(Packet::parse(&p.to_bytes()), Ok(p));
    }
    let me = Mac([2, 0, 0, 0, 0, 1]);
    let _ = ndp_response(data, "eth0", me, |_, iface| Some(iface == "eth0"));
});
