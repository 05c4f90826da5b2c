//! Table tests of the session: a scripted peer's packets and the clock in,
//! every action out as one line of text (`<ms> send ...`,
//! `<ms> <from> -> <to> diag <n>`), times in ms from a fixed base.

use super::*;
use std::sync::OnceLock;

const LOCAL: u32 = 1;
const PEER: u32 = 0x77;

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn at(ms: u64) -> Instant {
    base() + Duration::from_millis(ms)
}

fn ms(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}", us / 1000)
    } else {
        format!("{}.{:03}", us / 1000, us % 1000)
    }
}

/// What a well-behaved peer sends in `state`, knowing our discriminator
/// once past Down.
const fn peer(state: State) -> ControlPacket {
    ControlPacket {
        diagnostic: Diagnostic::None,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: PEER,
        your_discriminator: if matches!(state, State::Down) {
            0
        } else {
            LOCAL
        },
        desired_min_tx_us: if matches!(state, State::Up) {
            300_000
        } else {
            1_000_000
        },
        required_min_rx_us: 300_000,
        required_min_echo_rx_us: 0,
    }
}

const fn poll(p: ControlPacket) -> ControlPacket {
    ControlPacket { poll: true, ..p }
}

const fn fin(p: ControlPacket) -> ControlPacket {
    ControlPacket { final_: true, ..p }
}

fn line(t: Instant, action: &Action) -> String {
    let t = ms(t - base());
    match action {
        Action::Send(p) => format!(
            "{t} send {} diag {} your {:#x}{}{} tx {} rx {}",
            p.state,
            p.diagnostic.code(),
            p.your_discriminator,
            if p.poll { " poll" } else { "" },
            if p.final_ { " final" } else { "" },
            ms(Duration::from_micros(p.desired_min_tx_us.into())),
            ms(Duration::from_micros(p.required_min_rx_us.into())),
        ),
        Action::StateChanged(c) => {
            format!("{t} {} -> {} diag {}", c.from, c.to, c.diagnostic.code())
        }
    }
}

/// One event of a script, at a time in ms.
#[derive(Clone, Copy)]
enum Step {
    /// Fire every wake up to this time.
    Until(u64),
    /// A packet from the peer.
    Rx(u64, ControlPacket),
    /// The profile changed.
    Reconfigure(u64, Params),
    /// Taken down by configuration.
    AdminDown(u64),
}

/// A session and its clock: every step first fires the wakes due by its
/// time, as the caller's event loop would.
struct Sim {
    session: Session,
    now: Instant,
    jitter: f64,
    log: Vec<String>,
}

impl Sim {
    fn new(params: Params) -> Sim {
        let local = NonZeroU32::new(LOCAL).unwrap_or(NonZeroU32::MIN);
        Sim {
            session: Session::new(params, local, at(0)),
            now: at(0),
            jitter: 0.0,
            log: Vec::new(),
        }
    }

    fn record(&mut self, t: Instant, actions: Vec<Action>) {
        self.log.extend(actions.iter().map(|a| line(t, a)));
    }

    /// A wake already past fires at the current time, as a late timer would.
    fn until(&mut self, t: Instant) {
        while let Some(wake) = self.session.next_wake().filter(|w| *w <= t) {
            self.now = self.now.max(wake);
            let actions = self.session.on_timer(self.now, self.jitter);
            self.record(self.now, actions);
        }
        self.now = self.now.max(t);
    }

    fn run(&mut self, steps: &[Step]) -> &mut Sim {
        for step in steps {
            match *step {
                Step::Until(t) => self.until(at(t)),
                Step::Rx(t, p) => {
                    self.until(at(t));
                    let actions = self.session.on_packet(at(t), &p);
                    self.record(at(t), actions);
                }
                Step::Reconfigure(t, params) => {
                    self.until(at(t));
                    self.session.reconfigure(params);
                }
                Step::AdminDown(t) => {
                    self.until(at(t));
                    let actions = self.session.admin_down(at(t));
                    self.record(at(t), actions);
                }
            }
        }
        self
    }

    fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log)
    }
}

