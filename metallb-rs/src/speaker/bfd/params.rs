//! A session's parameters from a BFDProfile's values, with upstream's
//! defaults for the fields a profile leaves out, and the refusal of what
//! this speaker does not run (echo mode).

use super::packet::Hops;
use std::fmt;
use std::time::Duration;

// Upstream leaves unset fields to FRR; the figures are the FRR defaults
// its e2e suite expects (BFDProfileWithDefaults, e2etest/pkg/config/parse.go).
/// receiveInterval when the profile sets none.
pub const DEFAULT_RECEIVE_INTERVAL: Duration = Duration::from_millis(300);
/// transmitInterval when the profile sets none.
pub const DEFAULT_TRANSMIT_INTERVAL: Duration = Duration::from_millis(300);
/// detectMultiplier when the profile sets none.
pub const DEFAULT_DETECT_MULTIPLIER: u8 = 3;
/// echoInterval when the profile sets none (echo itself is refused).
pub const DEFAULT_ECHO_INTERVAL: Duration = Duration::from_millis(50);
/// minimumTtl of a multihop session when the profile sets none.
pub const DEFAULT_MINIMUM_TTL: u8 = 254;

/// A BFDProfile's spec as plain values (milliseconds for intervals), so
/// this module needs nothing from the API types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Profile {
    /// spec.receiveInterval, ms.
    pub receive_interval: Option<u32>,
    /// spec.transmitInterval, ms.
    pub transmit_interval: Option<u32>,
    /// spec.detectMultiplier.
    pub detect_multiplier: Option<u32>,
    /// spec.echoInterval, ms.
    pub echo_interval: Option<u32>,
    /// spec.echoMode.
    pub echo_mode: Option<bool>,
    /// spec.passiveMode.
    pub passive_mode: Option<bool>,
    /// spec.minimumTtl.
    pub minimum_ttl: Option<u32>,
}

/// What one session runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Desired Min TX Interval once Up (the profile's transmitInterval).
    pub desired_min_tx: Duration,
    /// Required Min RX Interval (the profile's receiveInterval).
    pub required_min_rx: Duration,
    /// Detect Mult sent to the peer.
    pub detect_mult: u8,
    /// Send nothing until the peer has spoken (RFC 5880 §6.1).
    pub passive: bool,
    /// Which TTL rule received packets must pass.
    pub hops: Hops,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            desired_min_tx: DEFAULT_TRANSMIT_INTERVAL,
            required_min_rx: DEFAULT_RECEIVE_INTERVAL,
            detect_mult: DEFAULT_DETECT_MULTIPLIER,
            passive: false,
            hops: Hops::Single,
        }
    }
}

/// Whether the peer is directly connected; it picks the port and the TTL
/// rule. The caller decides from the BGP peer: eBGP multihop, or iBGP to
/// an address on no connected network, is multihop (as FRR's bgpd, which
/// upstream runs, decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// RFC 5881: port 3784, TTL 255 only.
    SingleHop,
    /// RFC 5883: port 4784, TTL at least minimumTtl.
    MultiHop,
}

/// A profile this speaker cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    /// echoMode true.
    EchoMode,
    /// A value outside the range the CRD allows (the webhook or config
    /// check normally catches it first; this keeps the session's timers
    /// bounded whatever reaches it).
    OutOfRange {
        /// The spec field, as the user writes it.
        field: &'static str,
        /// The value given.
        value: u32,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // One text, whoever refuses it: config at admission, this at run time.
            ProfileError::EchoMode => f.write_str(crate::config::ECHO_MODE_REFUSAL),
            ProfileError::OutOfRange {
                field,
                value,
                min,
                max,
            } => {
                write!(f, "spec.{field}: {value} is outside {min}-{max}")
            }
        }
    }
}

impl std::error::Error for ProfileError {}

/// Why a profile with echo mode is refused, or `None` when it is not on.
pub fn echo_mode_refusal(profile: &Profile) -> Option<ProfileError> {
    (profile.echo_mode == Some(true)).then_some(ProfileError::EchoMode)
}

