//! IPv6 Router Advertisements and Router Solicitations (RFC 4861
//! section 4.1-4.2) as ICMPv6 messages on a raw ICMPv6 socket, which
//! adds and removes the IPv6 header and computes the checksum: what an
//! unnumbered BGP session needs to find the router on its link and be
//! found by it (FRR accepts an interface neighbor only once it has heard
//! that neighbor's Router Advertisements). Pure.

use super::ethernet::Mac;
use std::net::Ipv6Addr;
use std::time::Duration;

/// ICMPv6 type of a Router Solicitation.
pub const ROUTER_SOLICITATION: u8 = 133;
/// ICMPv6 type of a Router Advertisement.
pub const ROUTER_ADVERTISEMENT: u8 = 134;
/// ff02::2, all routers: where solicitations go.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
const OPT_SOURCE_LL: u8 = 1;
/// The RA's fixed part: type, code, checksum, hop limit, flags, router
/// lifetime, reachable time, retransmission timer.
const RA_LEN: usize = 16;

/// A Router Advertisement announcing the sender as a router for
/// `lifetime` (whole seconds, at most 9000 as RFC 4861 allows) and no
/// prefixes, hop limit or timers; `mac` goes in a source link-layer
/// address option, so the receiver need not ask for it.
pub fn router_advertisement(lifetime: Duration, mac: Option<Mac>) -> Vec<u8> {
    let secs = u16::try_from(lifetime.as_secs().min(9000)).unwrap_or(9000);
    let mut out = vec![ROUTER_ADVERTISEMENT, 0, 0, 0, 0, 0];
    out.extend_from_slice(&secs.to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    if let Some(m) = mac {
        out.extend_from_slice(&[OPT_SOURCE_LL, 1]);
        out.extend_from_slice(&m.0);
    }
    out
}

/// A Router Solicitation (no options: its source may be unspecified).
pub fn router_solicitation() -> Vec<u8> {
    vec![ROUTER_SOLICITATION, 0, 0, 0, 0, 0, 0, 0]
}

/// Whether `icmp` (an ICMPv6 message from `source`) is a valid Router
/// Advertisement, as far as the socket lets us check RFC 4861 section
/// 6.1.2: code 0, at least 16 octets, every option of non-zero length
/// within the message, and a link-local source. (The hop limit of 255
/// would need ancillary data; a router off the link could not make a
/// link-local source reach us anyway.)
pub fn is_router_advertisement(icmp: &[u8], source: Ipv6Addr) -> bool {
    if icmp.len() < RA_LEN || icmp[0] != ROUTER_ADVERTISEMENT || icmp[1] != 0 {
        return false;
    }
    if !source.is_unicast_link_local() {
        return false;
    }
    let mut opts = &icmp[RA_LEN..];
    while !opts.is_empty() {
        let Some(&len) = opts.get(1) else {
            return false;
        };
        let len = usize::from(len) * 8;
        if len == 0 || len > opts.len() {
            return false;
        }
        opts = &opts[len..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn advertisement_bytes() {
        let mac = Mac([0x02, 0, 0, 0, 0, 0x0a]);
        assert_eq!(
            router_advertisement(Duration::from_secs(1800), Some(mac)),
            [
                134, 0, 0, 0, // type, code, checksum (the kernel's)
                0, 0, // hop limit, flags
                0x07, 0x08, // router lifetime 1800 s
                0, 0, 0, 0, 0, 0, 0, 0, // reachable time, retrans timer
                1, 1, 0x02, 0, 0, 0, 0, 0x0a, // source link-layer address
            ]
        );
        // Clamped to the 9000 s RFC 4861 allows; no MAC, no option.
        assert_eq!(
            router_advertisement(Duration::from_secs(100_000), None)[6..8],
            [0x23, 0x28]
        );
        assert_eq!(router_solicitation(), [133, 0, 0, 0, 0, 0, 0, 0]);
    }

    const LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const GLOBAL: Ipv6Addr = Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 1);

    fn ra(options: &[u8]) -> Vec<u8> {
        let mut m = router_advertisement(Duration::from_secs(30), None);
        m.extend_from_slice(options);
        m
    }

    #[rstest]
    #[case::plain(ra(&[]), LL, true)]
    #[case::with_source_ll(ra(&[1, 1, 2, 0, 0, 0, 0, 1]), LL, true)]
    #[case::global_source(ra(&[]), GLOBAL, false)]
    #[case::zero_length_option(ra(&[1, 0, 2, 0, 0, 0, 0, 1]), LL, false)]
    #[case::option_past_the_end(ra(&[1, 2, 2, 0, 0, 0, 0, 1]), LL, false)]
    #[case::truncated(ra(&[])[..15].to_vec(), LL, false)]
    #[case::solicitation(router_solicitation(), LL, false)]
    #[case::code_not_zero({ let mut m = ra(&[]); m[1] = 1; m }, LL, false)]
    fn validity(#[case] icmp: Vec<u8>, #[case] source: Ipv6Addr, #[case] valid: bool) {
        assert_eq!(is_router_advertisement(&icmp, source), valid);
    }
}
