//! The speaker: one per node. Decides which service addresses this node
//! announces ([`election`], pure), announces them in layer 2
//! ([`announcer`]: ARP/NDP responders and unsolicited announcements on a
//! [`garp`] schedule) or over BGP ([`bgp`]: sessions to the BGPPeers;
//! [`bfd`]: the BFD protocol core a BFDProfile asks for) and reports it
//! (ServiceL2Status, ServiceBGPStatus, events, metrics).

pub mod announcer;
pub mod bfd;
pub mod bgp;
pub mod election;
pub mod events;
pub mod garp;
pub mod lease;
pub mod liveness;
pub mod membership;
pub mod plan;
pub mod presence;
pub mod renewal;
pub mod run;
pub mod status;
pub mod uplink;
