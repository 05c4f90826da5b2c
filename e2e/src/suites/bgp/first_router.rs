//! The BGP specs that change or watch one router's side (its
//! configuration, its restart, what crosses its link) or the speakers'
//! own view of one session (metrics): they run against the cluster's
//! first router, the external host's, with a BGPPeer to it alone.

use super::*;
/// The addresses whose sessions with the router are Established.
fn established(ctx: &Ctx) -> Result<BTreeSet<IpAddr>> {
    Ok(ctx
        .cluster()
        .bgp_neighbors()?
        .into_values()
        .filter(|n| n.established())
        .map(|n| n.address)
        .collect())
}

/// Waits until the router's sessions with exactly `from` are Established.
fn wait_sessions(ctx: &Ctx, from: &BTreeSet<IpAddr>) -> Result<()> {
    eventually(WAIT, &format!("BGP sessions from {from:?}"), || {
        Ok((established(ctx)? == *from).then_some(()))
    })
}

/// The router's paths for `prefix`.
fn paths(ctx: &Ctx, prefix: IpNet) -> Result<Vec<BgpPath>> {
    let family = family_of(prefix.addr().is_ipv6());
    Ok(ctx
        .cluster()
        .bgp_routes(family)?
        .remove(&prefix)
        .unwrap_or_default())
}

/// Waits until the router holds `prefix` through exactly `next_hops`;
/// returns the paths.
fn wait_route(ctx: &Ctx, prefix: IpNet, next_hops: &BTreeSet<IpAddr>) -> Result<Vec<BgpPath>> {
    eventually(
        WAIT,
        &format!("{prefix} via {next_hops:?} at the router"),
        || {
            let p = paths(ctx, prefix)?;
            let got: BTreeSet<IpAddr> = p.iter().flat_map(|p| p.nexthops.clone()).collect();
            Ok((got == *next_hops).then_some(p))
        },
    )
}

/// The default iBGP IPv4 configuration, backends on every node and
/// service `web`, announced by every node: its IP and the next hops.
fn announced_web(ctx: &Ctx) -> Result<(Config<'_>, IpAddr, BTreeSet<IpAddr>)> {
    let config = bgp_config(ctx, false, json!({}), json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let hops = all_hops(ctx, false);
    wait_route(ctx, host_route(ips[0]), &hops)?;
    Ok((config, ips[0], hops))
}

pub(super) fn peer_node_selectors(ctx: &Ctx) -> Result<()> {
    let addrs = node_addresses(ctx, false);
    let (first, first_ip) = addrs.first().context("no node")?.clone();
    let router_ip = router(ctx, false)?;
    let capture = capture(ctx)?;
    let _config = bgp_config(
        ctx,
        false,
        json!({ "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": first } }] }),
        json!({}),
    )?;
    let only = BTreeSet::from([first_ip]);
    wait_sessions(ctx, &only)?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    wait_route(ctx, host_route(ips[0]), &only)?;
    // Over the whole spec, the unselected nodes never dialled the router;
    // the selected one did (the capture saw its SYN: the control).
    throughout(
        Duration::from_secs(3),
        &format!("sessions from {first} only"),
        || {
            let up = established(ctx)?;
            Ok((up != only).then(|| format!("established from {up:?}")))
        },
    )?;
    let dialled = dials(&capture.finish()?, router_ip);
    ensure!(
        dialled.keys().eq([&first_ip]),
        "SYNs to the router came from {dialled:?}; only {first} ({first_ip}) is selected"
    );
    Ok(())
}

/// Router configuration made through vtysh for one spec, undone when
/// dropped (pass, fail or panic).
struct RouterChange<'a> {
    ctx: &'a Ctx,
    undo: String,
}

impl<'a> RouterChange<'a> {
    /// Runs `set(neighbor)` for each of `neighbors` under `router bgp`;
    /// `unset(neighbor)` lines restore it.
    fn per_neighbor(
        ctx: &'a Ctx,
        neighbors: &BTreeSet<IpAddr>,
        set: impl Fn(&IpAddr) -> String,
        unset: impl Fn(&IpAddr) -> String,
    ) -> Result<Self> {
        let lines =
            |f: &dyn Fn(&IpAddr) -> String| -> Vec<String> { neighbors.iter().map(f).collect() };
        let change = RouterChange {
            ctx,
            undo: router_commands(&lines(&unset)),
        };
        ctx.cluster().vtysh(&router_commands(&lines(&set)))?;
        Ok(change)
    }
}

