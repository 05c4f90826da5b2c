//! BFD on the dev environments' FRR routers: the vtysh commands that turn
//! it on for some neighbors (a profile in bfdd, `neighbor X bfd profile P`
//! in bgpd) and off again, and a typed reader of `show bfd peers json`.
//! Pure: the commands run through the router's vtysh
//! (`lab::frr::LabRouter::vtysh`, `Cluster::vtysh_on`).
//!
//! FRR decides by itself whether a neighbor's BFD session is single hop
//! (UDP 3784) or multihop (UDP 4784): multihop for eBGP neighbors with
//! `ebgp-multihop` and for iBGP neighbors on no network the router shares,
//! so the same commands serve the lab's four routers. The router's
//! profile is its own half of the session; the speaker's BFDProfile is
//! the other, and the session runs at the slower of the two.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// The command [`parse_peers`] reads.
pub const PEERS_COMMAND: &str = "show bfd peers json";

/// A BFD profile of the router (FRR's `bfd` / `profile NAME` node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdProfile {
    /// Its name, one word.
    pub name: String,
    /// `receive-interval`: the slowest rate it wants packets at, ms.
    pub receive_interval_ms: u32,
    /// `transmit-interval`: the fastest rate it sends at, ms.
    pub transmit_interval_ms: u32,
    /// `detect-multiplier`: packets missed before the session is down.
    pub detect_multiplier: u8,
    /// `passive-mode`: waits for the speaker's packets before sending.
    pub passive: bool,
    /// `minimum-ttl` (multihop sessions only; FRR keeps it on single hop
    /// profiles and ignores it there).
    pub minimum_ttl: Option<u8>,
}

impl BfdProfile {
    /// FRR's defaults (300 ms both ways, multiplier 3, active), as
    /// MetalLB's BFDProfile defaults.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            receive_interval_ms: 300,
            transmit_interval_ms: 300,
            detect_multiplier: 3,
            passive: false,
            minimum_ttl: None,
        }
    }

    /// The same profile with both intervals `interval_ms` and the
    /// multiplier `multiplier`.
    pub fn with_timers(mut self, interval_ms: u32, multiplier: u8) -> Self {
        self.receive_interval_ms = interval_ms;
        self.transmit_interval_ms = interval_ms;
        self.detect_multiplier = multiplier;
        self
    }

    /// How long the router waits for packets before it calls the session
    /// down when the speaker sends at this profile's rate too: multiplier
    /// x the slower of the two intervals.
    pub fn detection_time(&self) -> Duration {
        let interval = self.receive_interval_ms.max(self.transmit_interval_ms);
        Duration::from_millis(u64::from(interval) * u64::from(self.detect_multiplier))
    }

    fn check(&self) -> Result<()> {
        if self.name.is_empty() || self.name.contains(char::is_whitespace) {
            bail!("BFD profile name {:?}: one word, please", self.name);
        }
        for (what, ms) in [
            ("receive-interval", self.receive_interval_ms),
            ("transmit-interval", self.transmit_interval_ms),
        ] {
            if !(10..=60_000).contains(&ms) {
                bail!(
                    "BFD profile {}: {what} {ms} is outside FRR's 10-60000 ms",
                    self.name
                );
            }
        }
        if self.detect_multiplier < 2 {
            bail!(
                "BFD profile {}: detect-multiplier {} is below FRR's 2",
                self.name,
                self.detect_multiplier
            );
        }
        if self.minimum_ttl.is_some_and(|t| t == 0 || t == 255) {
            bail!("BFD profile {}: minimum-ttl must be 1-254", self.name);
        }
        Ok(())
    }
}

/// The vtysh lines (one command a line, as [`crate::cluster::Cluster::vtysh`]
/// takes them) that define `profile` in bfdd and turn BFD on with it for
/// each of `neighbors` of `router bgp <asn>`.
pub fn enable_commands(profile: &BfdProfile, asn: u32, neighbors: &[IpAddr]) -> Result<String> {
    profile.check()?;
    if neighbors.is_empty() {
        bail!(
            "BFD profile {}: no neighbor to turn BFD on for",
            profile.name
        );
    }
    let mut lines = vec![
        "configure terminal".to_owned(),
        "bfd".to_owned(),
        format!("profile {}", profile.name),
        format!("receive-interval {}", profile.receive_interval_ms),
        format!("transmit-interval {}", profile.transmit_interval_ms),
        format!("detect-multiplier {}", profile.detect_multiplier),
        if profile.passive {
            "passive-mode".to_owned()
        } else {
            "no passive-mode".to_owned()
        },
    ];
    if let Some(ttl) = profile.minimum_ttl {
        lines.push(format!("minimum-ttl {ttl}"));
    }
    // Out of the profile, out of `bfd`, into bgpd's node.
    lines.extend(["exit".to_owned(), "exit".to_owned()]);
    lines.push(format!("router bgp {asn}"));
    for n in neighbors {
        lines.push(format!("neighbor {n} bfd profile {}", profile.name));
    }
    lines.push("end".to_owned());
    Ok(lines.join("\n"))
}

/// The vtysh lines that undo [`enable_commands`]: BFD off for each of
/// `neighbors` (their BGP sessions stay), then the profile removed.
pub fn disable_commands(profile: &str, asn: u32, neighbors: &[IpAddr]) -> String {
    let mut lines = vec!["configure terminal".to_owned(), format!("router bgp {asn}")];
    for n in neighbors {
        lines.push(format!("no neighbor {n} bfd"));
    }
    lines.extend([
        "exit".to_owned(),
        "bfd".to_owned(),
        format!("no profile {profile}"),
        "end".to_owned(),
    ]);
    lines.join("\n")
}