/// The three-way handshake against a peer that polls when it comes Up,
/// ending with both Polls answered at 1310 ms.
const BRING_UP: &[Step] = &[
    Step::Until(0),
    Step::Rx(100, peer(State::Down)),
    Step::Until(1000),
    Step::Rx(1100, poll(peer(State::Up))),
    Step::Until(1300),
    Step::Rx(1310, fin(peer(State::Up))),
];

fn up() -> Sim {
    let mut sim = Sim::new(Params::default());
    sim.run(BRING_UP);
    assert_eq!(sim.session.state(), State::Up);
    sim.take();
    sim
}

#[test]
fn bring_up_down_init_up_with_a_scripted_peer() {
    let mut sim = Sim::new(Params::default());
    sim.run(BRING_UP).run(&[Step::Until(1600)]);
    assert_eq!(
        sim.take(),
        [
            "0 send Down diag 0 your 0x0 tx 1000 rx 300",
            "100 Down -> Init diag 0",
            "1000 send Init diag 0 your 0x77 tx 1000 rx 300",
            "1100 Init -> Up diag 0",
            "1100 send Up diag 0 your 0x77 final tx 300 rx 300",
            "1300 send Up diag 0 your 0x77 poll tx 300 rx 300",
            "1600 send Up diag 0 your 0x77 tx 300 rx 300",
        ]
    );
    assert_eq!(sim.session.remote_state(), State::Up);
    assert!(!sim.session.polling());
}

#[test]
fn state_table_of_rfc_5880() {
    use State::*;
    let rows: &[(State, State, State, u8)] = &[
        // (local, received, local after, diagnostic after)
        (Down, AdminDown, Down, 0),
        (Down, Down, Init, 0),
        (Down, Init, Up, 0),
        (Down, Up, Down, 0),
        (Init, AdminDown, Down, 3),
        (Init, Down, Init, 0),
        (Init, Init, Up, 0),
        (Init, Up, Up, 0),
        (Up, AdminDown, Down, 3),
        (Up, Down, Down, 3),
        (Up, Init, Up, 0),
        (Up, Up, Up, 0),
        (AdminDown, AdminDown, AdminDown, 7),
        (AdminDown, Down, AdminDown, 7),
        (AdminDown, Init, AdminDown, 7),
        (AdminDown, Up, AdminDown, 7),
    ];
    for &(local, received, want, diag) in rows {
        let mut sim = match local {
            Up => up(),
            _ => Sim::new(Params::default()),
        };
        match local {
            Init => {
                sim.run(&[Step::Rx(0, peer(Down))]);
            }
            AdminDown => {
                sim.run(&[Step::AdminDown(0)]);
            }
            _ => {}
        }
        assert_eq!(sim.session.state(), local, "{local} setup");
        sim.run(&[Step::Rx(2000, peer(received))]);
        let got = (sim.session.state(), sim.session.diagnostic().code());
        assert_eq!(got, (want, diag), "{local} receiving {received}");
    }
}

#[test]
fn silence_for_a_detection_time_takes_the_session_down_with_diag_1() {
    // (name, peer's detect mult, peer's Desired Min TX ms, our receiveInterval ms, down at ms)
    let rows: &[(&str, u8, u32, u64, u64)] = &[
        ("3 x our 300 ms", 3, 300, 300, 2000 + 900),
        ("5 x the peer's slower 500 ms", 5, 500, 300, 2000 + 2500),
        ("2 x our slower 400 ms", 2, 100, 400, 2000 + 800),
    ];
    for &(name, mult, peer_tx, rx, down_at) in rows {
        let params = Params {
            required_min_rx: Duration::from_millis(rx),
            ..Params::default()
        };
        let mut sim = Sim::new(params);
        sim.run(BRING_UP);
        let last = ControlPacket {
            detect_mult: mult,
            desired_min_tx_us: peer_tx * 1000,
            ..peer(State::Up)
        };
        sim.run(&[Step::Rx(2000, last), Step::Until(down_at - 1)]);
        assert_eq!(
            sim.session.state(),
            State::Up,
            "{name}: still up 1 ms before"
        );
        sim.take();
        sim.run(&[Step::Until(down_at)]);
        let changes: Vec<String> = sim
            .take()
            .into_iter()
            .filter(|l| l.contains("->"))
            .collect();
        assert_eq!(changes, [format!("{down_at} Up -> Down diag 1")], "{name}");
        assert_eq!(
            sim.session.remote_discriminator(),
            0,
            "{name}: peer forgotten"
        );
    }
}