fn router_commands(lines: &[String]) -> String {
    format!("configure terminal\nrouter bgp {ASN}\n{}", lines.join("\n"))
}

impl Drop for RouterChange<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.cluster().vtysh(&self.undo) {
            eprintln!("e2e: could not restore the router's configuration: {e:#}");
        }
    }
}

pub(super) fn md5_password(ctx: &Ctx) -> Result<()> {
    let hops = all_hops(ctx, false);
    // The router's own password comes back afterwards (none: none).
    let own = routers::routers(ctx, false)?
        .into_iter()
        .next()
        .and_then(|r| r.password);
    let _router = RouterChange::per_neighbor(
        ctx,
        &hops,
        |a| format!("neighbor {a} password e2e-s3cret"),
        |a| match &own {
            Some(p) => format!("neighbor {a} password {p}"),
            None => format!("no neighbor {a} password"),
        },
    )?;
    {
        let capture = capture(ctx)?;
        let router_ip = router(ctx, false)?;
        let _wrong = bgp_config(ctx, false, json!({ "password": "not-it" }), json!({}))?;
        // Positive control: every speaker dials, again and again - the
        // router's kernel drops segments signed with another key, so no
        // SYN is ever answered and no session comes up.
        eventually(WAIT, "every speaker dialling the router twice", || {
            let dials = dials(&capture.segments(), router_ip);
            Ok(hops
                .iter()
                .all(|h| dials.get(h).is_some_and(|n| *n >= 2))
                .then_some(()))
        })?;
        let segments = capture.finish()?;
        let answered: Vec<&Segment> = segments
            .iter()
            .filter(|s| s.syn && s.ack && s.src.ip() == router_ip && s.src.port() == bgp::PORT)
            .filter(|s| hops.contains(&s.dst.ip()))
            .collect();
        ensure!(
            answered.is_empty(),
            "the router answered a speaker's SYN despite the wrong password: {answered:?}"
        );
        let up = established(ctx)?;
        ensure!(up.is_empty(), "sessions up with a wrong password: {up:?}");
    }
    let _config = bgp_config(ctx, false, json!({ "password": "e2e-s3cret" }), json!({}))?;
    wait_sessions(ctx, &hops)?;
    let n = ctx.cluster().bgp_neighbors()?;
    ensure!(
        hops.iter()
            .all(|a| n.get(a).is_some_and(|s| s.authentication)),
        "the router does not report authentication on every session"
    );
    Ok(())
}

/// How many SYNs each address sent to the router's BGP port.
fn dials(segments: &[Segment], router: IpAddr) -> std::collections::BTreeMap<IpAddr, usize> {
    let mut out = std::collections::BTreeMap::new();
    for s in segments {
        if s.syn && !s.ack && s.dst.ip() == router && s.dst.port() == bgp::PORT {
            *out.entry(s.src.ip()).or_insert(0) += 1;
        }
    }
    out
}

/// The UPDATEs `from` sent the router that announce `prefix`.
fn updates_announcing(
    segments: &[Segment],
    from: IpAddr,
    router: IpAddr,
    prefix: IpNet,
) -> Vec<bgp::Update> {
    capture::messages(segments, from, router)
        .into_iter()
        .filter_map(|seen| match seen.msg {
            Message::Update(u) => Some(u),
            _ => None,
        })
        .filter(|u| {
            u.nlri.iter().any(|n| IpNet::V4(*n) == prefix)
                || u.attributes
                    .mp_reach
                    .as_ref()
                    .is_some_and(|m| m.nlri.contains(&prefix))
        })
        .collect()
}

/// A web service announced to the first router, which expects the nodes
/// in AS `asn` (put back when this drops), by a BGPPeer with `peer` and
/// an advertisement with LOCAL_PREF 300, its path there checked to be
/// `asn` alone; the wire from the nodes to the router captured meanwhile.
struct AnnouncedFromAs<'a> {
    _router: RouterChange<'a>,
    _config: Config<'a>,
    segments: Vec<Segment>,
    router_ip: IpAddr,
    prefix: IpNet,
    hops: BTreeSet<IpAddr>,
}

