//! Steady-state API traffic of the speakers, read from the lab API
//! server's `/metrics` (requests and watch events by user, verb and
//! resource): how long their writes take to settle after convergence,
//! then their rates over [`STEADY_WINDOW`].

use super::super::metric_sum;
use anyhow::Result;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The speakers' user at the lab API server.
const SPEAKER_USER: &str = "user=\"system:serviceaccount:metallb-system:speaker\"";

/// How long steady state is observed: three slow renewal periods, so a
/// speaker's renewals are counted whole.
pub(super) const STEADY_WINDOW: Duration =
    Duration::from_secs(3 * metallb_rs::speaker::presence::SLOW_RENEW.as_secs());

/// Steady state starts once the speakers write less than this per second
/// each (a speaker still draining its queued events writes tens).
pub(super) const SETTLED_WRITES: f64 = 1.0;
/// Over windows of this length.
const SETTLE_STEP: Duration = Duration::from_secs(5);
/// At most this long.
const SETTLE_MAX: Duration = Duration::from_secs(300);

/// The verbs that write.
const WRITE_VERBS: [&str; 4] = [
    "verb=\"create\"",
    "verb=\"update\"",
    "verb=\"patch\"",
    "verb=\"delete\"",
];

/// The speakers' traffic in steady state, per speaker.
pub(super) struct Steady {
    /// API requests per second.
    pub requests_per_speaker: f64,
    /// Of which writes.
    pub writes_per_speaker: f64,
    /// Writes per second by resource, where not negligible.
    pub writes_by_resource: Vec<(String, f64)>,
    /// Watch events per second received.
    pub watch_events_per_speaker: f64,
    /// How long after convergence the writes took to settle.
    pub settled: Duration,
}

/// Requests and watch events per speaker over [`STEADY_WINDOW`], once the
/// convergence's tail (status writes, the events queued for every
/// service announced) has drained.
pub(super) async fn steady_state(client: &kube::Client, speakers: usize) -> Result<Steady> {
    let settled = writes_settle(client, speakers).await?;
    let (traffic0, t0) = (api_metrics(client).await?, Instant::now());
    tokio::time::sleep(STEADY_WINDOW).await;
    let traffic1 = api_metrics(client).await?;
    let secs = t0.elapsed().as_secs_f64();
    let per_speaker = |metric: &str| {
        (metric_sum(&traffic1, metric, &[SPEAKER_USER])
            - metric_sum(&traffic0, metric, &[SPEAKER_USER]))
            / secs
            / speakers.max(1) as f64
    };
    Ok(Steady {
        requests_per_speaker: per_speaker("apiserver_request_total"),
        writes_per_speaker: (speaker_writes(&traffic1, None) - speaker_writes(&traffic0, None))
            / secs
            / speakers.max(1) as f64,
        watch_events_per_speaker: per_speaker("apiserver_watch_events_total"),
        writes_by_resource: writes_by_resource(&traffic0, &traffic1, secs * speakers.max(1) as f64),
        settled,
    })
}

/// The lab API server's request and watch counters.
async fn api_metrics(client: &kube::Client) -> Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// Waits until the speakers write less than [`SETTLED_WRITES`] per second
/// each over [`SETTLE_STEP`], at most [`SETTLE_MAX`]; how long it took.
async fn writes_settle(client: &kube::Client, speakers: usize) -> Result<Duration> {
    let start = Instant::now();
    let writes = |text: &str| speaker_writes(text, None);
    let mut before = writes(&api_metrics(client).await?);
    while start.elapsed() < SETTLE_MAX {
        tokio::time::sleep(SETTLE_STEP).await;
        let now = writes(&api_metrics(client).await?);
        let rate = (now - before) / SETTLE_STEP.as_secs_f64() / speakers.max(1) as f64;
        before = now;
        if rate < SETTLED_WRITES {
            break;
        }
    }
    Ok(start.elapsed())
}

/// The speakers' writes per second (over `speaker_secs`, the window times
/// the speakers) by resource, between two `/metrics` texts; those over
/// 0.001/s.
fn writes_by_resource(before: &str, after: &str, speaker_secs: f64) -> Vec<(String, f64)> {
    let resources: BTreeSet<String> = after
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains(SPEAKER_USER))
        .filter_map(|l| {
            let rest = l.split("resource=\"").nth(1)?;
            Some(rest.split('"').next()?.to_owned())
        })
        .collect();
    resources
        .into_iter()
        .filter_map(|resource| {
            let rate = (speaker_writes(after, Some(&resource))
                - speaker_writes(before, Some(&resource)))
                / speaker_secs.max(f64::MIN_POSITIVE);
            (rate > 0.001).then_some((resource, rate))
        })
        .collect()
}

/// The speakers' writes counted in `/metrics` text `text`, of one
/// resource or of all.
fn speaker_writes(text: &str, resource: Option<&str>) -> f64 {
    let resource = resource.map(|r| format!("resource=\"{r}\""));
    WRITE_VERBS
        .iter()
        .map(|v| {
            let labels: Vec<&str> = [SPEAKER_USER, v]
                .into_iter()
                .chain(resource.as_deref())
                .collect();
            metric_sum(text, "apiserver_request_total", &labels)
        })
        .sum()
}
