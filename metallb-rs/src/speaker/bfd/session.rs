//! One BFD session in asynchronous mode (RFC 5880 §6.8): the state
//! machine, the transmit and detection timers, the Poll/Final sequence
//! and the counters the metrics read. Time and randomness come in as
//! arguments; the caller sends what [`Action::Send`] holds, reacts to
//! [`Action::StateChanged`] (Up -> Down tears the BGP session down) and
//! calls [`Session::on_timer`] at [`Session::next_wake`].
//!
//! Interval changes follow §6.8.3 in the direction that keeps both ends
//! safe: a faster transmit interval or a longer receive interval is used
//! at once (the peer's detection can only grow), a slower transmit
//! interval or a shorter receive interval only after the peer's Final
//! (before it, the peer might still expect the old rate).

use super::packet::{ControlPacket, Diagnostic, State};
use super::params::Params;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// The slowest a session transmits while not Up, and its Desired Min TX
/// Interval then (RFC 5880 §6.8.3).
pub const SLOW_TX: Duration = Duration::from_secs(1);

/// What the caller must do after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send this packet to the peer now.
    Send(ControlPacket),
    /// The session changed state.
    StateChanged(Change),
}

/// A state change and its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The state before.
    pub from: State,
    /// The state now.
    pub to: State,
    /// Why (the diagnostic now sent to the peer).
    pub diagnostic: Diagnostic,
}

impl Change {
    /// The path failed: a BGP session riding on this one must close now.
    pub fn session_lost(&self) -> bool {
        self.from == State::Up && self.to != State::Up
    }
}

/// Running totals for the `metallb_bfd_*` metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Control packets accepted from the peer (control_packet_input).
    pub control_packets_in: u64,
    /// Control packets handed out to send (control_packet_output).
    pub control_packets_out: u64,
    /// Echo packets received (echo_packet_input): echo mode is refused,
    /// so this stays zero; it is here so the metric has a source.
    pub echo_packets_in: u64,
    /// Echo packets sent (echo_packet_output): zero, as above.
    pub echo_packets_out: u64,
    /// Transitions into Up (session_up_events).
    pub up_events: u64,
    /// Transitions from Init or Up into Down or AdminDown
    /// (session_down_events).
    pub down_events: u64,
    /// State changes the BGP side must hear of, into or out of Up
    /// (what zebra_notifications counts in FRR).
    pub notifications: u64,
    /// Packets addressed to another discriminator, dropped.
    pub discarded: u64,
}

/// Why a packet goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// The transmit timer (or AdminDown's first word): carries our Poll
    /// while one runs.
    Periodic,
    /// The answer to the peer's Poll; never carries a Poll of ours
    /// (§6.8.7: P and F are not set together).
    Final,
}

/// What the last packet from the peer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Remote {
    discriminator: u32,
    state: State,
    min_rx: Duration,
    desired_min_tx: Duration,
    detect_mult: u8,
}

impl Remote {
    /// Before the peer speaks (RFC 5880 §6.8.1: RemoteMinRxInterval 1).
    const UNKNOWN: Remote = Remote {
        discriminator: 0,
        state: State::Down,
        min_rx: Duration::from_micros(1),
        desired_min_tx: Duration::ZERO,
        detect_mult: 0,
    };
}

/// One peer's BFD session.
#[derive(Debug, Clone)]
pub struct Session {
    params: Params,
    local: NonZeroU32,
    state: State,
    diagnostic: Diagnostic,
    remote: Remote,
    /// Desired Min TX, Required Min RX and Detect Mult in our packets.
    advertised: (Duration, Duration, u8),
    /// The intervals our own timers use; they lag `advertised` during a
    /// Poll Sequence in the unsafe direction only.
    tx_in_use: Duration,
    rx_in_use: Duration,
    polling: bool,
    started: Instant,
    last_tx: Option<Instant>,
    /// Fraction of the next transmit interval taken off as jitter.
    tx_reduction: f64,
    last_rx: Option<Instant>,
    admin_down_at: Option<Instant>,
    counters: Counters,
}

/// Microseconds as the packet carries them.
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The fraction of an interval jitter removes (RFC 5880 §6.8.7): 0-25%,
/// or 10-25% when Detect Mult is 1; `jitter` is the caller's random
/// number in [0, 1).
pub fn jitter_reduction(detect_mult: u8, jitter: f64) -> f64 {
    let j = if jitter.is_finite() {
        jitter.clamp(0.0, 1.0)
    } else {
        0.0
    };
    if detect_mult == 1 {
        0.10 + 0.15 * j
    } else {
        0.25 * j
    }
}

/// `interval` less jitter.
pub fn jittered(interval: Duration, detect_mult: u8, jitter: f64) -> Duration {
    interval.mul_f64(1.0 - jitter_reduction(detect_mult, jitter))
}

