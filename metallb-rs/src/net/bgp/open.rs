//! OPEN (RFC 4271 section 4.2) and capabilities (RFC 5492), graceful
//! restart (RFC 4724, RFC 8538) and extended next hop (RFC 8950) among
//! them.

use super::{AS_TRANS, Notification, Reader, code};
use std::net::Ipv4Addr;

/// Address families the speaker carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Afi {
    /// AFI 1.
    Ipv4,
    /// AFI 2.
    Ipv6,
}

impl Afi {
    /// The AFI number.
    pub fn number(self) -> u16 {
        match self {
            Afi::Ipv4 => 1,
            Afi::Ipv6 => 2,
        }
    }
    /// The family of an AFI number, if carried.
    pub fn from_number(n: u16) -> Option<Afi> {
        match n {
            1 => Some(Afi::Ipv4),
            2 => Some(Afi::Ipv6),
            _ => None,
        }
    }
}

/// SAFI unicast.
pub const SAFI_UNICAST: u8 = 1;

/// A capability advertised in OPEN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// Code 1 (RFC 4760): this AFI/SAFI may be exchanged.
    Multiprotocol {
        /// Address family.
        afi: u16,
        /// Subsequent address family.
        safi: u8,
    },
    /// Code 2 (RFC 2918).
    RouteRefresh,
    /// Code 5 (RFC 8950): the families whose NLRI may carry a next hop of
    /// another family, such as IPv4 routes with an IPv6 next hop.
    ExtendedNextHop(Vec<ExtendedNextHop>),
    /// Code 64 (RFC 4724): the speaker can keep forwarding across a
    /// restart of its BGP process.
    GracefulRestart(GracefulRestart),
    /// Code 65 (RFC 6793): the speaker's real AS.
    FourOctetAs(u32),
    /// Anything else, kept as received.
    Other {
        /// Capability code.
        code: u8,
        /// Its value.
        value: Vec<u8>,
    },
}

/// The graceful restart capability's value (RFC 4724 section 3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GracefulRestart {
    /// The R bit: the sender has just restarted, so the receiver must not
    /// wait for End-of-RIB from it before sending its own routes.
    pub restarting: bool,
    /// The N bit (RFC 8538): the sender keeps routes across a session
    /// ended by a NOTIFICATION too, not only across a dropped connection.
    pub notification: bool,
    /// Seconds the receiver keeps the sender's routes while waiting for
    /// the session to come back; 12 bits on the wire, so encoding clamps
    /// it to [`GracefulRestart::MAX_RESTART_TIME`].
    pub restart_time: u16,
    /// The families the sender preserves routes for, in order.
    pub families: Vec<GracefulRestartFamily>,
}

/// One family of a graceful restart capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestartFamily {
    /// Address family number; kept as a number, as in
    /// [`Capability::Multiprotocol`], so a family this speaker does not
    /// carry still decodes and re-encodes unchanged.
    pub afi: u16,
    /// Subsequent address family.
    pub safi: u8,
    /// The F bit: the sender's forwarding state for the family survived
    /// the restart.
    pub forwarding_preserved: bool,
}

/// One tuple of the extended next hop capability: NLRI of `afi`/`safi`
/// may carry a next hop of `next_hop_afi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedNextHop {
    /// NLRI address family.
    pub afi: u16,
    /// NLRI subsequent address family; two octets here, unlike in the
    /// multiprotocol capability.
    pub safi: u16,
    /// The address family of the next hop.
    pub next_hop_afi: u16,
}

impl ExtendedNextHop {
    /// IPv4 unicast routes with an IPv6 next hop: what an unnumbered
    /// session over IPv6 link-local addresses needs.
    pub const IPV4_OVER_IPV6: ExtendedNextHop = ExtendedNextHop {
        afi: 1,
        safi: 1,
        next_hop_afi: 2,
    };

    /// Decodes a capability value; `None` unless it is whole 6-octet
    /// tuples.
    fn decode(value: &[u8]) -> Option<Vec<ExtendedNextHop>> {
        if !value.len().is_multiple_of(6) {
            return None;
        }
        Some(
            value
                .chunks_exact(6)
                .map(|t| ExtendedNextHop {
                    afi: u16::from_be_bytes([t[0], t[1]]),
                    safi: u16::from_be_bytes([t[2], t[3]]),
                    next_hop_afi: u16::from_be_bytes([t[4], t[5]]),
                })
                .collect(),
        )
    }

    fn encode(tuples: &[ExtendedNextHop]) -> Vec<u8> {
        tuples
            .iter()
            .flat_map(|t| {
                [t.afi, t.safi, t.next_hop_afi]
                    .into_iter()
                    .flat_map(u16::to_be_bytes)
            })
            .collect()
    }
}

