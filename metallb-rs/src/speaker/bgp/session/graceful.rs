//! What graceful restart (RFC 4724) changes in an Established session,
//! decided without I/O: when the first table goes out and the End-of-RIB
//! markers after it, and whether closing sends a Cease.
//!
//! End-of-RIB follows the first table on every session, graceful restart
//! or not (RFC 4724 section 2 recommends it for convergence in general),
//! once per family both sides carry, an empty table included. With
//! graceful restart negotiated the peer, helping us restart, keeps our
//! routes from before as stale and drops every stale one it has not heard
//! again when our End-of-RIB comes: so the table waits for the speaker's
//! first complete pass over the services, lest a partial table and its
//! End-of-RIB withdraw the rest.

use crate::net::bgp::{Afi, Notification, SAFI_UNICAST, Update, code};

/// Whether the speaker has been through every service once since the
/// process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstPass {
    /// Not yet: the routes may be a part of what this node announces.
    Running,
    /// Done: the routes are all of it.
    Complete,
}

impl FirstPass {
    /// From the speaker's flag.
    pub fn from_flag(complete: bool) -> FirstPass {
        if complete {
            FirstPass::Complete
        } else {
            FirstPass::Running
        }
    }
}

/// What the session does next about its first table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet; route changes wait in the desired routes.
    Wait,
    /// Send the whole table, then these End-of-RIB markers (one per
    /// family, in order).
    Table(Vec<Update>),
    /// The first table is out: send changes as they come.
    Changes,
}

/// Where an Established session is with its first table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    families: Vec<Afi>,
    /// Graceful restart negotiated: hold the table until the first pass.
    hold: bool,
    sent: bool,
}

impl Opening {
    /// For a session carrying `families`; `graceful_restart`: both sides
    /// sent the capability.
    pub fn new(families: &[Afi], graceful_restart: bool) -> Opening {
        Opening {
            families: families.to_vec(),
            hold: graceful_restart,
            sent: false,
        }
    }

    /// The next step, the speaker's first pass being where `pass` says;
    /// [`Step::Table`] comes once, and the caller sends it.
    pub fn step(&mut self, pass: FirstPass) -> Step {
        if self.sent {
            return Step::Changes;
        }
        if self.hold && pass == FirstPass::Running {
            return Step::Wait;
        }
        self.sent = true;
        Step::Table(
            self.families
                .iter()
                .map(|f| Update::end_of_rib_marker(*f, SAFI_UNICAST))
                .collect(),
        )
    }

    /// Whether the first table has gone out (changes may follow).
    pub fn sent(&self) -> bool {
        self.sent
    }
}

/// Why the speaker ends a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The peer was removed or changed: a Cease, always, so the router
    /// withdraws our routes at once.
    Cease(Notification),
    /// The speaker process stops (it will be back).
    Exit,
}

/// The NOTIFICATION a session stopped by `stop` sends, if any. When the
/// process exits with graceful restart negotiated, none: the connection
/// just drops, which is what makes the router keep our routes as stale
/// until we are back (a Cease would withdraw them, as we send no N bit).
pub fn closing(stop: &Stop, graceful_restart: bool) -> Option<Notification> {
    match stop {
        Stop::Cease(n) => Some(n.clone()),
        Stop::Exit if graceful_restart => None,
        Stop::Exit => Some(Notification::new(
            code::CEASE,
            code::CEASE_ADMIN_SHUTDOWN,
            [],
        )),
    }
}

#[cfg(test)]
mod tests;