impl Session {
    /// A session in Down that starts transmitting at once (unless
    /// passive). `local_discriminator` must be unique among this node's
    /// sessions: received packets are matched to sessions by it.
    pub fn new(params: Params, local_discriminator: NonZeroU32, now: Instant) -> Session {
        let mut s = Session {
            params,
            local: local_discriminator,
            state: State::Down,
            diagnostic: Diagnostic::None,
            remote: Remote::UNKNOWN,
            advertised: (SLOW_TX, params.required_min_rx, params.detect_mult),
            tx_in_use: SLOW_TX,
            rx_in_use: params.required_min_rx,
            polling: false,
            started: now,
            last_tx: None,
            tx_reduction: 0.0,
            last_rx: None,
            admin_down_at: None,
            counters: Counters::default(),
        };
        s.refresh_intervals();
        s
    }

    /// The local state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The local diagnostic (why the state last changed).
    pub fn diagnostic(&self) -> Diagnostic {
        self.diagnostic
    }

    /// The state the peer last reported.
    pub fn remote_state(&self) -> State {
        self.remote.state
    }

    /// This session's discriminator.
    pub fn local_discriminator(&self) -> NonZeroU32 {
        self.local
    }

    /// The peer's discriminator, zero until it speaks or once it is lost.
    pub fn remote_discriminator(&self) -> u32 {
        self.remote.discriminator
    }

    /// The parameters in force.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The totals so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether a Poll Sequence waits for the peer's Final.
    pub fn polling(&self) -> bool {
        self.polling
    }

    /// The negotiated transmit interval before jitter (§6.8.7): the
    /// larger of our Desired Min TX and the peer's Required Min RX.
    pub fn tx_interval(&self) -> Duration {
        self.tx_in_use.max(self.remote.min_rx)
    }

    /// How long the peer may stay silent (§6.8.4): its Detect Mult times
    /// the larger of our Required Min RX and its Desired Min TX.
    pub fn detection_time(&self) -> Duration {
        self.rx_in_use.max(self.remote.desired_min_tx) * u32::from(self.remote.detect_mult)
    }