const GR_RESTARTING: u16 = 0x8000;
const GR_NOTIFICATION: u16 = 0x4000;
const GR_FORWARDING: u8 = 0x80;

impl GracefulRestart {
    /// The largest restart time the 12-bit field holds.
    pub const MAX_RESTART_TIME: u16 = 0x0fff;

    /// Decodes a capability value; `None` when its length is not the
    /// 2-octet header plus whole 4-octet families. Reserved bits are
    /// ignored, as RFC 4724 asks of a receiver.
    fn decode(value: &[u8]) -> Option<GracefulRestart> {
        let (head, rest) = value.split_first_chunk::<2>()?;
        if rest.len() % 4 != 0 {
            return None;
        }
        let head = u16::from_be_bytes(*head);
        let families = rest
            .chunks_exact(4)
            .map(|f| GracefulRestartFamily {
                afi: u16::from_be_bytes([f[0], f[1]]),
                safi: f[2],
                forwarding_preserved: f[3] & GR_FORWARDING != 0,
            })
            .collect();
        Some(GracefulRestart {
            restarting: head & GR_RESTARTING != 0,
            notification: head & GR_NOTIFICATION != 0,
            restart_time: head & GracefulRestart::MAX_RESTART_TIME,
            families,
        })
    }

    /// The capability value. A restart time above the 12-bit maximum is
    /// clamped rather than refused: encoding cannot fail, and letting the
    /// high bits spill into the flags would announce R or N by accident.
    fn encode(&self) -> Vec<u8> {
        let mut head = self.restart_time.min(GracefulRestart::MAX_RESTART_TIME);
        if self.restarting {
            head |= GR_RESTARTING;
        }
        if self.notification {
            head |= GR_NOTIFICATION;
        }
        let mut out = Vec::with_capacity(2 + 4 * self.families.len());
        out.extend_from_slice(&head.to_be_bytes());
        for f in &self.families {
            out.extend_from_slice(&f.afi.to_be_bytes());
            out.push(f.safi);
            out.push(if f.forwarding_preserved {
                GR_FORWARDING
            } else {
                0
            });
        }
        out
    }
}

/// An OPEN message (version 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// The 2-octet "My Autonomous System" field (AS_TRANS for 4-octet ASes).
    pub my_as: u16,
    /// Proposed hold time in seconds (0 or at least 3).
    pub hold_time: u16,
    /// BGP identifier.
    pub router_id: Ipv4Addr,
    /// Capabilities, in order.
    pub capabilities: Vec<Capability>,
}

const PARAM_CAPABILITIES: u8 = 2;

impl Open {
    /// An OPEN for `asn`, with the 4-octet AS capability (always sent) and
    /// `more` capabilities.
    pub fn new(asn: u32, hold_time: u16, router_id: Ipv4Addr, more: Vec<Capability>) -> Self {
        let mut capabilities = more;
        capabilities.push(Capability::FourOctetAs(asn));
        Self {
            my_as: u16::try_from(asn).unwrap_or(AS_TRANS),
            hold_time,
            router_id,
            capabilities,
        }
    }

    /// The sender's AS: its 4-octet capability, else the 2-octet field.
    pub fn asn(&self) -> u32 {
        self.capabilities
            .iter()
            .find_map(|c| match c {
                Capability::FourOctetAs(a) => Some(*a),
                _ => None,
            })
            .unwrap_or(u32::from(self.my_as))
    }

    /// Whether the sender handles 4-octet AS numbers.
    pub fn four_octet_as(&self) -> bool {
        self.capabilities
            .iter()
            .any(|c| matches!(c, Capability::FourOctetAs(_)))
    }

    /// The sender's graceful restart capability, if it sent one (the
    /// first, should it send several).
    pub fn graceful_restart(&self) -> Option<&GracefulRestart> {
        self.capabilities.iter().find_map(|c| match c {
            Capability::GracefulRestart(gr) => Some(gr),
            _ => None,
        })
    }

    /// Whether the sender accepts `tuple` (RFC 8950), e.g. IPv4 routes with
    /// an IPv6 next hop.
    pub fn extended_next_hop(&self, tuple: ExtendedNextHop) -> bool {
        self.capabilities.iter().any(|c| match c {
            Capability::ExtendedNextHop(tuples) => tuples.contains(&tuple),
            _ => false,
        })
    }

