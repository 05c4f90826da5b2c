//! Which services this node announces, and for each address the services
//! using it: the announcer's bookkeeping. Pure. A change of one service
//! costs O(its addresses x the services sharing them), never O(every
//! service): a failover that hands this node thousands of services one
//! by one stays linear.

use super::super::election::Interfaces;
use crate::service::ServiceKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// One service's announcement: its addresses and where.
pub type Entry = (Vec<IpAddr>, Interfaces);

/// The services announced and each address's users.
#[derive(Debug, Default)]
pub struct Ownership {
    services: BTreeMap<ServiceKey, Entry>,
    users: HashMap<IpAddr, BTreeSet<ServiceKey>>,
}

impl Ownership {
    /// `service`'s entry, if announced.
    pub fn get(&self, service: &ServiceKey) -> Option<&Entry> {
        self.services.get(service)
    }

    /// Services announced.
    pub fn services(&self) -> impl Iterator<Item = &ServiceKey> {
        self.services.keys()
    }

    /// Replaces (`Some`) or removes (`None`) `service`'s entry. Returns
    /// the entry it had and the addresses whose [`Ownership::merged`]
    /// may have changed.
    pub fn set(
        &mut self,
        service: &ServiceKey,
        entry: Option<Entry>,
    ) -> (Option<Entry>, BTreeSet<IpAddr>) {
        let mut touched = BTreeSet::new();
        let before = match entry {
            Some(e) => {
                touched.extend(e.0.iter().copied());
                for ip in &e.0 {
                    self.users.entry(*ip).or_default().insert(service.clone());
                }
                self.services.insert(service.clone(), e)
            }
            None => self.services.remove(service),
        };
        if let Some((old, _)) = &before {
            let now: &[IpAddr] = self.services.get(service).map_or(&[], |e| &e.0);
            for ip in old {
                touched.insert(*ip);
                if now.contains(ip) {
                    continue;
                }
                if let Some(users) = self.users.get_mut(ip) {
                    users.remove(service);
                    if users.is_empty() {
                        self.users.remove(ip);
                    }
                }
            }
        }
        (before, touched)
    }

    /// Where `ip` is announced: the union of its services' interfaces
    /// (None: no service uses it).
    pub fn merged(&self, ip: IpAddr) -> Option<Interfaces> {
        self.users
            .get(&ip)?
            .iter()
            .filter_map(|k| self.services.get(k))
            .map(|(_, i)| i.clone())
            .reduce(Interfaces::union)
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.services.clear();
        self.users.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ServiceKey {
        ServiceKey::new("ns", name)
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().expect("ip")).collect()
    }

    fn named(list: &[&str]) -> Interfaces {
        Interfaces::Named(list.iter().map(|s| (*s).to_owned()).collect())
    }

    /// Every address in use, with where it is announced, from the users.
    fn all(o: &Ownership) -> HashMap<IpAddr, Interfaces> {
        o.users
            .keys()
            .filter_map(|ip| Some((*ip, o.merged(*ip)?)))
            .collect()
    }

    /// Every address's interfaces, recomputed from scratch the way the
    /// announcer did before it kept users per address.
    fn from_scratch(o: &Ownership) -> HashMap<IpAddr, Interfaces> {
        let mut out: HashMap<IpAddr, Interfaces> = HashMap::new();
        for (addrs, ifaces) in o.services.values() {
            for ip in addrs {
                let merged = match out.remove(ip) {
                    Some(prev) => prev.union(ifaces.clone()),
                    None => ifaces.clone(),
                };
                out.insert(*ip, merged);
            }
        }
        out
    }

    #[test]
    fn shared_addresses_merge_and_outlive_one_user() {
        let mut o = Ownership::default();
        let (before, touched) = o.set(&key("a"), Some((ips(&["10.0.0.1"]), named(&["eth0"]))));
        assert_eq!(before, None);
        assert_eq!(touched, ips(&["10.0.0.1"]).into_iter().collect());
        o.set(
            &key("b"),
            Some((ips(&["10.0.0.1", "fc00::1"]), named(&["eth1"]))),
        );
        assert_eq!(
            o.merged(ips(&["10.0.0.1"])[0]),
            Some(named(&["eth0", "eth1"]))
        );
        let (before, touched) = o.set(&key("a"), None);
        assert_eq!(before, Some((ips(&["10.0.0.1"]), named(&["eth0"]))));
        assert_eq!(touched, ips(&["10.0.0.1"]).into_iter().collect());
        assert_eq!(o.merged(ips(&["10.0.0.1"])[0]), Some(named(&["eth1"])));
        o.set(&key("b"), None);
        assert_eq!(o.merged(ips(&["10.0.0.1"])[0]), None);
        assert!(o.users.is_empty(), "no address outlives its last user");
    }

    #[test]
    fn moving_a_service_touches_its_old_and_new_addresses() {
        let mut o = Ownership::default();
        o.set(&key("a"), Some((ips(&["10.0.0.1"]), Interfaces::All)));
        let (_, touched) = o.set(&key("a"), Some((ips(&["10.0.0.2"]), Interfaces::All)));
        assert_eq!(
            touched,
            ips(&["10.0.0.1", "10.0.0.2"]).into_iter().collect()
        );
        assert_eq!(o.merged(ips(&["10.0.0.1"])[0]), None);
        assert_eq!(o.merged(ips(&["10.0.0.2"])[0]), Some(Interfaces::All));
    }

    proptest::proptest! {
        /// Whatever the sequence of changes, the incremental view equals
        /// the one recomputed from every service.
        #[test]
        fn incremental_equals_from_scratch(
            ops in proptest::collection::vec((0u8..6, proptest::option::of((proptest::collection::vec(0u8..5, 0..3), 0u8..4))), 0..40)
        ) {
            let mut o = Ownership::default();
            let ifaces = [Interfaces::All, named(&["eth0"]), named(&["eth1"]), named(&["eth0", "eth2"])];
            for (svc, entry) in ops {
                let entry = entry.map(|(addrs, i)| {
                    let mut a: Vec<IpAddr> = addrs.iter().map(|n| IpAddr::from([10, 0, 0, *n])).collect();
                    a.dedup();
                    (a, ifaces[usize::from(i)].clone())
                });
                o.set(&key(&format!("s{svc}")), entry);
                proptest::prop_assert_eq!(all(&o), from_scratch(&o));
                proptest::prop_assert!(o.users.values().all(|u| !u.is_empty()));
            }
        }
    }
}
