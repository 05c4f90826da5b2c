//! `L2` gossip replay spec: what a speaker sent while it was alive,
//! recorded on its node and sent again from there after the speaker was
//! killed, neither keeps it alive nor delays its failover. The speakers
//! refuse the recorded datagrams by their sealed sequence numbers (docs/src/differences-full.md,
//! Gossip that cannot be replayed), which their dropped-datagram
//! metric shows.

use super::failover::{expect_taken_over, failover_service};
use super::watch::Watch;
use crate::external::{sample, speaker_metrics};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::cluster::StopSignal;
use metallb_rs::speaker::membership::DEFAULT_PORT;
use std::time::Duration;

/// How long the speaker's own datagrams are recorded.
const RECORD: Duration = Duration::from_secs(6);
/// At most this many datagrams are kept (the replay passes them as
/// arguments, so this also bounds its command line).
const MAX_DATAGRAMS: usize = 400;
/// How long the recording is sent again after the kill, in a loop; the
/// window watched over the failover is as long.
const REPLAY: Duration = Duration::from_secs(12);

const DROPPED: &str = "metallb_rs_gossip_dropped_datagrams_total";

/// The suite's replay spec.
pub(super) fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "L2",
        "should fail over on time while a killed speaker's recorded gossip is replayed from its node",
        &["IPV4"],
        replay_after_kill,
    )]
}

/// Records the UDP datagrams the node's speaker sends from gossip port
/// `argv[2]` for `argv[1]` seconds (an AF_PACKET socket on the node's
/// interfaces, outgoing packets only), at most `argv[3]`; prints one line
/// per datagram: destination address, port and payload in hex.
const RECORDER: &str = r#"
import socket, struct, sys, time
seconds, port, limit = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.settimeout(0.2)
end, kept = time.time() + seconds, 0
while time.time() < end and kept < limit:
    try:
        frame, addr = s.recvfrom(65535)
    except socket.timeout:
        continue
    if addr[2] != socket.PACKET_OUTGOING:
        continue
    ethertype = struct.unpack('!H', frame[12:14])[0]
    if ethertype == 0x0800 and frame[23] == 17:
        dst, udp = socket.inet_ntop(socket.AF_INET, frame[30:34]), 14 + (frame[14] & 15) * 4
    elif ethertype == 0x86dd and frame[20] == 17:
        dst, udp = socket.inet_ntop(socket.AF_INET6, frame[38:54]), 54
    else:
        continue
    sport, dport, length = struct.unpack('!HHH', frame[udp:udp + 6])
    if sport != port:
        continue
    print(dst, dport, frame[udp + 8:udp + length].hex(), flush=True)
    kept += 1
"#;

/// Sends the recorded datagrams (`argv[3..]`, lines of [`RECORDER`]) again
/// and again for `argv[1]` seconds from gossip port `argv[2]` (waiting for
/// the killed speaker's socket to be gone); prints how many it sent.
const REPLAYER: &str = r#"
import socket, sys, time
seconds, port = float(sys.argv[1]), int(sys.argv[2])
datagrams = [(d, int(p), bytes.fromhex(h)) for d, p, h in (a.split() for a in sys.argv[3:])]
end, sockets, sent = time.time() + seconds, {}, 0
def bound(family):
    if family not in sockets:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', port))
        sockets[family] = s
    return sockets[family]
while time.time() < end:
    for dst, dport, payload in datagrams:
        family = socket.AF_INET6 if ':' in dst else socket.AF_INET
        try:
            bound(family).sendto(payload, (dst, dport))
            sent += 1
        except OSError:
            time.sleep(0.01)
    time.sleep(0.1)
print(sent)
"#;

/// The sum over `nodes` of the datagrams their speakers dropped as
/// replayed.
fn replayed_drops(ctx: &Ctx, nodes: &[String]) -> Result<f64> {
    let mut total = 0.0;
    for node in nodes {
        let text = speaker_metrics(ctx, node)?;
        total += sample(&text, DROPPED, &["reason=\"replayed\""]).with_context(|| {
            format!("{node}'s speaker exports no {DROPPED}{{reason=\"replayed\"}}")
        })?;
    }
    Ok(total)
}

fn secs(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

fn replay_after_kill(ctx: &Ctx) -> Result<()> {
    let (_config, ips) = failover_service(ctx)?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let leader = watch.settled()?;
    let others: Vec<String> = ctx
        .cluster()
        .nodes()
        .into_iter()
        .map(|n| n.name)
        .filter(|n| *n != leader)
        .collect();
    let port = DEFAULT_PORT.to_string();
    let out = ctx.cluster().exec_on_node(
        &leader,
        &[
            "python3",
            "-c",
            RECORDER,
            &secs(RECORD),
            &port,
            &MAX_DATAGRAMS.to_string(),
        ],
    )?;
    ensure!(
        out.status.success(),
        "recording gossip on {leader}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let recorded: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    // Positive control: the recording holds gossip to the other speakers.
    ensure!(
        recorded.len() >= 10,
        "{leader}'s speaker sent only {} gossip datagrams in {RECORD:?}: nothing to replay",
        recorded.len()
    );
    eprintln!(
        "e2e: recorded {} gossip datagrams from {leader}",
        recorded.len()
    );
    let dropped_before = replayed_drops(ctx, &others)?;

    ctx.cluster().stop_speaker(&leader, StopSignal::Kill)?;
    let result = std::thread::scope(|s| -> Result<()> {
        let replaying = s.spawn(|| {
            let mut argv = vec!["python3", "-c", REPLAYER];
            let (seconds, port) = (secs(REPLAY), port.clone());
            argv.push(&seconds);
            argv.push(&port);
            argv.extend(recorded.iter().map(String::as_str));
            ctx.cluster().exec_on_node(&leader, &argv)
        });
        let windows = watch.windows(REPLAY);
        let out = replaying
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        ensure!(
            out.status.success(),
            "replaying on {leader}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let sent = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        eprintln!("e2e: replayed {sent} datagrams from {leader}");
        for w in windows? {
            eprintln!(
                "e2e: {} while {leader}'s gossip is replayed: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            // Another node answers alone from within the bound to the end.
            expect_taken_over(&watch, &w, &leader).context("after the kill")?;
        }
        // Positive control: the replay reached the other speakers and they
        // refused it as replayed (not as undecryptable or from a stranger).
        let dropped = replayed_drops(ctx, &others)? - dropped_before;
        ensure!(
            dropped >= recorded.len() as f64 / 2.0,
            "the other speakers dropped only {dropped} datagrams as replayed while {sent} recorded ones were sent: the replay did not reach them, or they accepted it"
        );
        eprintln!("e2e: the other speakers dropped {dropped} replayed datagrams");
        Ok(())
    });
    ctx.cluster().start_speaker(&leader)?;
    result?;
    watch
        .wait_only(&leader)
        .context("after the speaker restarted")
}