    /// The unicast families the sender announced; IPv4 alone when it sent
    /// no multiprotocol capability (RFC 4760 section 8).
    pub fn families(&self) -> Vec<Afi> {
        let mut out: Vec<Afi> = self
            .capabilities
            .iter()
            .filter_map(|c| match c {
                Capability::Multiprotocol { afi, safi } if *safi == SAFI_UNICAST => {
                    Afi::from_number(*afi)
                }
                _ => None,
            })
            .collect();
        if !self
            .capabilities
            .iter()
            .any(|c| matches!(c, Capability::Multiprotocol { .. }))
        {
            out.push(Afi::Ipv4);
        }
        out.sort();
        out.dedup();
        out
    }

    pub(super) fn decode(body: &[u8]) -> Result<Open, Notification> {
        let malformed = || Notification::new(code::OPEN, code::UNSPECIFIC, []);
        let mut r = Reader::new(body);
        let version = r.u8().ok_or_else(malformed)?;
        if version != 4 {
            // Data: the largest version this speaker supports.
            return Err(Notification::new(
                code::OPEN,
                code::OPEN_UNSUPPORTED_VERSION,
                4u16.to_be_bytes(),
            ));
        }
        let my_as = r.u16().ok_or_else(malformed)?;
        let hold_time = r.u16().ok_or_else(malformed)?;
        if hold_time == 1 || hold_time == 2 {
            return Err(Notification::new(
                code::OPEN,
                code::OPEN_UNACCEPTABLE_HOLD_TIME,
                [],
            ));
        }
        let router_id = Ipv4Addr::from(r.u32().ok_or_else(malformed)?);
        if router_id.is_unspecified() {
            return Err(Notification::new(code::OPEN, code::OPEN_BAD_IDENTIFIER, []));
        }
        let params_len = usize::from(r.u8().ok_or_else(malformed)?);
        let params = r.take(params_len).ok_or_else(malformed)?;
        if !r.is_empty() {
            return Err(malformed());
        }
        let mut capabilities = Vec::new();
        let mut p = Reader::new(params);
        while !p.is_empty() {
            let kind = p.u8().ok_or_else(malformed)?;
            let len = usize::from(p.u8().ok_or_else(malformed)?);
            let value = p.take(len).ok_or_else(malformed)?;
            if kind != PARAM_CAPABILITIES {
                return Err(Notification::new(
                    code::OPEN,
                    code::OPEN_UNSUPPORTED_PARAMETER,
                    [],
                ));
            }
            let mut c = Reader::new(value);
            while !c.is_empty() {
                let code = c.u8().ok_or_else(malformed)?;
                let len = usize::from(c.u8().ok_or_else(malformed)?);
                let v = c.take(len).ok_or_else(malformed)?;
                capabilities.push(match (code, v) {
                    (1, [a0, a1, _, safi]) => Capability::Multiprotocol {
                        afi: u16::from_be_bytes([*a0, *a1]),
                        safi: *safi,
                    },
                    (2, []) => Capability::RouteRefresh,
                    (5, v) => Capability::ExtendedNextHop(
                        ExtendedNextHop::decode(v).ok_or_else(malformed)?,
                    ),
                    (64, v) => Capability::GracefulRestart(
                        GracefulRestart::decode(v).ok_or_else(malformed)?,
                    ),
                    (65, [a, b, c, d]) => {
                        Capability::FourOctetAs(u32::from_be_bytes([*a, *b, *c, *d]))
                    }
                    (1 | 2 | 65, _) => return Err(malformed()),
                    (code, v) => Capability::Other {
                        code,
                        value: v.to_vec(),
                    },
                });
            }
        }
        Ok(Open {
            my_as,
            hold_time,
            router_id,
            capabilities,
        })
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.push(4);
        out.extend_from_slice(&self.my_as.to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.router_id.octets());
        // One capabilities parameter per capability, as most speakers send.
        let mut params = Vec::new();
        for c in &self.capabilities {
            let (code, value): (u8, Vec<u8>) = match c {
                Capability::Multiprotocol { afi, safi } => {
                    let a = afi.to_be_bytes();
                    (1, vec![a[0], a[1], 0, *safi])
                }
                Capability::RouteRefresh => (2, Vec::new()),
                Capability::ExtendedNextHop(t) => (5, ExtendedNextHop::encode(t)),
                Capability::GracefulRestart(gr) => (64, gr.encode()),
                Capability::FourOctetAs(a) => (65, a.to_be_bytes().to_vec()),
                Capability::Other { code, value } => (*code, value.clone()),
            };
            params.push(PARAM_CAPABILITIES);
            params.push(u8::try_from(value.len() + 2).unwrap_or(u8::MAX));
            params.push(code);
            params.push(u8::try_from(value.len()).unwrap_or(u8::MAX));
            params.extend_from_slice(&value);
        }
        out.push(u8::try_from(params.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&params);
    }
}