/// One BFD session of the router, as `show bfd peers json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdPeer {
    /// The speaker's address.
    pub peer: IpAddr,
    /// The router's own address of the session, when FRR shows it.
    pub local: Option<IpAddr>,
    /// A multihop session (UDP 4784).
    pub multihop: bool,
    /// `up`, `down`, `init`, `shutdown`.
    pub status: String,
    /// The router's receive interval, ms.
    pub receive_interval_ms: Option<u64>,
    /// The router's transmit interval, ms.
    pub transmit_interval_ms: Option<u64>,
    /// The router's detect multiplier.
    pub detect_multiplier: Option<u64>,
    /// The speaker's receive interval, ms (what it told the router).
    pub remote_receive_interval_ms: Option<u64>,
    /// The speaker's transmit interval, ms.
    pub remote_transmit_interval_ms: Option<u64>,
    /// The speaker's detect multiplier.
    pub remote_detect_multiplier: Option<u64>,
}

impl BfdPeer {
    /// The session is up.
    pub fn up(&self) -> bool {
        self.status == "up"
    }
}

/// `show bfd peers json`: the sessions by the speaker's address (FRR
/// prints a JSON array; a peer listed twice keeps its last entry).
pub fn parse_peers(text: &str) -> Result<BTreeMap<IpAddr, BfdPeer>> {
    let value: Value = serde_json::from_str(text.trim())
        .with_context(|| format!("{PEERS_COMMAND}: not JSON: {}", text.trim()))?;
    let Some(entries) = value.as_array() else {
        bail!("{PEERS_COMMAND}: not a JSON array: {value}");
    };
    let mut peers = BTreeMap::new();
    for e in entries {
        let peer: IpAddr = e["peer"]
            .as_str()
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("{PEERS_COMMAND}: an entry without a peer address: {e}"))?;
        let number = |key: &str| e[key].as_u64();
        peers.insert(
            peer,
            BfdPeer {
                peer,
                local: e["local"].as_str().and_then(|l| l.parse().ok()),
                multihop: e["multihop"].as_bool().unwrap_or(false),
                status: e["status"].as_str().unwrap_or_default().to_owned(),
                receive_interval_ms: number("receive-interval"),
                transmit_interval_ms: number("transmit-interval"),
                detect_multiplier: number("detect-multiplier"),
                remote_receive_interval_ms: number("remote-receive-interval"),
                remote_transmit_interval_ms: number("remote-transmit-interval"),
                remote_detect_multiplier: number("remote-detect-multiplier"),
            },
        );
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enabling_defines_the_profile_then_names_it_on_each_neighbor() {
        let mut profile = BfdProfile::new("fast").with_timers(100, 3);
        profile.minimum_ttl = Some(254);
        let neighbors: Vec<IpAddr> = vec![
            "172.30.0.10".parse().expect("ip"),
            "172.30.0.11".parse().expect("ip"),
        ];
        let on = enable_commands(&profile, 64512, &neighbors).expect("renders");
        assert_eq!(
            on,
            "configure terminal\nbfd\nprofile fast\nreceive-interval 100\ntransmit-interval 100\n\
             detect-multiplier 3\nno passive-mode\nminimum-ttl 254\nexit\nexit\nrouter bgp 64512\n\
             neighbor 172.30.0.10 bfd profile fast\nneighbor 172.30.0.11 bfd profile fast\nend"
        );
        assert_eq!(
            disable_commands("fast", 64512, &neighbors[..1]),
            "configure terminal\nrouter bgp 64512\nno neighbor 172.30.0.10 bfd\nexit\nbfd\n\
             no profile fast\nend"
        );
        assert_eq!(profile.detection_time(), Duration::from_millis(300));
        assert!(enable_commands(&BfdProfile::new("two words"), 1, &neighbors).is_err());
        assert!(enable_commands(&BfdProfile::new("p").with_timers(5, 3), 1, &neighbors).is_err());
        assert!(enable_commands(&BfdProfile::new("p"), 1, &[]).is_err());
    }

    #[test]
    fn peers_are_read_by_address_with_their_status() {
        let text = r#"[
          {"multihop":false,"peer":"172.30.0.10","local":"172.30.0.2","vrf":"default",
           "id":1,"remote-id":7,"passive-mode":false,"status":"up","uptime":12,
           "diagnostic":"ok","remote-diagnostic":"ok","receive-interval":300,
           "transmit-interval":300,"echo-receive-interval":50,"detect-multiplier":3,
           "remote-receive-interval":300,"remote-transmit-interval":300,
           "remote-detect-multiplier":3},
          {"multihop":true,"peer":"fc00:f853:ccd:e793::11","vrf":"default",
           "status":"down","diagnostic":"control detection time expired"}
        ]"#;
        let peers = parse_peers(text).expect("parses");
        let v4 = &peers[&"172.30.0.10".parse::<IpAddr>().expect("ip")];
        assert!(v4.up() && !v4.multihop);
        assert_eq!(v4.local, Some("172.30.0.2".parse().expect("ip")));
        assert_eq!(v4.remote_transmit_interval_ms, Some(300));
        let v6 = &peers[&"fc00:f853:ccd:e793::11".parse::<IpAddr>().expect("ip")];
        assert!(!v6.up() && v6.multihop && v6.local.is_none());
        assert!(parse_peers("[]").expect("empty").is_empty());
        assert!(parse_peers("% bfdd is not running").is_err());
        assert!(parse_peers(r#"{"peer":"1.2.3.4"}"#).is_err());
    }
}