#[test]
fn after_detection_expiry_the_session_sends_down_slowly_to_nobody() {
    let mut sim = up();
    sim.run(&[Step::Until(3400)]);
    assert_eq!(
        sim.take(),
        [
            "1600 send Up diag 0 your 0x77 tx 300 rx 300",
            "1900 send Up diag 0 your 0x77 tx 300 rx 300",
            "2200 send Up diag 0 your 0x77 tx 300 rx 300",
            // 900 ms after the Final of 1310.
            "2210 Up -> Down diag 1",
            "3200 send Down diag 1 your 0x0 tx 1000 rx 300",
        ]
    );
}

#[test]
fn the_peer_saying_down_or_admin_down_ends_the_session_with_diag_3() {
    for received in [State::Down, State::AdminDown] {
        let mut sim = up();
        sim.run(&[Step::Rx(1400, peer(received))]);
        let log = sim.take();
        assert_eq!(log, ["1400 Up -> Down diag 3"], "{received}");
        let actions = sim.session.on_packet(at(1500), &peer(State::Down));
        let lost: Vec<bool> = actions
            .iter()
            .filter_map(|a| match a {
                Action::StateChanged(c) => Some(c.session_lost()),
                Action::Send(_) => None,
            })
            .collect();
        assert_eq!(lost, [false], "{received}: Down -> Init is no loss");
    }
}

#[test]
fn session_lost_only_when_leaving_up() {
    use State::*;
    let change = |from, to| Change {
        from,
        to,
        diagnostic: Diagnostic::None,
    };
    let rows = [
        (Up, Down, true),
        (Up, AdminDown, true),
        (Init, Down, false),
        (Down, Init, false),
        (Init, Up, false),
    ];
    for (from, to, lost) in rows {
        assert_eq!(change(from, to).session_lost(), lost, "{from} -> {to}");
    }
}

#[test]
fn passive_mode_is_silent_until_the_peer_speaks() {
    let mut sim = Sim::new(Params {
        passive: true,
        ..Params::default()
    });
    sim.run(&[Step::Until(5000)]);
    assert_eq!(sim.take(), Vec::<String>::new());
    assert_eq!(sim.session.next_wake(), None);
    sim.run(&[Step::Rx(5000, peer(State::Down)), Step::Until(6000)]);
    assert_eq!(
        sim.take(),
        [
            "5000 Down -> Init diag 0",
            "5000 send Init diag 0 your 0x77 tx 1000 rx 300",
            "6000 send Init diag 0 your 0x77 tx 1000 rx 300",
        ]
    );
    // The peer vanishes: once it is forgotten, passive is silent again.
    sim.run(&[Step::Until(20_000)]);
    assert_eq!(
        sim.take(),
        [
            "7000 send Init diag 0 your 0x77 tx 1000 rx 300",
            "8000 Init -> Down diag 1"
        ]
    );
    assert_eq!(sim.session.next_wake(), None);
}

#[test]
fn while_not_up_transmit_is_once_a_second_whatever_the_profile() {
    for tx_ms in [10, 300, 999] {
        let params = Params {
            desired_min_tx: Duration::from_millis(tx_ms),
            ..Params::default()
        };
        let mut sim = Sim::new(params);
        sim.run(&[
            Step::Until(2500),
            Step::Rx(2600, peer(State::Down)),
            Step::Until(3000),
        ]);
        assert_eq!(
            sim.take(),
            [
                "0 send Down diag 0 your 0x0 tx 1000 rx 300",
                "1000 send Down diag 0 your 0x0 tx 1000 rx 300",
                "2000 send Down diag 0 your 0x0 tx 1000 rx 300",
                "2600 Down -> Init diag 0",
                "3000 send Init diag 0 your 0x77 tx 1000 rx 300",
            ],
            "transmitInterval {tx_ms} ms"
        );
    }
    let slow = Params {
        desired_min_tx: Duration::from_millis(2500),
        ..Params::default()
    };
    let mut sim = Sim::new(slow);
    sim.run(&[Step::Until(5000)]);
    assert_eq!(
        sim.take().len(),
        3,
        "a profile slower than 1 s keeps its own interval"
    );
}