fn announced_from_as<'a>(ctx: &'a Ctx, asn: u32, peer: Value) -> Result<AnnouncedFromAs<'a>> {
    let hops = all_hops(ctx, false);
    let change = RouterChange::per_neighbor(
        ctx,
        &hops,
        |a| format!("neighbor {a} remote-as {asn}"),
        |a| format!("neighbor {a} remote-as {ASN}"),
    )?;
    let capture = capture(ctx)?;
    let router_ip = router(ctx, false)?;
    let config = bgp_config(ctx, false, peer, json!({ "localPref": 300 }))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let prefix = host_route(ips[0]);
    let paths = wait_route(ctx, prefix, &hops)?;
    for p in &paths {
        ensure!(
            p.as_path == asn.to_string(),
            "AS path {:?}, want {asn}",
            p.as_path
        );
    }
    Ok(AnnouncedFromAs {
        _router: change,
        _config: config,
        segments: capture.finish()?,
        router_ip,
        prefix,
        hops,
    })
}

impl AnnouncedFromAs<'_> {
    /// FRR ignores LOCAL_PREF from an external peer, so only the wire
    /// tells whether it was sent: every node's UPDATE for the prefix
    /// (seen: the positive control) carries none.
    fn no_local_pref(&self) -> Result<()> {
        for hop in &self.hops {
            let updates = updates_announcing(&self.segments, *hop, self.router_ip, self.prefix);
            ensure!(
                !updates.is_empty(),
                "no UPDATE announcing {} from {hop} was captured at the router",
                self.prefix
            );
            for u in &updates {
                ensure!(
                    u.attributes.local_pref.is_none(),
                    "{hop} sent LOCAL_PREF {:?} to its external peer: {u:?}",
                    u.attributes.local_pref
                );
            }
        }
        Ok(())
    }
}

pub(super) fn ebgp(ctx: &Ctx) -> Result<()> {
    const OURS: u32 = 64513;
    announced_from_as(ctx, OURS, json!({ "myASN": OURS }))?.no_local_pref()
}

/// `localASN` as FRR's `local-as .. no-prepend replace-as`: the router,
/// expecting the local AS (a 4-byte one, so the OPEN carries AS_TRANS),
/// sees it as the speakers' AS and as the whole AS path; with the router
/// in `myASN` the session is eBGP, so no LOCAL_PREF crosses.
pub(super) fn local_asn(ctx: &Ctx) -> Result<()> {
    const LOCAL: u32 = 4_200_000_001;
    let seen = announced_from_as(ctx, LOCAL, json!({ "localASN": LOCAL }))?;
    let neighbors = ctx.cluster().bgp_neighbors()?;
    for hop in &seen.hops {
        let remote = neighbors.get(hop).and_then(|n| n.remote_as);
        ensure!(
            remote == Some(LOCAL),
            "the router sees {hop} in AS {remote:?}, not the localASN {LOCAL}"
        );
    }
    for hop in &seen.hops {
        let opens: Vec<_> = capture::messages(&seen.segments, *hop, seen.router_ip)
            .into_iter()
            .filter_map(|m| match m.msg {
                Message::Open(o) => Some(o),
                _ => None,
            })
            .collect();
        ensure!(
            !opens.is_empty(),
            "no OPEN from {hop} was captured at the router"
        );
        for o in &opens {
            ensure!(
                (o.my_as, o.asn()) == (bgp::AS_TRANS, LOCAL),
                "{hop} sent My AS {} and 4-octet AS {}: want AS_TRANS and {LOCAL}",
                o.my_as,
                o.asn()
            );
        }
    }
    seen.no_local_pref()
}

