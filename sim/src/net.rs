//! The simulated node network: gossip datagrams between node addresses
//! (`10.0.x.y:7946`) with a per-link delay, a loss probability and cuts
//! (one-way per pair, or every link of a node). Decides each datagram's
//! fate; the world schedules the delivery.

use crate::clock::NodeId;
use rand::RngExt;
use rand::rngs::StdRng;
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The gossip port.
pub const PORT: u16 = 7946;

/// The network between the nodes.
pub struct Net {
    addrs: Vec<SocketAddr>,
    by_addr: HashMap<SocketAddr, NodeId>,
    /// Each node's share of a link's delay: a link's delay is the sum of
    /// its ends' shares (0.1-1 ms each) plus up to 10% jitter.
    share: Vec<Duration>,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Cut links: (from, to), one way.
    cut_pairs: BTreeSet<(NodeId, NodeId)>,
    /// Nodes whose gossip cannot leave (`out`) or arrive (`in`).
    cut_out: Vec<u32>,
    cut_in: Vec<u32>,
}

/// The gossip address of node `i`.
pub fn addr_of(i: NodeId) -> SocketAddr {
    let x = u8::try_from(i / 250).unwrap_or(u8::MAX);
    let y = u8::try_from(i % 250 + 1).unwrap_or(u8::MAX);
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, x, y)), PORT)
}

impl Net {
    /// `n` nodes with delays drawn from `rng`.
    pub fn new(n: usize, loss: f64, rng: &mut StdRng) -> Self {
        let addrs: Vec<SocketAddr> = (0..n).map(addr_of).collect();
        let by_addr = addrs.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        let share = (0..n)
            .map(|_| Duration::from_micros(rng.random_range(100..=1000)))
            .collect();
        Self {
            addrs,
            by_addr,
            share,
            loss,
            cut_pairs: BTreeSet::new(),
            cut_out: vec![0; n],
            cut_in: vec![0; n],
        }
    }

    /// Node `i`'s address.
    pub fn addr(&self, i: NodeId) -> SocketAddr {
        self.addrs[i]
    }

    /// The node at `addr`.
    pub fn node_at(&self, addr: SocketAddr) -> Option<NodeId> {
        self.by_addr.get(&addr).copied()
    }

    /// Cuts (or, `on == false`, restores) every gossip link of `node`, in
    /// the directions asked. Cuts nest: two overlapping cuts need two
    /// restores.
    pub fn cut_node(&mut self, node: NodeId, outgoing: bool, incoming: bool, on: bool) {
        let change = |c: &mut u32| {
            if on {
                *c += 1;
            } else {
                *c = c.saturating_sub(1);
            }
        };
        if outgoing {
            change(&mut self.cut_out[node]);
        }
        if incoming {
            change(&mut self.cut_in[node]);
        }
    }

    /// Cuts or restores the link from `from` to `to` (one way).
    pub fn cut_pair(&mut self, from: NodeId, to: NodeId, on: bool) {
        if on {
            self.cut_pairs.insert((from, to));
        } else {
            self.cut_pairs.remove(&(from, to));
        }
    }

    /// Whether `node`'s gossip is cut in either direction.
    pub fn is_cut(&self, node: NodeId) -> bool {
        self.cut_out[node] > 0 || self.cut_in[node] > 0
    }

    /// A datagram from `from` to `to`: its delay, or None when it is lost
    /// or the link is cut.
    pub fn fate(&self, from: NodeId, to: NodeId, rng: &mut StdRng) -> Option<Duration> {
        if self.cut_out[from] > 0 || self.cut_in[to] > 0 || self.cut_pairs.contains(&(from, to)) {
            return None;
        }
        // Draw both numbers whatever the outcome: the draws a run makes do
        // not depend on what was lost.
        let lost = rng.random_bool(self.loss);
        let base = self.share[from] + self.share[to];
        let jitter = base.mul_f64(rng.random_range(0.0..0.1));
        (!lost).then_some(base + jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn addresses_map_back_and_cuts_nest() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut net = Net::new(300, 0.0, &mut rng);
        assert_eq!(net.addr(0).to_string(), "10.0.0.1:7946");
        assert_eq!(net.addr(251).to_string(), "10.0.1.2:7946");
        assert_eq!(net.node_at(net.addr(299)), Some(299));
        let d = net.fate(0, 1, &mut rng).expect("delivered");
        assert!(d >= Duration::from_micros(200) && d <= Duration::from_micros(2200));
        net.cut_node(1, false, true, true);
        net.cut_node(1, false, true, true);
        assert_eq!(net.fate(0, 1, &mut rng), None);
        net.cut_node(1, false, true, false);
        assert_eq!(net.fate(0, 1, &mut rng), None, "one cut left");
        net.cut_node(1, false, true, false);
        assert!(net.fate(0, 1, &mut rng).is_some());
        assert!(net.fate(1, 0, &mut rng).is_some());
        net.cut_pair(1, 0, true);
        assert_eq!(net.fate(1, 0, &mut rng), None);
        assert!(net.fate(0, 1, &mut rng).is_some(), "one way");
    }
}