impl Params {
    /// The parameters of a profile, defaults filling what it leaves out.
    /// minimumTtl applies only to multihop sessions, as in upstream.
    pub fn from_profile(profile: &Profile, reach: Reach) -> Result<Params, ProfileError> {
        if let Some(refused) = echo_mode_refusal(profile) {
            return Err(refused);
        }
        let ranged = |value: Option<u32>, field, min, max| match value {
            Some(value) if !(min..=max).contains(&value) => Err(ProfileError::OutOfRange {
                field,
                value,
                min,
                max,
            }),
            other => Ok(other),
        };
        let ms = |v: Option<u32>, default| v.map_or(default, |v| Duration::from_millis(v.into()));
        let rx = ranged(profile.receive_interval, "receiveInterval", 10, 60_000)?;
        let tx = ranged(profile.transmit_interval, "transmitInterval", 10, 60_000)?;
        ranged(profile.echo_interval, "echoInterval", 10, 60_000)?;
        // The ranges keep both below 256, so the conversions cannot fail.
        let mult = ranged(profile.detect_multiplier, "detectMultiplier", 2, 255)?;
        let ttl = ranged(profile.minimum_ttl, "minimumTtl", 1, 254)?;
        let byte =
            |v: Option<u32>, default| v.and_then(|v| u8::try_from(v).ok()).unwrap_or(default);
        Ok(Params {
            desired_min_tx: ms(tx, DEFAULT_TRANSMIT_INTERVAL),
            required_min_rx: ms(rx, DEFAULT_RECEIVE_INTERVAL),
            detect_mult: byte(mult, DEFAULT_DETECT_MULTIPLIER),
            passive: profile.passive_mode.unwrap_or(false),
            hops: match reach {
                Reach::SingleHop => Hops::Single,
                Reach::MultiHop => Hops::Multi {
                    minimum_ttl: byte(ttl, DEFAULT_MINIMUM_TTL),
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_become_params() {
        let full = Profile {
            receive_interval: Some(150),
            transmit_interval: Some(200),
            detect_multiplier: Some(10),
            echo_interval: Some(20),
            echo_mode: Some(false),
            passive_mode: Some(true),
            minimum_ttl: Some(5),
        };
        let ms = Duration::from_millis;
        let rows: &[(&str, Profile, Reach, Params)] = &[
            (
                "empty single hop: upstream defaults",
                Profile::default(),
                Reach::SingleHop,
                Params::default(),
            ),
            (
                "empty multihop: minimum TTL 254",
                Profile::default(),
                Reach::MultiHop,
                Params {
                    hops: Hops::Multi { minimum_ttl: 254 },
                    ..Params::default()
                },
            ),
            (
                "every field, single hop ignores minimumTtl",
                full,
                Reach::SingleHop,
                Params {
                    desired_min_tx: ms(200),
                    required_min_rx: ms(150),
                    detect_mult: 10,
                    passive: true,
                    hops: Hops::Single,
                },
            ),
            (
                "every field, multihop",
                full,
                Reach::MultiHop,
                Params {
                    desired_min_tx: ms(200),
                    required_min_rx: ms(150),
                    detect_mult: 10,
                    passive: true,
                    hops: Hops::Multi { minimum_ttl: 5 },
                },
            ),
            (
                "range edges",
                Profile {
                    receive_interval: Some(60_000),
                    transmit_interval: Some(10),
                    detect_multiplier: Some(255),
                    ..Profile::default()
                },
                Reach::SingleHop,
                Params {
                    desired_min_tx: ms(10),
                    required_min_rx: ms(60_000),
                    detect_mult: 255,
                    ..Params::default()
                },
            ),
        ];
        for (name, profile, reach, want) in rows {
            assert_eq!(Params::from_profile(profile, *reach), Ok(*want), "{name}");
        }
    }

    #[test]
    fn profiles_this_speaker_cannot_run_are_refused() {
        let rows: &[(&str, Profile, &str)] = &[
            (
                "echo mode",
                Profile {
                    echo_mode: Some(true),
                    ..Profile::default()
                },
                "echoMode is not supported by the metallb-rs native BFD: set echoMode false",
            ),
            (
                "receive 9 ms",
                Profile {
                    receive_interval: Some(9),
                    ..Profile::default()
                },
                "spec.receiveInterval: 9 is outside 10-60000",
            ),
            (
                "transmit 60001 ms",
                Profile {
                    transmit_interval: Some(60_001),
                    ..Profile::default()
                },
                "spec.transmitInterval: 60001 is outside 10-60000",
            ),
            (
                "multiplier 1",
                Profile {
                    detect_multiplier: Some(1),
                    ..Profile::default()
                },
                "spec.detectMultiplier: 1 is outside 2-255",
            ),
            (
                "multiplier 256",
                Profile {
                    detect_multiplier: Some(256),
                    ..Profile::default()
                },
                "spec.detectMultiplier: 256 is outside 2-255",
            ),
            (
                "minimum TTL 255",
                Profile {
                    minimum_ttl: Some(255),
                    ..Profile::default()
                },
                "spec.minimumTtl: 255 is outside 1-254",
            ),
            (
                "echo interval 0",
                Profile {
                    echo_interval: Some(0),
                    ..Profile::default()
                },
                "spec.echoInterval: 0 is outside 10-60000",
            ),
        ];
        for (name, profile, message) in rows {
            let got = Params::from_profile(profile, Reach::MultiHop).map_err(|e| e.to_string());
            let Err(got) = got else {
                panic!("{name}: accepted")
            };
            assert!(got.starts_with(message), "{name}: {got}");
        }
    }

    #[test]
    fn echo_mode_refusal_only_when_on() {
        let with = |echo_mode| Profile {
            echo_mode,
            ..Profile::default()
        };
        assert_eq!(echo_mode_refusal(&with(None)), None);
        assert_eq!(echo_mode_refusal(&with(Some(false))), None);
        assert_eq!(
            echo_mode_refusal(&with(Some(true))),
            Some(ProfileError::EchoMode)
        );
    }
}
