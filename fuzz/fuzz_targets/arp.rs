//! Any bytes as an Ethernet frame through the ARP responder's decision:
//! parsing must never panic, and whatever parses must re-encode to the
//! same packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use metallb_rs::net::arp::Arp;
use metallb_rs::net::ethernet::{Frame, Mac};
use metallb_rs::speaker::announcer::arp_response;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = Arp::parse(data) {
        assert_eq!(Arp::parse(&a.to_bytes()), Ok(a));
    }
    let _ = Frame::parse(data);
    let me = Mac([2, 0, 0, 0, 0, 1]);
    let _ = arp_response(data, "eth0", me, |_, iface| Some(iface == "eth0"));
});
