//! ROUTE-REFRESH requests (RFC 2918): which ones are answered, and when.
//! Pure: the established loop asks, then sends. A peer cannot make the
//! speaker send its full table in a loop: requests for a family that was
//! not negotiated are ignored (RFC 2918: a speaker must ignore one for an
//! AFI/SAFI it did not advertise), and requests are merged so that the
//! table goes out again at most once per [`MIN_INTERVAL`], always after
//! the latest request.

use crate::net::bgp::{Afi, SAFI_UNICAST};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// The shortest time between two resends of the full table.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The family a ROUTE-REFRESH for `afi`/`safi` asks for, when it is one of
/// the `negotiated` ones; None: ignore it.
pub fn family(afi: u16, safi: u8, negotiated: &[Afi]) -> Option<Afi> {
    Afi::from_number(afi).filter(|f| safi == SAFI_UNICAST && negotiated.contains(f))
}

/// The requests not answered yet, and when the table last went out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refresh {
    pending: BTreeSet<Afi>,
    last: Instant,
}

impl Refresh {
    /// No request yet; the full table went out at `sent` (Established's
    /// first sync).
    pub fn new(sent: Instant) -> Self {
        Refresh {
            pending: BTreeSet::new(),
            last: sent,
        }
    }

    /// Records a request for `family`, merged with any not answered yet.
    pub fn request(&mut self, family: Afi) {
        self.pending.insert(family);
    }

    /// When to answer the requests not answered yet (at once when the
    /// instant is past); None when there are none.
    pub fn due(&self) -> Option<Instant> {
        (!self.pending.is_empty()).then_some(self.last + MIN_INTERVAL)
    }

    /// The families to send again from scratch now, `now`, forgetting
    /// the requests.
    pub fn take(&mut self, now: Instant) -> BTreeSet<Afi> {
        self.last = now;
        std::mem::take(&mut self.pending)
    }
}
