//! Boot: run the active profile's closure of subsystems, in the contract's fixed step order,
//! degrading instead of aborting when a step fails.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;
use vox_mcp_registry::{BOOT_STEPS, ProfileSet, SUBSYSTEMS, SubsystemMask};

/// What happened to one boot step.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct StepReport {
    /// The step's contract name, e.g. `socrates_research_poller`.
    pub step: &'static str,
    /// The subsystem the step starts.
    pub subsystem: &'static str,
    /// `ok`, `placeholder` (no tools in this build: nothing started), `failed` or `skipped`.
    pub status: &'static str,
    /// What the step said: its ready message, why it failed, or why it was skipped.
    pub detail: String,
    /// How long the step took, in microseconds.
    pub micros: u64,
}

/// The daemon's boot report (`orch.boot_report`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, Default)]
pub struct BootReport {
    /// The canonical profile the daemon booted.
    pub profile: String,
    /// Subsystems that are up, in contract order.
    pub booted: Vec<&'static str>,
    /// Subsystems that have no tools in this build: counted as up (nothing can fail), but
    /// nothing was started for them.
    pub placeholders: Vec<&'static str>,
    /// Subsystem → why it is down.
    pub failed: BTreeMap<&'static str, String>,
    /// The steps of the profile's closure, run or skipped, in the contract's order.
    pub steps: Vec<StepReport>,
    /// How long the whole boot took, in microseconds.
    pub total_micros: u64,
    /// The booted subsystems (placeholders included) as a bit mask; not serialized.
    #[serde(skip)]
    pub booted_mask: SubsystemMask,
}

impl BootReport {
    /// Whether every subsystem the profile requires failed (the daemon then exits non-zero).
    pub fn all_required_failed(&self, profile: &ProfileSet) -> bool {
        let required = profile.requires_mask();
        required != 0 && required & self.booted_mask == 0
    }
}

/// Runs the boot steps. `run_step(i)` does the work of `BOOT_STEPS[i]`; an `Err` marks its
/// subsystem failed.
pub fn boot(
    profile: &ProfileSet,
    mut run_step: impl FnMut(usize) -> Result<crate::family::StepDone, String>,
) -> BootReport {
    let started = Instant::now();
    let closure = profile.closure_mask();
    let mut report = BootReport {
        profile: profile.canonical().to_owned(),
        ..BootReport::default()
    };
    let mut failed_mask: SubsystemMask = 0;
    let mut started_mask: SubsystemMask = 0;
    let mut placeholder_mask: SubsystemMask = 0;
    for (i, step) in BOOT_STEPS.iter().enumerate() {
        let bit = 1u32 << step.subsystem;
        if closure & bit == 0 {
            continue;
        }
        let sub = &SUBSYSTEMS[step.subsystem];
        let t = Instant::now();
        let mut record = |status, detail: String| {
            report.steps.push(StepReport {
                step: step.name,
                subsystem: sub.id,
                status,
                detail,
                micros: t.elapsed().as_micros() as u64,
            });
        };
        if failed_mask & bit != 0 {
            record("skipped", "subsystem already failed".into());
            continue;
        }
        // Named profiles do not start dependents of a failed subsystem; dev still does (its
        // subsystems have fallbacks, e.g. sessions persist to files without the store).
        let failed_deps = sub.depends_mask & failed_mask;
        if failed_deps != 0 && !profile.is_dev() {
            let dep = vox_mcp_registry::subsystem_names(failed_deps)[0];
            let why = format!("dependency {dep} failed");
            report.failed.insert(sub.id, why.clone());
            failed_mask |= bit;
            record("skipped", why);
            continue;
        }
        match run_step(i) {
            Ok(crate::family::StepDone::Ready(detail)) => {
                started_mask |= bit;
                record("ok", detail);
            }
            Ok(crate::family::StepDone::Placeholder(why)) => {
                started_mask |= bit;
                placeholder_mask |= bit;
                record("placeholder", why.to_owned());
            }
            Err(e) => {
                report.failed.insert(sub.id, e.clone());
                failed_mask |= bit;
                record("failed", e);
            }
        }
    }
    report.booted_mask = started_mask & !failed_mask;
    report.booted = vox_mcp_registry::subsystem_names(report.booted_mask);
    report.placeholders = vox_mcp_registry::subsystem_names(placeholder_mask & report.booted_mask);
    report.total_micros = started.elapsed().as_micros() as u64;
    report
}