/// `dynamicASN` in place of `peerASN`: the session comes up whatever AS
/// the router has, as long as it is (`internal`) or is not (`external`)
/// the node's; the AS path shows which. External: the nodes in 64513,
/// the router in its own AS, the path carrying 64513. Internal: the
/// nodes in the router's AS, an empty path (FRR shows it as "Local").
fn dynamic_asn(ctx: &Ctx, mode: &str) -> Result<()> {
    const OURS: u32 = 64513;
    let hops = all_hops(ctx, false);
    let (mine, path) = match mode {
        "external" => (OURS, OURS.to_string()),
        _ => (ASN, "Local".to_owned()),
    };
    let _router = (mine != ASN)
        .then(|| {
            RouterChange::per_neighbor(
                ctx,
                &hops,
                |a| format!("neighbor {a} remote-as {OURS}"),
                |a| format!("neighbor {a} remote-as {ASN}"),
            )
        })
        .transpose()?;
    let _config = bgp_config(
        ctx,
        false,
        json!({ "myASN": mine, "peerASN": null, "dynamicASN": mode }),
        json!({}),
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let paths = wait_route(ctx, host_route(ips[0]), &hops)?;
    for p in &paths {
        ensure!(
            p.as_path == path,
            "dynamicASN {mode}: AS path {:?}, want {path:?}",
            p.as_path
        );
    }
    Ok(())
}

pub(super) fn dynamic_asn_external(ctx: &Ctx) -> Result<()> {
    dynamic_asn(ctx, "external")
}

pub(super) fn dynamic_asn_internal(ctx: &Ctx) -> Result<()> {
    dynamic_asn(ctx, "internal")
}

/// `keepaliveTime` sets how often a node's KEEPALIVEs go out, apart from
/// the hold time (which alone would make them a third of it, 3 s here):
/// with 1 s, every node's KEEPALIVEs on the wire are about a second apart.
/// (Without it the same check sees two in 5 s.)
pub(super) fn keepalive_time(ctx: &Ctx) -> Result<()> {
    let hops = all_hops(ctx, false);
    let router_ip = router(ctx, false)?;
    let capture = capture(ctx)?;
    let _config = bgp_config(ctx, false, json!({ "keepaliveTime": "1s" }), json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    wait_route(ctx, host_route(ips[0]), &hops)?;
    std::thread::sleep(Duration::from_secs(5));
    let segments = capture.finish()?;
    for hop in &hops {
        let at: Vec<Duration> = capture::messages(&segments, *hop, router_ip)
            .into_iter()
            .filter(|seen| matches!(seen.msg, Message::Keepalive))
            .map(|seen| seen.at)
            .collect();
        let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        ensure!(
            gaps.len() >= 3,
            "{hop} sent {} KEEPALIVEs in 5 s, want one a second",
            at.len()
        );
        ensure!(
            gaps.iter()
                .all(|g| (Duration::from_millis(500)..Duration::from_millis(1600)).contains(g)),
            "{hop}'s KEEPALIVEs came {gaps:?} apart, want about 1 s"
        );
    }
    Ok(())
}

pub(super) fn router_restart(ctx: &Ctx) -> Result<()> {
    let (_config, ip, hops) = announced_web(ctx)?;
    ctx.cluster().restart_router()?;
    wait_sessions(ctx, &hops)?;
    wait_route(ctx, host_route(ip), &hops)?;
    Ok(())
}

pub(super) fn speaker_restart(ctx: &Ctx) -> Result<()> {
    use devenv::cluster::StopSignal;
    let (_config, ip, hops) = announced_web(ctx)?;
    let addrs = node_addresses(ctx, false);
    let (node, addr) = addrs.last().context("no node")?.clone();
    let router_ip = router(ctx, false)?;
    let capture = capture(ctx)?;
    let stopped = Instant::now();
    ctx.cluster().stop_speaker(&node, StopSignal::Term)?;
    let result = (|| {
        // The speaker closed its session with a Cease: its path goes at
        // once, well within the hold time the router would otherwise wait.
        let rest: BTreeSet<IpAddr> = hops.iter().copied().filter(|a| *a != addr).collect();
        wait_route(ctx, host_route(ip), &rest)?;
        let took = stopped.elapsed();
        eprintln!(
            "e2e: {node}'s path gone at the router {took:?} after SIGTERM (bound {:?})",
            HOLD_TIME / 3
        );
        ensure!(
            took < HOLD_TIME / 3,
            "{node}'s route was withdrawn {took:?} after its speaker stopped: not at once (hold time {HOLD_TIME:?})"
        );
        // The NOTIFICATION came from the speaker: received by the router,
        // not the router's own (a hold timer expiry is sent by it).
        let segments = capture.finish()?;
        let sent = capture::messages(&segments, addr, router_ip);
        ensure!(
            sent.iter().any(|s| matches!(
                &s.msg,
                Message::Notification(n) if n.code == bgp::code::CEASE
            )),
            "the router received no Cease NOTIFICATION from {addr}; from it: {:?}",
            sent.iter().map(|s| &s.msg).collect::<Vec<_>>()
        );
        Ok(())
    })();
    ctx.cluster().start_speaker(&node)?;
    result?;
    wait_route(ctx, host_route(ip), &hops)?;
    let _ = external::forget_neighbor(ctx, ip);
    Ok(())
}
