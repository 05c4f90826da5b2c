//! The speaker: one per node. Decides which service addresses this node
//! announces ([`election`], pure), announces them in layer 2
//! ([`announcer`]: ARP/NDP responders and unsolicited announcements on a
//! [`garp`] schedule) and reports it (ServiceL2Status, events, metrics).

pub mod announcer;
pub mod election;
pub mod garp;
pub mod liveness;
pub mod membership;
pub mod presence;
pub mod run;
pub mod status;
