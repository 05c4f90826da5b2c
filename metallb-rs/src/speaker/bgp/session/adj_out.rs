//! What a peer has been sent (RFC 4271's Adj-RIB-Out) and the UPDATE
//! content that brings it to the routes it should have. Pure.

use super::super::advertise::RouteAttrs;
use super::super::updates::Shape;
use super::Table;
use ipnet::IpNet;

/// The routes sent to one peer and not withdrawn since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdjRibOut {
    sent: Table,
}

/// What to send: withdrawals, and announcements of new or changed routes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff<'a> {
    /// Prefixes to withdraw.
    pub withdraw: Vec<IpNet>,
    /// Prefixes to announce, with their attributes.
    pub announce: Vec<(IpNet, &'a RouteAttrs)>,
}

impl Diff<'_> {
    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.withdraw.is_empty() && self.announce.is_empty()
    }
}

impl AdjRibOut {
    /// The number of prefixes sent.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// Nothing sent.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Forgets what was sent of one family (a ROUTE-REFRESH asks for it
    /// again from scratch).
    pub fn forget_family(&mut self, v6: bool) {
        self.sent.retain(|n, _| n.addr().is_ipv6() != v6);
    }

    /// Every route of `desired`, and a withdrawal for each sent one no
    /// longer in it: what a full resync considers.
    pub fn everything(&self, desired: Table) -> Vec<(IpNet, Option<RouteAttrs>)> {
        let gone: Vec<IpNet> = self
            .sent
            .keys()
            .filter(|p| !desired.contains_key(p))
            .copied()
            .collect();
        desired
            .into_iter()
            .map(|(p, a)| (p, Some(a)))
            .chain(gone.into_iter().map(|p| (p, None)))
            .collect()
    }

    /// What brings the peer in line with `changes` (prefix -> what it
    /// should be now): withdraw what went or can no longer be sent (no
    /// next hop of its family in `shape`), announce what is new or
    /// changed.
    pub fn diff<'a>(&self, changes: &'a [(IpNet, Option<RouteAttrs>)], shape: &Shape) -> Diff<'a> {
        let sendable = |n: &IpNet| {
            if n.addr().is_ipv6() {
                shape.next_hop_v6.is_some()
            } else {
                shape.next_hop_v4.is_some()
            }
        };
        Diff {
            withdraw: changes
                .iter()
                .filter(|(n, a)| (a.is_none() || !sendable(n)) && self.sent.contains_key(n))
                .map(|(n, _)| *n)
                .collect(),
            announce: changes
                .iter()
                .filter_map(|(n, a)| Some((*n, a.as_ref()?)))
                .filter(|(n, a)| sendable(n) && self.sent.get(n) != Some(*a))
                .collect(),
        }
    }

    /// Records that `diff` was sent.
    pub fn apply(&mut self, diff: &Diff<'_>) {
        for n in &diff.withdraw {
            self.sent.remove(n);
        }
        for (n, a) in &diff.announce {
            self.sent.insert(*n, (*a).clone());
        }
    }
}
