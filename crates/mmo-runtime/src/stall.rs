//! Stall warnings: a running run silent (no trace item, no state change) for its role's
//! `stall_warning_seconds` gets a `stallWarning` event, repeated every such interval while the
//! silence lasts. It is only a warning for the operator (inspect, attach, `codex-mmo
//! sessions`): nothing is interrupted, and slowness never costs evidence.

use crate::result::JobState;
use crate::store::{STALL_WARNING, now_ms};
use crate::team::Team;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Milliseconds one "second" of a role's lifecycle seconds (`stall_warning_seconds`,
/// `finalization_grace_seconds`) lasts: 1,000, or `CODEX_MMO_SECOND_MS` (tests shorten the
/// spec's minimums of 60 and 30 seconds with it).
pub fn second_ms() -> i64 {
    std::env::var("CODEX_MMO_SECOND_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(1000)
}

/// Watches the session's running runs until the session ends.
pub async fn watch(team: Arc<Team>) {
    let unit = second_ms();
    // Checked a few times per shortest interval (60 "seconds"), at most once a second.
    let tick = Duration::from_millis((unit * 60 / 4).clamp(10, 1000) as u64);
    let mut done = team.done.subscribe();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = done.wait_for(|d| *d) => return,
        }
        check(&team, unit);
    }
}

fn check(team: &Team, unit: i64) {
    let Ok(runs) = team.store.runs(&team.session) else {
        return;
    };
    let now = now_ms();
    // An operator-driven root has no host and no trace of its own: the operator is its voice.
    for run in runs
        .iter()
        .filter(|r| r.state == JobState::Running && !(r.parent.is_none() && r.host_pid.is_none()))
    {
        let Some(role) = team.profile.agents.get(&run.role) else {
            continue;
        };
        let limit = i64::from(role.stall_warning_seconds) * unit;
        let last_warning = team
            .store
            .last_event(&run.run_ref, STALL_WARNING)
            .ok()
            .flatten()
            .map(|e| e.at)
            .unwrap_or(0);
        let since = run.updated_at.max(last_warning);
        if now - since < limit {
            continue;
        }
        let silent_ms = now - run.updated_at;
        let body = json!({
            "silent_seconds": silent_ms / unit,
            "stall_warning_seconds": role.stall_warning_seconds,
            "note": "a warning only: the run is not interrupted",
        });
        let _ = team.store.event(
            &team.session,
            &run.run_ref,
            STALL_WARNING,
            &body.to_string(),
        );
        team.notify();
    }
}
