//! Boot steps of subsystems whose tool families have not landed: each is reported as a
//! `placeholder` (nothing started) rather than "ready". A family that lands takes its steps
//! from here.

use vox_core::Family;
use vox_core::family::placeholder;
use vox_mcp_registry::BootStep;

pub fn family() -> Family {
    use BootStep::*;
    let steps: Vec<_> = [Browser, Speech, Flywheel]
        .into_iter()
        .map(|s| (s, placeholder as vox_core::StepFn))
        .collect();
    Family {
        name: "placeholders",
        steps,
        ..Family::default()
    }
}
