//! What the lab's Job controller decides, without I/O: Pods of the
//! template (named `<job>-<random>`) until `completions` of them have
//! succeeded, at most `parallelism` at a time; the Job is `Complete`
//! then, or `Failed` once more than `backoffLimit` Pods failed. The lab
//! backend plays a Job's container as completing at once with exit code
//! 0 ([`super::super::backend`]), so a Job completes as soon as its Pods
//! are scheduled. Not honoured: `activeDeadlineSeconds`, indexed
//! completion, pod failure and success policies, `ttlSecondsAfterFinished`
//! and `suspend`.

use super::plan::{Action, name, ns, owned_by};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// At most this many Pods are created for one Job per round.
const MAX_CREATES: usize = 50;

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn has_condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// A Pod of `job` (without its name: `generateName`).
fn job_pod(job: &Job) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("controller-uid", uid.clone()),
        ("batch.kubernetes.io/job-name", name(&job.metadata)),
        ("job-name", name(&job.metadata)),
    ] {
        labels.entry(key.to_owned()).or_insert(value);
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", name(&job.metadata))),
            namespace: Some(ns(&job.metadata)),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".to_owned(),
                kind: "Job".to_owned(),
                name: name(&job.metadata),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// How the Pods a Job owns stand.
struct Counts {
    succeeded: i32,
    failed: i32,
    /// Neither finished nor being deleted.
    active: i32,
    /// Ready and not finished.
    ready: i32,
}

impl Counts {
    /// Counts the Pods among `pods` that `job` owns.
    fn of(job: &Job, pods: &[Pod]) -> Counts {
        let mine: Vec<&Pod> = pods
            .iter()
            .filter(|p| owned_by(&p.metadata, &job.metadata))
            .collect();
        let count = |pred: &dyn Fn(&Pod) -> bool| {
            i32::try_from(mine.iter().filter(|p| pred(p)).count()).unwrap_or(i32::MAX)
        };
        let finished = |p: &Pod| matches!(phase(p), Some("Succeeded" | "Failed"));
        Counts {
            succeeded: count(&|p| phase(p) == Some("Succeeded")),
            failed: count(&|p| phase(p) == Some("Failed")),
            active: count(&|p| p.metadata.deletion_timestamp.is_none() && !finished(p)),
            ready: count(&|p| super::plan::ready(p) && !finished(p)),
        }
    }
}

/// Where a Job stands by its counts: one outcome, as the conditions
/// written for it are exclusive (enough successes win over too many
/// failures).
#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Running,
    Complete,
    Failing,
}

/// Every write `job`'s controller would make at `now`.
pub fn plan(job: &Job, pods: &[Pod], now: Timestamp, out: &mut Vec<Action>) {
    let Some(spec) = job.spec.as_ref() else {
        return;
    };
    let counts = Counts::of(job, pods);
    let completions = spec.completions.unwrap_or(1).max(0);
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let backoff_limit = spec.backoff_limit.unwrap_or(6).max(0);
    let finished = has_condition(job, "Complete") || has_condition(job, "Failed");
    let outcome = if counts.succeeded >= completions {
        Outcome::Complete
    } else if counts.failed > backoff_limit {
        Outcome::Failing
    } else {
        Outcome::Running
    };
    if !finished && outcome == Outcome::Running {
        let want = parallelism.min(completions - counts.succeeded) - counts.active;
        let want = usize::try_from(want).unwrap_or(0).min(MAX_CREATES);
        out.extend((0..want).map(|_| Action::CreatePod(job_pod(job))));
    }
    let status = status(job, &counts, outcome, now);
    if job.status.as_ref() != Some(&status) {
        out.push(Action::JobStatus {
            namespace: ns(&job.metadata),
            name: name(&job.metadata),
            status,
        });
    }
}

/// The status `job` should have at `now`; the start and completion times
/// and the conditions' times that were already written stay.
fn status(job: &Job, counts: &Counts, outcome: Outcome, now: Timestamp) -> JobStatus {
    let previous = job.status.clone().unwrap_or_default();
    let completion_time = if outcome == Outcome::Complete {
        previous.completion_time.clone().or(Some(Time(now)))
    } else {
        None
    };
    JobStatus {
        active: (counts.active > 0).then_some(counts.active),
        succeeded: (counts.succeeded > 0).then_some(counts.succeeded),
        failed: (counts.failed > 0).then_some(counts.failed),
        ready: Some(counts.ready),
        terminating: Some(0),
        start_time: previous.start_time.clone().or(Some(Time(now))),
        completion_time,
        conditions: conditions(&previous, outcome, now),
        ..JobStatus::default()
    }
}

/// The conditions of a Job with `outcome`: the pair kube-controller-manager
/// writes for it, or, still running, those it had.
fn conditions(previous: &JobStatus, outcome: Outcome, now: Timestamp) -> Option<Vec<JobCondition>> {
    let condition = |type_: &str, reason: &str, message: &str| {
        let old = previous
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True");
        JobCondition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_probe_time: old
                .and_then(|c| c.last_probe_time.clone())
                .or(Some(Time(now))),
            last_transition_time: old
                .and_then(|c| c.last_transition_time.clone())
                .or(Some(Time(now))),
        }
    };
    match outcome {
        Outcome::Complete => Some(vec![
            condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ),
            condition(
                "Complete",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ),
        ]),
        Outcome::Failing => Some(vec![
            condition(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
            condition(
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
        ]),
        Outcome::Running => previous.conditions.clone(),
    }
}
