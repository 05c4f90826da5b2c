//! Wire formats and raw sockets: Ethernet, ARP and NDP codecs (pure,
//! fuzzed), Router Advertisements, AF_PACKET sockets and the node's
//! interfaces, and BGP messages.

pub mod arp;
pub mod bgp;
pub mod ethernet;
pub mod iface;
pub mod ndp;
pub mod packet;
pub mod ra;