#[test]
fn coming_up_polls_and_the_final_ends_it() {
    let mut sim = Sim::new(Params::default());
    sim.run(&BRING_UP[..5]);
    assert!(
        sim.session.polling(),
        "Up changed Desired Min TX: a Poll runs"
    );
    assert_eq!(
        sim.session.tx_interval(),
        Duration::from_millis(300),
        "faster TX is safe at once"
    );
    sim.take();
    // The Final is lost: the Poll goes on in every periodic packet.
    sim.run(&[
        Step::Rx(1400, peer(State::Up)),
        Step::Until(1600),
        Step::Rx(1650, fin(peer(State::Up))),
        Step::Until(1900),
    ]);
    assert_eq!(
        sim.take(),
        [
            "1600 send Up diag 0 your 0x77 poll tx 300 rx 300",
            "1900 send Up diag 0 your 0x77 tx 300 rx 300",
        ]
    );
    assert!(!sim.session.polling());
}

#[test]
fn slower_timers_wait_for_the_final() {
    let mut sim = up();
    let ms_ = Duration::from_millis;
    let slower = Params {
        desired_min_tx: ms_(500),
        required_min_rx: ms_(100),
        ..Params::default()
    };
    let quick_peer = ControlPacket {
        desired_min_tx_us: 50_000,
        ..peer(State::Up)
    };
    sim.run(&[Step::Rx(1400, quick_peer), Step::Reconfigure(1450, slower)]);
    // Until the peer's Final: the old 300 ms TX and the old 300 ms RX in
    // the detection time, though the packets already advertise the new.
    assert_eq!(
        (sim.session.tx_interval(), sim.session.detection_time()),
        (ms_(300), ms_(900))
    );
    sim.run(&[
        Step::Until(1900),
        Step::Rx(1950, fin(quick_peer)),
        Step::Rx(2100, quick_peer),
        Step::Rx(2300, quick_peer),
        Step::Until(2500),
    ]);
    assert_eq!(
        sim.take(),
        [
            "1600 send Up diag 0 your 0x77 poll tx 500 rx 100",
            "1900 send Up diag 0 your 0x77 poll tx 500 rx 100",
            "2400 send Up diag 0 your 0x77 tx 500 rx 100",
        ]
    );
    assert_eq!(
        (sim.session.tx_interval(), sim.session.detection_time()),
        (ms_(500), ms_(300))
    );
}

#[test]
fn a_poll_from_the_peer_is_answered_at_once_with_final() {
    let mut sim = up();
    let faster_peer = ControlPacket {
        required_min_rx_us: 1_000_000,
        ..poll(peer(State::Up))
    };
    sim.run(&[Step::Rx(1450, faster_peer), Step::Until(2300)]);
    assert_eq!(
        sim.take(),
        [
            "1450 send Up diag 0 your 0x77 final tx 300 rx 300",
            // The peer wants one packet a second at most: 1 s after 1300.
            "2300 send Up diag 0 your 0x77 tx 300 rx 300",
        ]
    );
}

#[test]
fn remote_required_min_rx_zero_stops_transmission() {
    let mut sim = up();
    let hush = ControlPacket {
        required_min_rx_us: 0,
        ..peer(State::Up)
    };
    let steps: Vec<Step> = (0..8).map(|i| Step::Rx(1400 + 250 * i, hush)).collect();
    sim.run(&steps).run(&[Step::Until(3500)]);
    assert_eq!(
        sim.take(),
        Vec::<String>::new(),
        "nothing sent, the session stays up"
    );
    assert_eq!(sim.session.state(), State::Up);
    sim.run(&[Step::Rx(3500, poll(hush))]);
    assert_eq!(
        sim.take(),
        ["3500 send Up diag 0 your 0x77 final tx 300 rx 300"],
        "a Poll is still answered"
    );
    sim.run(&[Step::Rx(3600, peer(State::Up)), Step::Until(3600)]);
    assert_eq!(
        sim.take(),
        ["3600 send Up diag 0 your 0x77 tx 300 rx 300"],
        "sending resumes"
    );
}

