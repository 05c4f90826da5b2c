//! Graceful restart against the fake router: the OPEN's capability, the
//! first table held for the speaker's first pass, End-of-RIB, and how the
//! process stopping closes the session.

use super::*;

/// The graceful restart capability as a router sends it.
fn gr_capability() -> Capability {
    Capability::GracefulRestart(bgp::GracefulRestart {
        restart_time: 120,
        ..bgp::GracefulRestart::default()
    })
}

impl FakePeer {
    /// Every message but keepalives until the speaker closes the
    /// connection, within 10 s.
    async fn until_closed(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        loop {
            let r = tokio::time::timeout(Duration::from_secs(10), read_strict(&mut self.rd, &FOUR))
                .await
                .expect("the connection closes within 10 s");
            match r {
                Ok(Message::Keepalive) => {}
                Ok(m) => out.push(m),
                Err(ReadError::Io(_)) => return out,
                Err(ReadError::Malformed(n)) => panic!("the speaker sent a malformed message: {n}"),
            }
        }
    }
}

/// Against a router offering graceful restart too: the first OPEN says
/// we restarted, the table waits for the speaker's first pass and
/// End-of-RIB follows it once per family; a reconnection no longer says
/// restarted and gets the table at once; the process stopping drops the
/// connection without a Cease, so the router keeps the routes.
#[tokio::test]
async fn graceful_restart_with_a_router_that_helps() {
    let l = listener(None);
    let mut cfg = config(&l, 64512);
    cfg.graceful_restart = true;
    let mut speaker = Speaker::new(BgpMetrics::new(&Registry::new()));
    speaker.set_peers(vec![cfg]).await;
    let ip: IpAddr = "192.168.10.5".parse().expect("ip");
    let prefix: ipnet::Ipv4Net = "192.168.10.5/32".parse().expect("net");
    speaker.set_service(
        &ServiceKey::new("ns", "a"),
        &[ip],
        routes("fake", &[("192.168.10.5/32", 1)]),
    );
    let mut p = FakePeer::accept_with(&l, 64512, 9, vec![gr_capability()]).await;
    let gr = p.open.graceful_restart().expect("our capability").clone();
    assert!(gr.restarting && !gr.notification, "{gr:?}");
    assert_eq!(gr.restart_time, 120);
    let families: Vec<(u16, bool)> = gr
        .families
        .iter()
        .map(|f| (f.afi, f.forwarding_preserved))
        .collect();
    assert_eq!(families, [(1, true), (2, true)]);
    // Held until the first pass: nothing but keepalives meanwhile.
    let quiet = p.next_any(Duration::from_millis(500)).await;
    assert!(
        matches!(quiet, None | Some(Message::Keepalive)),
        "{quiet:?}"
    );
    speaker.first_pass_complete();
    let table = p.next_any(Duration::from_secs(10)).await;
    let Some(Message::Update(u)) = table else {
        panic!("expected the table, got {table:?}")
    };
    assert_eq!(u.nlri, [prefix]);
    let mut eor = Vec::new();
    while eor.len() < 2 {
        match p.next_any(Duration::from_secs(10)).await {
            Some(Message::Keepalive) => {}
            Some(Message::Update(u)) => eor.push(u.end_of_rib().expect("End-of-RIB").0),
            other => panic!("expected End-of-RIB, got {other:?}"),
        }
    }
    assert_eq!(eor, [Afi::Ipv4, Afi::Ipv6]);

    drop(p);
    let mut p = FakePeer::accept_with(&l, 64512, 9, vec![gr_capability()]).await;
    assert!(
        !p.open
            .graceful_restart()
            .expect("our capability")
            .restarting
    );
    assert_eq!(p.update().await.nlri, [prefix]);

    speaker.shutdown().await;
    let rest = p.until_closed().await;
    assert!(
        !rest.iter().any(|m| matches!(m, Message::Notification(_))),
        "{rest:?}"
    );
}

/// A router that does not offer graceful restart: the table goes out
/// without waiting and the process stopping sends a Cease, as without it.
#[tokio::test]
async fn graceful_restart_needs_the_router_too() {
    let l = listener(None);
    let mut cfg = config(&l, 64512);
    cfg.graceful_restart = true;
    let mut speaker = Speaker::new(BgpMetrics::new(&Registry::new()));
    speaker.set_peers(vec![cfg]).await;
    speaker.set_service(
        &ServiceKey::new("ns", "a"),
        &["192.168.10.5".parse().expect("ip")],
        routes("fake", &[("192.168.10.5/32", 1)]),
    );
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    assert!(p.open.graceful_restart().is_some());
    assert_eq!(
        p.update().await.nlri,
        ["192.168.10.5/32".parse::<ipnet::Ipv4Net>().expect("net")]
    );
    speaker.shutdown().await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (6, 2));
}
