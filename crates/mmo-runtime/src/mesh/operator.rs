//! The operator's methods on the session socket (`session/inspect`, `session/stop`,
//! `session/events`): `codex-mmo inspect`, `stop` and `attach` reach a live session through them.

use crate::result::JobState;
use crate::session::{inspect_value, stop_session};
use crate::store::is_terminal_session;
use crate::team::Team;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn call(
    team: &Arc<Team>,
    op: &str,
    params: Value,
) -> Result<Value, (i32, String)> {
    let err = |e: crate::store::StoreError| (-32603, e.to_string());
    match op {
        "inspect" => {
            let s = team.store.session(&team.session).map_err(err)?;
            Ok(inspect_value(&team.store, &s, Some(team)))
        }
        "stop" => {
            // `{"cancel": true}`: a harness boundary (smoke's wall timeout) cancels the work.
            let (end, why) = if params.get("cancel").and_then(Value::as_bool) == Some(true) {
                (
                    JobState::Cancelled,
                    "cancelled at the harness's wall timeout",
                )
            } else {
                (JobState::Stopped, "stopped by the operator")
            };
            let team2 = team.clone();
            tokio::spawn(async move { stop_session(&team2, end, why).await });
            Ok(json!({"stopping": true}))
        }
        "events" => {
            let after = params.get("after").and_then(Value::as_i64).unwrap_or(0);
            let wait_ms = params
                .get("wait_ms")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(30_000);
            let mut rx = team.changed.subscribe();
            let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
            loop {
                rx.borrow_and_update();
                let events = team
                    .store
                    .session_events(&team.session, after, 200)
                    .map_err(err)?;
                let s = team.store.session(&team.session).map_err(err)?;
                if !events.is_empty() || wait_ms == 0 || is_terminal_session(&s.state) {
                    let runs = run_views(team).map_err(err)?;
                    return Ok(json!({"events": events, "state": s.state, "runs": runs}));
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    let runs = run_views(team).map_err(err)?;
                    return Ok(json!({"events": [], "state": s.state, "runs": runs}));
                }
            }
        }
        _ => Err((
            -32601,
            format!("the supervisor has no operator method `session/{op}`"),
        )),
    }
}

/// Every run of the session as inspection shows it.
fn run_views(team: &Team) -> Result<Vec<Value>, crate::store::StoreError> {
    Ok(team
        .store
        .runs(&team.session)?
        .iter()
        .map(|r| team.view(r))
        .collect())
}