#[test]
fn jitter_reduces_each_interval_by_up_to_a_quarter() {
    // (detect mult, jitter, fraction of the interval kept)
    let rows: &[(u8, f64, f64)] = &[
        (3, 0.0, 1.0),
        (3, 0.5, 0.875),
        (3, 0.999_999, 0.750_000_25),
        (3, 7.0, 0.75),
        (3, -1.0, 1.0),
        (3, f64::NAN, 1.0),
        (1, 0.0, 0.90),
        (1, 0.999_999, 0.750_000_15),
        (1, 0.5, 0.825),
    ];
    for &(mult, jitter, kept) in rows {
        let got = 1.0 - jitter_reduction(mult, jitter);
        assert!(
            (got - kept).abs() < 1e-9,
            "mult {mult} jitter {jitter}: {got} != {kept}"
        );
    }
    let interval = Duration::from_millis(1000);
    assert_eq!(jittered(interval, 3, 0.5), Duration::from_millis(875));
    assert_eq!(jittered(interval, 1, 0.0), Duration::from_millis(900));
}

#[test]
fn the_session_draws_jitter_for_every_interval() {
    for (jitter, mult, second_at) in [
        (0.0, 3, "1000"),
        (0.5, 3, "875"),
        (0.999_999, 3, "750"),
        (0.0, 1, "900"),
    ] {
        let mut sim = Sim::new(Params {
            detect_mult: mult,
            ..Params::default()
        });
        sim.jitter = jitter;
        sim.run(&[Step::Until(1000)]);
        let times: Vec<String> = sim
            .take()
            .iter()
            .filter_map(|l| l.split(' ').next().map(str::to_owned))
            .collect();
        let second = times
            .get(1)
            .map(|t| t.split('.').next().unwrap_or(t).to_owned());
        assert_eq!(
            second.as_deref(),
            Some(second_at),
            "jitter {jitter}, mult {mult}: {times:?}"
        );
    }
}

#[test]
fn admin_down_tells_the_peer_for_a_detection_time_then_stops() {
    let mut sim = up();
    sim.run(&[Step::AdminDown(1400), Step::Until(10_000)]);
    assert_eq!(
        sim.take(),
        [
            "1400 Up -> AdminDown diag 7",
            "1400 send AdminDown diag 7 your 0x77 tx 1000 rx 300",
            "2400 send AdminDown diag 7 your 0x77 tx 1000 rx 300",
            "3400 send AdminDown diag 7 your 0x77 tx 1000 rx 300",
        ]
    );
    assert_eq!(sim.session.next_wake(), None);
    assert_eq!(
        sim.session.on_packet(at(10_000), &poll(peer(State::Up))),
        [],
        "AdminDown discards"
    );
    let back = sim.session.admin_up();
    assert_eq!(
        back.iter().map(|a| line(at(10_000), a)).collect::<Vec<_>>(),
        ["10000 AdminDown -> Down diag 0"]
    );
}

#[test]
fn counters_count_what_the_metrics_report() {
    let mut sim = Sim::new(Params::default());
    sim.run(BRING_UP);
    let stranger = ControlPacket {
        your_discriminator: 99,
        ..peer(State::Up)
    };
    sim.run(&[
        Step::Rx(1400, stranger),
        Step::Rx(1450, peer(State::Down)),
        Step::Until(2300),
    ]);
    let sent = sim.take().iter().filter(|l| l.contains(" send ")).count() as u64;
    assert_eq!(sent, 5);
    assert_eq!(
        sim.session.counters(),
        Counters {
            control_packets_in: 4,
            control_packets_out: sent,
            echo_packets_in: 0,
            echo_packets_out: 0,
            up_events: 1,
            down_events: 1,
            notifications: 2,
            discarded: 1,
        }
    );
}

mod pair;
