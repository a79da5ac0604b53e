//! The review team most end-to-end tests run: a root `lead` and a strict `reviewer` on the
//! scripted model, its contract, and small helpers over inspection.

use super::{World, sha256_file};
use serde_json::{Value, json};
use std::time::Duration;

pub const REVIEWER_MARK: &str = "REVIEWER-ROLE-7f3a";
pub const LEAD_MARK: &str = "LEAD-ROLE-91c2";

pub fn review_profile(extra: &str) -> String {
    format!(
        r#"schema_version = 8
id = "review-team"
version = "8.0.0"
display_name = "Review team"
description = "A root and a strict reviewer on a scripted model."
maturity = "lab"
root = "lead"

[agents.lead]
kind = "root"
description = "Root"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "workspace-write"
can_spawn = ["reviewer"]
max_active = 1
trust = "high"
instructions = "agents/lead.md"

[agents.lead.controls.reviewer]
actions = ["inspect", "stop"]

[agents.reviewer]
description = "Strict reviewer"
model = "scripted_responses__scripted_large"
reasoning = "none"
permissions = "read-only"
backends = ["mcp"]
max_active = 1
allowed_task_kinds = ["review"]
trust = "adversarial_reviewer"
verification = "root_adjudication"
contract_enforcement = "strict"
output_contract = "contracts/review.json"
instructions = "agents/reviewer.md"

[coordination]
max_active_agents = 2
max_active_writers = 0
{extra}
"#
    )
}

pub const REVIEW_CONTRACT: &str = r#"{
  "type": "object",
  "additionalProperties": false,
  "required": ["verdict", "findings"],
  "properties": {
    "verdict": { "enum": ["approve", "request_changes"] },
    "findings": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["relative_path", "sha256", "claim"],
        "properties": {
          "relative_path": { "type": "string" },
          "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
          "claim": { "type": "string" }
        }
      }
    }
  }
}"#;

pub fn review_pack(w: &World) -> std::path::PathBuf {
    w.pack(
        "review-team",
        &review_profile(""),
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            (
                "agents/reviewer.md",
                &format!("{REVIEWER_MARK} You review code and answer with JSON only."),
            ),
            ("contracts/review.json", REVIEW_CONTRACT),
        ],
    )
}

pub fn verdict(w: &World) -> String {
    let sha = sha256_file(&w.ws().join("src/lib.rs"));
    json!({"verdict": "approve", "findings": [{"relative_path": "src/lib.rs", "sha256": sha, "claim": "adds two numbers"}]}).to_string()
}

pub fn runs_of(v: &Value, role: &str) -> Vec<Value> {
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["role"] == role)
        .cloned()
        .collect()
}

pub fn is_zombie(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

pub fn wait_for_actor(w: &World, actor: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !w.model_requests().iter().any(|r| r["actor"] == actor) {
        assert!(
            std::time::Instant::now() < deadline,
            "`{actor}` never reached the model"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A detached session of the review pack with this profile text, its supervisor given `env`.
pub fn review_session_with(w: &World, profile: &str, env: &[(&str, &str)]) -> String {
    let pack = w.pack(
        "review-team",
        profile,
        &[
            ("agents/lead.md", &format!("{LEAD_MARK} You lead.")),
            (
                "agents/reviewer.md",
                &format!("{REVIEWER_MARK} You review."),
            ),
            ("contracts/review.json", REVIEW_CONTRACT),
        ],
    );
    let mut cmd = w.cmd();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd
        .args(["run", "--profile", pack.to_str().unwrap(), "--detach"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}
