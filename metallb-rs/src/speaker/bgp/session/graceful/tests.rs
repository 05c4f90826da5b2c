//! Graceful restart decisions as tables, one line of text per row: our
//! capability, when it is negotiated, the first table's steps, and how a
//! stopped session closes.

use super::super::tests::{cfg, theirs};
use super::super::*;
use super::{FirstPass, Opening, Step, closing};
use crate::net::bgp::Message;
use rstest::rstest;

/// Our graceful restart capability as text: `none`, or its flags, restart
/// time and families (`afi/safi` with `+F` when forwarding is preserved).
fn our_gr(graceful_restart: bool, families: &[Afi], history: PeerHistory) -> String {
    let cfg = SessionConfig {
        graceful_restart,
        families: families.to_vec(),
        ..cfg(PeerAsn::Fixed(64513), None)
    };
    let open = our_open(&cfg, "10.0.0.1".parse().expect("ip"), history);
    let Some(gr) = open.graceful_restart() else {
        return "none".into();
    };
    let families: Vec<String> = gr
        .families
        .iter()
        .map(|f| {
            let flag = if f.forwarding_preserved { "+F" } else { "" };
            format!("{}/{}{flag}", f.afi, f.safi)
        })
        .collect();
    format!(
        "R={} N={} time={}s families={}",
        u8::from(gr.restarting),
        u8::from(gr.notification),
        gr.restart_time,
        families.join(",")
    )
}

#[rstest]
#[case::off(false, &[Afi::Ipv4], PeerHistory::NeverEstablished, "none")]
#[case::first_session_restarting(
    true,
    &[Afi::Ipv4],
    PeerHistory::NeverEstablished,
    "R=1 N=0 time=120s families=1/1+F"
)]
#[case::later_session_not_restarting(
    true,
    &[Afi::Ipv4],
    PeerHistory::EstablishedBefore,
    "R=0 N=0 time=120s families=1/1+F"
)]
#[case::ipv6_only(
    true,
    &[Afi::Ipv6],
    PeerHistory::NeverEstablished,
    "R=1 N=0 time=120s families=2/1+F"
)]
#[case::dual_stack_every_family_forwarding(
    true,
    &[Afi::Ipv6, Afi::Ipv4],
    PeerHistory::EstablishedBefore,
    "R=0 N=0 time=120s families=2/1+F,1/1+F"
)]
fn our_graceful_restart_capability(
    #[case] graceful_restart: bool,
    #[case] families: &[Afi],
    #[case] history: PeerHistory,
    #[case] expected: &str,
) {
    assert_eq!(our_gr(graceful_restart, families, history), expected);
}

/// The capability survives our own encoder and decoder.
#[test]
fn our_graceful_restart_capability_goes_on_the_wire() {
    let cfg = SessionConfig {
        graceful_restart: true,
        ..cfg(PeerAsn::Fixed(64513), None)
    };
    let open = our_open(
        &cfg,
        "10.0.0.1".parse().expect("ip"),
        PeerHistory::NeverEstablished,
    );
    let bytes = bgp::encode(&Message::Open(open.clone()), &Context::default());
    assert_eq!(
        bgp::decode(&bytes, &Context::default()),
        Ok(Message::Open(open))
    );
}

#[rstest]
#[case::both(true, "64513 90 10.0.0.2 v4 gr", true)]
#[case::only_us(true, "64513 90 10.0.0.2 v4", false)]
#[case::only_the_peer(false, "64513 90 10.0.0.2 v4 gr", false)]
#[case::neither(false, "64513 90 10.0.0.2 v4", false)]
fn graceful_restart_is_negotiated_when_both_send_it(
    #[case] ours_on: bool,
    #[case] peer: &str,
    #[case] expected: bool,
) {
    let cfg = SessionConfig {
        graceful_restart: ours_on,
        ..cfg(PeerAsn::Fixed(64513), None)
    };
    let ours = our_open(
        &cfg,
        "10.0.0.1".parse().expect("ip"),
        PeerHistory::EstablishedBefore,
    );
    let n = negotiate(&cfg, &ours, &theirs(peer)).expect("accepted");
    assert_eq!(n.graceful_restart, expected);
}

/// Steps of an [`Opening`] as text, one per first-pass state in `passes`
/// (`running` or `complete`): `wait`, `table+EoR(families)`, `changes`.
fn opening_steps(families: &[Afi], graceful_restart: bool, passes: &str) -> String {
    let mut o = Opening::new(families, graceful_restart);
    passes
        .split_whitespace()
        .map(|p| {
            let pass = match p {
                "running" => FirstPass::Running,
                "complete" => FirstPass::Complete,
                other => panic!("unknown pass {other}"),
            };
            match o.step(pass) {
                Step::Wait => "wait".to_string(),
                Step::Changes => "changes".to_string(),
                Step::Table(eor) => {
                    let fams: Vec<String> = eor
                        .iter()
                        .map(|u| match u.end_of_rib() {
                            Some((afi, safi)) => format!("{afi:?}/{safi}"),
                            None => format!("not an End-of-RIB: {u:?}"),
                        })
                        .collect();
                    format!("table+EoR({})", fams.join(","))
                }
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[rstest]
#[case::without_gr_at_once(&[Afi::Ipv4], false, "running running", "table+EoR(Ipv4/1) changes")]
#[case::gr_held_until_the_first_pass(
    &[Afi::Ipv4],
    true,
    "running running complete complete",
    "wait wait table+EoR(Ipv4/1) changes"
)]
#[case::gr_after_the_first_pass_at_once(&[Afi::Ipv6], true, "complete running", "table+EoR(Ipv6/1) changes")]
#[case::every_family_once(
    &[Afi::Ipv4, Afi::Ipv6],
    true,
    "complete complete complete",
    "table+EoR(Ipv4/1,Ipv6/1) changes changes"
)]
fn first_table_then_end_of_rib(
    #[case] families: &[Afi],
    #[case] graceful_restart: bool,
    #[case] passes: &str,
    #[case] expected: &str,
) {
    assert_eq!(opening_steps(families, graceful_restart, passes), expected);
}

#[rstest]
#[case::removed_peer_with_gr(Stop::Cease(Notification::new(6, 3, [])), true, Some((6, 3)))]
#[case::changed_peer_without_gr(Stop::Cease(Notification::new(6, 6, [])), false, Some((6, 6)))]
#[case::exit_with_gr_drops_the_connection(Stop::Exit, true, None)]
#[case::exit_without_gr_ceases(Stop::Exit, false, Some((6, 2)))]
fn how_a_stopped_session_closes(
    #[case] stop: Stop,
    #[case] graceful_restart: bool,
    #[case] expected: Option<(u8, u8)>,
) {
    assert_eq!(
        closing(&stop, graceful_restart).map(|n| (n.code, n.subcode)),
        expected
    );
}
