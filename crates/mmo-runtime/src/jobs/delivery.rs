//! How a mutating control reaches its target: serialized per target, decided on a
//! compare-and-swapped `control_revision`, handed to the target's live host, and its end
//! recorded durably in `controls` (`delivered`, `failed`, `delivery_unknown`).

use crate::store::Run;
use crate::team::{Control, MeshError, MeshResult, Team};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How a mutating control's delivery ended.
pub(super) enum Delivery {
    Delivered(Value),
    /// It was not delivered, and why (nothing changed in the target).
    Failed(String),
    /// Delivery began and no answer came: the target may or may not have it.
    Unknown(String),
}

/// How long a control waits for its host's answer (`CODEX_MMO_CONTROL_TIMEOUT_MS`, default
/// 30 s) before its delivery is `delivery_unknown`.
pub(super) fn control_timeout() -> Duration {
    std::env::var("CODEX_MMO_CONTROL_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(30))
}

/// Hands a control to the target's live host and waits (bounded) for its answer: no live host
/// or a refused control is `Failed`; a host that took it and never answered is `Unknown`.
pub(super) async fn ask_host(
    team: &Arc<Team>,
    target: &str,
    make: impl FnOnce(tokio::sync::oneshot::Sender<Result<Value, String>>) -> Control,
) -> Delivery {
    let sender = team
        .hosts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(target)
        .map(|h| h.control.clone());
    let Some(sender) = sender else {
        return Delivery::Failed("the run has no live host".into());
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    if sender.send(make(reply)).is_err() {
        return Delivery::Failed("the run's host has ended".into());
    }
    match tokio::time::timeout(control_timeout(), answer).await {
        Ok(Ok(Ok(v))) => Delivery::Delivered(v),
        Ok(Ok(Err(e))) => Delivery::Failed(e),
        Ok(Err(_)) => Delivery::Unknown("the host ended before it answered".into()),
        Err(_) => Delivery::Unknown(format!(
            "the host did not answer within {} ms",
            control_timeout().as_millis()
        )),
    }
}

/// A mutating control of `run` by `caller`, decided on the `control_revision` the caller last
/// saw.
pub(super) struct Change<'a> {
    pub team: &'a Arc<Team>,
    pub caller: &'a Run,
    pub run: &'a Run,
    pub revision: Option<i64>,
}

impl<'a> Change<'a> {
    pub(super) fn new(
        team: &'a Arc<Team>,
        caller: &'a Run,
        run: &'a Run,
        revision: Option<i64>,
    ) -> Self {
        Change {
            team,
            caller,
            run,
            revision,
        }
    }

    /// Serialized per target from the revision check through delivery, the revision
    /// compare-and-swapped before delivery (a stale one fails before anything is sent), and the
    /// delivery's end recorded durably (`delivered`, `failed`, `delivery_unknown`).
    pub(super) async fn deliver<F, Fut>(self, action: &str, deliver: F) -> MeshResult<Value>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Delivery>,
    {
        let Change {
            team,
            caller,
            run,
            revision,
        } = self;
        let lock = team.control_lock(&run.run_ref);
        let _serial = lock.lock().await;
        let seq = begin(team, caller, run, revision, action)?;
        let outcome = deliver().await;
        let (status, detail, answer) = match outcome {
            // A set_effort's detail is the effort itself: the next turn reads it from there.
            Delivery::Delivered(v) if action == "set_effort" => (
                "delivered",
                v.get("effort").and_then(Value::as_str).map(str::to_string),
                Some(v),
            ),
            Delivery::Delivered(v) => ("delivered", None, Some(v)),
            Delivery::Failed(why) => ("failed", Some(why), None),
            Delivery::Unknown(why) => ("delivery_unknown", Some(why), None),
        };
        team.store.control_end(seq, status, detail.as_deref())?;
        team.notify();
        match status {
            "failed" => Err(MeshError::new(
                "control_failed",
                format!("{action} was not delivered: {}", detail.unwrap_or_default()),
            )),
            "delivery_unknown" => Err(MeshError::new(
                "delivery_unknown",
                format!(
                    "{action} began but its delivery is unknown ({}); inspect the run before retrying",
                    detail.unwrap_or_default()
                ),
            )),
            _ => {
                let mut view = team.view(&team.run(&run.run_ref)?);
                view["delivery"] = json!({"status": status, "answer": answer});
                Ok(view)
            }
        }
    }
}

/// The checks and records before a delivery, under the target's control lock: a revision is
/// given, the run is not terminal, the revision is current (and bumped), and the control is
/// begun in `controls` and audited. Returns the control's sequence number.
fn begin(
    team: &Team,
    caller: &Run,
    run: &Run,
    revision: Option<i64>,
    action: &str,
) -> MeshResult<i64> {
    let Some(rev) = revision else {
        return Err(MeshError::new(
            "control_revision_required",
            format!("{action} needs the control_revision from your last inspection"),
        ));
    };
    let now = team.run(&run.run_ref)?;
    if now.state.is_terminal() {
        return Err(MeshError::new(
            "already_terminal",
            format!("agent run `{}` is already `{}`", now.run_ref, now.state),
        ));
    }
    if !team.store.bump_control(&run.run_ref, rev)? {
        let current = team.run(&run.run_ref)?.control_revision;
        return Err(MeshError::new(
            "stale_control_revision",
            format!(
                "control_revision {rev} is stale (current: {current}); inspect again before you {action}"
            ),
        ));
    }
    let seq = team.store.control_begin(
        &team.session,
        &run.run_ref,
        rev + 1,
        action,
        &caller.run_ref,
    )?;
    team.audit(
        caller,
        &format!("agent_control.{action}"),
        &run.run_ref,
        json!({"control_revision": rev}),
    )?;
    Ok(seq)
}
