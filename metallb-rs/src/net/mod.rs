//! Wire formats and raw sockets: Ethernet, ARP and NDP codecs (pure,
//! fuzzed), AF_PACKET sockets and the node's interfaces. BGP's codec
//! joins here with issue #8.

pub mod arp;
pub mod ethernet;
pub mod iface;
pub mod ndp;
pub mod packet;