    /// When [`Session::on_timer`] must run next; an instant already past
    /// means now. `None`: nothing to send and nothing to detect.
    pub fn next_wake(&self) -> Option<Instant> {
        match (self.next_tx(), self.detection_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Timers: the detection time and the periodic transmission. `jitter`
    /// is a fresh random number in [0, 1) drawn by the caller for each
    /// call, applied to the interval that starts if a packet goes out now.
    #[must_use = "the actions are the packets to send and the state changes to act on"]
    pub fn on_timer(&mut self, now: Instant, jitter: f64) -> Vec<Action> {
        let mut out = Vec::new();
        if self.detection_deadline().is_some_and(|at| now >= at) {
            self.remote = Remote::UNKNOWN;
            if matches!(self.state, State::Init | State::Up) {
                self.set_state(
                    State::Down,
                    Diagnostic::ControlDetectionTimeExpired,
                    &mut out,
                );
            }
        }
        if self.next_tx().is_some_and(|at| now >= at) {
            self.last_tx = Some(now);
            self.tx_reduction = jitter_reduction(self.advertised.2, jitter);
            out.push(self.send(Reason::Periodic));
        }
        out
    }

    /// A decoded packet from this session's peer that passed the TTL
    /// rule (§6.8.6 from the discriminator check on).
    #[must_use = "the actions are the packets to send and the state changes to act on"]
    pub fn on_packet(&mut self, now: Instant, packet: &ControlPacket) -> Vec<Action> {
        let mut out = Vec::new();
        if packet.your_discriminator != 0 && packet.your_discriminator != self.local.get() {
            self.counters.discarded += 1;
            return out;
        }
        self.counters.control_packets_in += 1;
        self.last_rx = Some(now);
        self.remote = Remote {
            discriminator: packet.my_discriminator,
            state: packet.state,
            min_rx: Duration::from_micros(packet.required_min_rx_us.into()),
            desired_min_tx: Duration::from_micros(packet.desired_min_tx_us.into()),
            detect_mult: packet.detect_mult,
        };
        if packet.final_ && self.polling {
            self.finish_poll();
        }
        if self.state == State::AdminDown {
            return out;
        }
        let next = match (self.state, packet.state) {
            (State::Down, State::AdminDown) => None,
            (_, State::AdminDown) => Some((State::Down, Diagnostic::NeighborSignaledSessionDown)),
            (State::Down, State::Down) => Some((State::Init, Diagnostic::None)),
            (State::Down | State::Init, State::Init) | (State::Init, State::Up) => {
                Some((State::Up, Diagnostic::None))
            }
            (State::Up, State::Down) => {
                Some((State::Down, Diagnostic::NeighborSignaledSessionDown))
            }
            _ => None,
        };
        if let Some((to, diagnostic)) = next {
            self.set_state(to, diagnostic, &mut out);
        }
        // Demand mode is not run: the D bit changes nothing. A Poll is
        // answered at once, outside the periodic schedule.
        if packet.poll {
            out.push(self.send(Reason::Final));
        }
        out
    }

    /// Take the session down by configuration (§6.8.16). The peer hears
    /// AdminDown at once: out of Up we slow to one packet a second, which
    /// its detection time of us may not allow for. Then it hears it for
    /// one such detection time, so one gets through a lossy path, then
    /// nothing.
    #[must_use = "the actions are the packets to send and the state changes to act on"]
    pub fn admin_down(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.state != State::AdminDown {
            self.admin_down_at = Some(now);
            self.set_state(State::AdminDown, Diagnostic::AdministrativelyDown, &mut out);
            if self.next_tx().is_some() {
                self.last_tx = Some(now);
                out.push(self.send(Reason::Periodic));
            }
        }
        out
    }

    /// Leave AdminDown for Down, starting over.
    #[must_use = "the actions are the packets to send and the state changes to act on"]
    pub fn admin_up(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        if self.state == State::AdminDown {
            self.admin_down_at = None;
            self.set_state(State::Down, Diagnostic::None, &mut out);
        }
        out
    }

    /// New parameters from a changed profile; interval changes run a Poll
    /// Sequence while Up.
    pub fn reconfigure(&mut self, params: Params) {
        self.params = params;
        self.refresh_intervals();
    }

    fn send(&mut self, reason: Reason) -> Action {
        self.counters.control_packets_out += 1;
        let (tx, rx, mult) = self.advertised;
        Action::Send(ControlPacket {
            diagnostic: self.diagnostic,
            state: self.state,
            poll: reason == Reason::Periodic && self.polling,
            final_: reason == Reason::Final,
            control_plane_independent: false,
            demand: false,
            detect_mult: mult,
            my_discriminator: self.local.get(),
            your_discriminator: self.remote.discriminator,
            desired_min_tx_us: micros(tx),
            required_min_rx_us: micros(rx),
            required_min_echo_rx_us: 0,
        })
    }

    fn set_state(&mut self, to: State, diagnostic: Diagnostic, out: &mut Vec<Action>) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        self.diagnostic = diagnostic;
        if to == State::Up {
            self.counters.up_events += 1;
        }
        if matches!(from, State::Init | State::Up) && matches!(to, State::Down | State::AdminDown) {
            self.counters.down_events += 1;
        }
        let change = Change {
            from,
            to,
            diagnostic,
        };
        if to == State::Up || change.session_lost() {
            self.counters.notifications += 1;
        }
        out.push(Action::StateChanged(change));
        self.refresh_intervals();
    }

    /// Recomputes what we advertise after a state or parameter change and
    /// decides which of it our own timers may use before a Final.
    fn refresh_intervals(&mut self) {
        let p = &self.params;
        let tx = if self.state == State::Up {
            p.desired_min_tx
        } else {
            p.desired_min_tx.max(SLOW_TX)
        };
        let advertised = (tx, p.required_min_rx, p.detect_mult);
        let changed = advertised != self.advertised;
        self.advertised = advertised;
        if self.state != State::Up {
            self.finish_poll();
            return;
        }
        self.tx_in_use = self.tx_in_use.min(tx);
        self.rx_in_use = self.rx_in_use.max(p.required_min_rx);
        self.polling |= changed;
    }

    fn finish_poll(&mut self) {
        self.polling = false;
        self.tx_in_use = self.advertised.0;
        self.rx_in_use = self.advertised.1;
    }

    fn next_tx(&self) -> Option<Instant> {
        if self.remote.min_rx.is_zero() || (self.params.passive && self.remote.discriminator == 0) {
            return None;
        }
        let at = match self.last_tx {
            None => self.started,
            Some(last) => last + self.tx_interval().mul_f64(1.0 - self.tx_reduction),
        };
        match self.admin_down_at {
            // The peer's detection time of us, as long as it could be
            // waiting to hear from us at all.
            Some(since) if self.state == State::AdminDown => {
                let window = self.tx_interval() * u32::from(self.advertised.2);
                (at < since + window).then_some(at)
            }
            _ => Some(at),
        }
    }

    fn detection_deadline(&self) -> Option<Instant> {
        if self.remote.discriminator == 0 || self.state == State::AdminDown {
            return None;
        }
        self.last_rx.map(|at| at + self.detection_time())
    }
}

#[cfg(test)]
mod tests;
