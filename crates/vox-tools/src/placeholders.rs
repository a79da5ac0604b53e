//! Boot steps of subsystems whose tool families have not landed: each is reported as a
//! `placeholder` (nothing started) rather than "ready". A family that lands takes its steps
//! from here.

use vox_core::family::placeholder;
use vox_core::{Ctx, Family, StepDone};
use vox_mcp_registry::BootStep;

/// `VOX_MCP_AGENT_FLEET=0` turns the (future) agent fleet off, which shows as a failure.
fn agent_fleet(_ctx: &mut Ctx) -> Result<StepDone, String> {
    match std::env::var("VOX_MCP_AGENT_FLEET").as_deref() {
        Ok("0") | Ok("false") | Ok("off") => Err("disabled by VOX_MCP_AGENT_FLEET".into()),
        _ => Ok(StepDone::Placeholder("no tools in this build")),
    }
}

pub fn family() -> Family {
    use BootStep::*;
    let mut steps: Vec<_> = [
        ModelRegistry,
        RoutingPreferences,
        LlmFacade,
        Browser,
        Speech,
        PopuliFederationPoller,
        A2aRemoteResultPoller,
        A2aRemoteWorkerPoller,
        ClarificationInbox,
        SocratesResearchPoller,
        Flywheel,
    ]
    .into_iter()
    .map(|s| (s, placeholder as vox_core::StepFn))
    .collect();
    steps.push((AgentFleet, agent_fleet));
    Family {
        name: "placeholders",
        steps,
        ..Family::default()
    }
}
