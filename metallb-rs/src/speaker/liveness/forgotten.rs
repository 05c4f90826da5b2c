//! Members whose gossip verdicts were dropped. A gossip member that
//! declared every other one down starts afresh without those verdicts
//! (alone, it cannot tell its own cut from their death; see
//! `View::forgotten`). The last survivor of two deaths in a row must
//! still find the second dead within a fast period: it keeps doubting
//! them - its mark has a live one renew fast, and it renews fast itself,
//! so its watch shows a dead one's lease stop - until the lease changes.

use super::{Judging, LeaseState, View};
use std::collections::BTreeMap;

impl Judging {
    /// Keeps, for each member `view` holds forgotten, its lease's version
    /// when a pass first saw it forgotten; drops those gossip knows again.
    pub(super) fn track_forgotten(&mut self, view: &View, leases: &BTreeMap<String, LeaseState>) {
        if view.forgotten.is_empty() && self.forgotten.is_empty() {
            return;
        }
        self.forgotten.retain(|n, _| view.forgotten.contains(n));
        for n in &view.forgotten {
            let version = leases.get(n).map(|l| l.changed);
            self.forgotten.entry(n.clone()).or_insert(version);
        }
    }

    /// `node` is forgotten and its lease has not changed since
    /// ([`super::Evidence::verdict_forgotten`]).
    pub(super) fn verdict_forgotten(&self, node: &str, lease: Option<&LeaseState>) -> bool {
        self.forgotten
            .get(node)
            .is_some_and(|version| *version == lease.map(|l| l.changed))
    }
}
