use super::*;
use crate::literal::prepare;
use mmo_profile::model::LiteralTask;
use serde_json::json;
use std::collections::BTreeSet;

const PATCH: &str = include_str!("../../../../profiles/build-squad/contracts/patch.json");
const LOCATE: &str = include_str!("../../../../profiles/build-squad/contracts/locate.json");
const FINDING: &str = include_str!("../../../../profiles/hybrid-audit/contracts/finding.json");

fn contract(text: &str) -> Contract {
    Contract::new(serde_json::from_str(text).unwrap()).unwrap()
}

fn xcode(text: &str) -> &'static str {
    let e = extract_json(text).unwrap_err();
    assert!(e.to_string().starts_with(&format!("[{}] ", e.code)));
    e.code
}

#[test]
fn extraction() {
    assert_eq!(extract_json(" {\"a\": 1}\n").unwrap(), json!({"a": 1}));
    assert_eq!(extract_json("[1, 2]").unwrap(), json!([1, 2]));
    let fenced = "Here is the result.\n\n```json\n{\"summary\": \"done\"}\n```\nThanks.";
    assert_eq!(extract_json(fenced).unwrap(), json!({"summary": "done"}));
    // Other fenced blocks are skipped, even when they hold JSON-looking text.
    let mixed = "```sh\ncargo test\n```\n  ```JSON\n{\"ok\": true}\n  ```\n```\n{\"x\": 1}\n```\n";
    assert_eq!(extract_json(mixed).unwrap(), json!({"ok": true}));
    // A json fence inside another block is that block's content, not a result.
    let nested = "````md\n```json\n{\"no\": 1}\n```\n````\n```json\n{\"yes\": 1}\n```";
    assert_eq!(extract_json(nested).unwrap(), json!({"yes": 1}));
    let mut got = BTreeSet::new();
    for (t, want) in [
        ("   \n", "result_empty"),
        ("I changed the file.", "result_not_json"),
        ("{\"a\": 1,}", "result_not_json"),
        (
            "```json\n{\"a\": 1}\n```\n```json\n{\"b\": 2}\n```",
            "result_json_block_count",
        ),
        ("```json\n{\"a\": }\n```", "result_json_block_invalid"),
        ("text\n```json\n{\"a\": 1}\n", "result_fence_unclosed"),
    ] {
        assert_eq!(xcode(t), want, "{t:?}");
        got.insert(want);
    }
    let big = format!("\"{}\"", "a".repeat(MAX_RESULT_BYTES));
    got.insert(xcode(&big));
    assert!(
        extract_json("```json\n{\"a\": 1}\n```\n```json\n{\"b\": 2}\n```")
            .unwrap_err()
            .message
            .contains("lines 1, 4")
    );
    assert_eq!(got, EXTRACT_CODES.iter().copied().collect());
}

#[test]
fn check_validates_and_correlates_commands() {
    let c = contract(PATCH);
    let d = tempfile::tempdir().unwrap();
    let cmds = [CommandEvent {
        command: "cargo test".into(),
        exit_code: 0,
    }];
    let ev = ResultEvidence {
        commands: &cmds,
        tree: d.path(),
        literal: None,
        finality: Finality::Final,
    };
    let ok = json!({"summary": "Added --version.", "tests": [{"command": "cargo test", "exit_code": 0}]});
    let problems = check(&c, &ok, &ev);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(satisfies_strict(Finality::Final, &problems));
    // Claimed exit code 0 for a command that failed, and a missing required property.
    let lie = json!({"tests": [{"command": "cargo test", "exit_code": 1}]});
    let p = check(&c, &lie, &ev);
    let got: Vec<(&str, &str)> = p.iter().map(|p| (p.code, p.pointer.as_str())).collect();
    assert!(got.contains(&("contract_instance_required", "")), "{got:?}");
    assert!(
        got.contains(&("evidence_command_uncorrelated", "/tests/0")),
        "{got:?}"
    );
    assert!(p.iter().any(|p| p.schema_pointer.is_some()));
    // The same valid value as partial evidence never satisfies the contract.
    let partial = ResultEvidence {
        finality: Finality::Partial,
        ..ev
    };
    let p = check(&c, &ok, &partial);
    assert_eq!(p.iter().map(|p| p.code).collect::<Vec<_>>(), [PARTIAL_CODE]);
    assert!(!satisfies_strict(Finality::Partial, &[]));
    // Problems serialize with code and pointer.
    let j = serde_json::to_value(&p[0]).unwrap();
    assert_eq!(j["code"], PARTIAL_CODE);
    assert_eq!(j["pointer"], "");
}

#[test]
fn check_correlates_files_and_literal_evidence() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("src")).unwrap();
    std::fs::write(d.path().join("src/lib.rs"), "fn a() {}\nfn main() {}\n").unwrap();
    let lt = LiteralTask {
        operation: "locate".into(),
        path: "src/lib.rs".into(),
        start_line: None,
        end_line: None,
        query: Some("fn main".into()),
    };
    let op = prepare(d.path(), &lt, 2500).unwrap().operation;
    let ev = ResultEvidence {
        commands: &[],
        tree: d.path(),
        literal: Some(&op),
        finality: Finality::Final,
    };
    let c = contract(LOCATE);
    let m = |s: u32| json!({"relative_path": "src/lib.rs", "sha256": op.input_sha256, "start_line": s, "end_line": s});
    assert!(check(&c, &json!({"matches": [m(2)]}), &ev).is_empty());
    let p = check(&c, &json!({"matches": [m(1)]}), &ev);
    let codes: BTreeSet<&str> = p.iter().map(|p| p.code).collect();
    assert_eq!(
        codes,
        BTreeSet::from(["literal_query_absent", "literal_match_missed"])
    );
    // A hash the file does not have fails both the contract crate's and the literal check.
    let mut bad = m(2);
    bad["sha256"] = json!("a".repeat(64));
    let codes: BTreeSet<&str> = check(&c, &json!({"matches": [bad]}), &ev)
        .iter()
        .map(|p| p.code)
        .collect();
    assert!(codes.contains("evidence_file_hash_mismatch"), "{codes:?}");
    assert!(codes.contains("literal_hash_mismatch"), "{codes:?}");
    // finding.json: a confirmed finding needs evidence (if/then), and cited files correlate.
    let f = contract(FINDING);
    let ev = ResultEvidence {
        literal: None,
        ..ev
    };
    let no_ev = json!({"status": "confirmed", "checked_at": "2026-01-02T03:04:05Z"});
    assert!(
        check(&f, &no_ev, &ev)
            .iter()
            .any(|p| p.code == "contract_instance_required")
    );
    let cited = json!({"status": "confirmed", "checked_at": "2026-01-02T03:04:05Z",
        "evidence": [{"relative_path": "src/lib.rs", "sha256": op.input_sha256}]});
    assert!(check(&f, &cited, &ev).is_empty());
}

#[test]
fn repair_prompt_is_shape_only_and_forbids_new_evidence() {
    let c = contract(PATCH);
    let problems: Vec<Problem> = (0..REPAIR_MAX_PROBLEMS + 3)
        .map(|i| {
            Problem::new(
                "contract_instance_type",
                format!("/tests/{i}"),
                "x".repeat(400),
            )
        })
        .collect();
    let p = repair_prompt(&c, &problems);
    assert!(p.contains("only repair turn"));
    assert!(p.contains("Do not call tools"));
    assert!(p.contains("may not manufacture missing evidence"));
    assert!(p.contains("- /tests/0: [contract_instance_type] "));
    assert!(p.contains("… and 3 more"));
    assert!(!p.contains(&"x".repeat(301)));
    assert!(p.contains("\"required\":[\"summary\",\"tests\"]"));
    let root = repair_prompt(&c, &[Problem::new("result_not_json", "", "no JSON")]);
    assert!(root.contains("- (root): [result_not_json] no JSON"));
}

fn follow(text: &str, strict: bool, max: u32) -> (String, usize) {
    let mut out = String::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let p = page(text, strict, cursor.as_deref(), Some(max), 12000, 30000).unwrap();
        assert_eq!(p.total_chars, text.chars().count() as u64);
        assert!(p.value.is_none());
        let t = p.text.unwrap();
        assert!(t.chars().count() <= max as usize);
        out.push_str(&t);
        pages += 1;
        match p.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    (out, pages)
}

#[test]
fn paging_whole_values_and_text() {
    let v = json!({"summary": "ünïcødé ✓", "tests": [{"command": "cargo test", "exit_code": 0}]});
    let text = v.to_string();
    let p = page(&text, true, None, None, 12000, 30000).unwrap();
    assert_eq!(p.value.as_ref(), Some(&v));
    assert_eq!(p.text, None);
    assert_eq!(p.next_cursor, None);
    let j = serde_json::to_value(&p).unwrap();
    assert!(j["next_cursor"].is_null() && j.get("text").is_none());
    // Not strict JSON: always text.
    let p = page(&text, false, None, None, 12000, 30000).unwrap();
    assert_eq!(p.text.as_deref(), Some(text.as_str()));
    // Too large for the page: contiguous text pages, never splitting a character.
    for max in [1, 2, 3, 7, 50] {
        let (joined, pages) = follow(&text, true, max);
        assert_eq!(joined, text);
        assert_eq!(pages, text.chars().count().div_ceil(max as usize));
    }
    // max_chars is clamped to the hard maximum, defaults to the default.
    let long = "é".repeat(100);
    let p = page(&long, false, None, Some(1000), 10, 40).unwrap();
    assert_eq!(p.text.unwrap().chars().count(), 40);
    let p = page(&long, false, None, None, 10, 40).unwrap();
    assert_eq!(p.text.unwrap().chars().count(), 10);
    // An empty result has one empty page.
    let p = page("", false, None, None, 10, 40).unwrap();
    assert_eq!(
        (p.text.as_deref(), p.total_chars, p.next_cursor),
        (Some(""), 0, None)
    );
    let again = page("", false, Some(&p.cursor), None, 10, 40).unwrap();
    assert_eq!(again.text.as_deref(), Some(""));
}

#[test]
fn bad_cursors_are_refused() {
    let text = "abcdefghij";
    let p = page(text, false, None, Some(4), 10, 40).unwrap();
    let next = p.next_cursor.unwrap();
    assert_eq!(
        page(text, false, Some(&next), Some(4), 10, 40)
            .unwrap()
            .text
            .as_deref(),
        Some("efgh")
    );
    let tag = next.rsplit('.').next().unwrap().to_string();
    let mut got = BTreeSet::new();
    for (c, want) in [
        ("", "page_cursor_malformed"),
        ("garbage", "page_cursor_malformed"),
        ("r1.4", "page_cursor_malformed"),
        (&format!("r1.-4.{tag}"), "page_cursor_malformed"),
        (&format!("r1.04.{tag}"), "page_cursor_malformed"),
        (&format!("r1.4.{tag}.x"), "page_cursor_malformed"),
        ("r1.4.zzzzzzzzzzzzzzzz", "page_cursor_malformed"),
        (&format!("r1.10.{tag}"), "page_cursor_out_of_range"),
        (
            &format!("r1.99999999999999999999.{tag}"),
            "page_cursor_malformed",
        ),
        (&format!("r1.4000.{tag}"), "page_cursor_out_of_range"),
    ] {
        let e = page(text, false, Some(c), Some(4), 10, 40).unwrap_err();
        assert_eq!(e.code, want, "{c:?}");
        got.insert(e.code);
    }
    // A cursor issued for another result.
    let e = page("another text", false, Some(&next), Some(4), 10, 40).unwrap_err();
    got.insert(e.code);
    assert_eq!(e.code, "page_cursor_foreign");
    let e = page(text, false, None, Some(0), 10, 40).unwrap_err();
    got.insert(e.code);
    assert_eq!(got, PAGE_CODES.iter().copied().collect());
}

#[test]
fn job_lifecycle() {
    use JobState::*;
    // Terminal states never move.
    for &from in JobState::ALL {
        for &to in JobState::ALL {
            if from.is_terminal() || from == to {
                assert!(!can_transition(from, to), "{from} -> {to}");
            }
        }
    }
    assert!(can_transition(Queued, Running));
    assert!(can_transition(Running, Suspended));
    assert!(can_transition(Suspended, Running));
    assert!(can_transition(Paused, Running));
    assert!(can_transition(Running, Completed));
    assert!(!can_transition(Queued, Completed));
    assert!(!can_transition(Suspended, Completed));
    assert!(job_transition(Running, Stopped).is_ok());
    assert_eq!(
        job_transition(Stopped, Running).unwrap_err().code,
        "lifecycle_job_transition"
    );
    assert!(Running.holds_admission() && Queued.holds_admission());
    assert!(
        !Suspended.holds_admission() && !Paused.holds_admission() && !Completed.holds_admission()
    );
    assert_eq!(Completed.result_finality(), Some(Finality::Final));
    for s in [Suspended, Paused, Stopped, Failed, Cancelled] {
        assert_eq!(s.result_finality(), Some(Finality::Partial));
    }
    assert_eq!(Running.result_finality(), None);
}

#[test]
fn disposition_lifecycle() {
    use Disposition::*;
    assert!(can_transition(Unread, Read));
    assert!(can_transition(Read, Accepted));
    assert!(can_transition(Read, Rejected));
    assert!(can_transition(Unread, Rejected));
    assert!(!can_transition(Unread, Accepted));
    for to in [Unread, Read, Accepted, Rejected] {
        assert!(!can_transition(Accepted, to));
        assert!(!can_transition(Rejected, to));
    }
    assert!(!can_transition(Read, Unread));
    let mut got = BTreeSet::new();
    let ok = disposition_transition(JobState::Completed, Finality::Final, Read, Accepted);
    assert!(ok.is_ok());
    for (job, fin, from, to, want) in [
        (
            JobState::Completed,
            Finality::Final,
            Rejected,
            Accepted,
            "lifecycle_disposition_transition",
        ),
        (
            JobState::Completed,
            Finality::Final,
            Unread,
            Accepted,
            "lifecycle_disposition_transition",
        ),
        (
            JobState::Stopped,
            Finality::Partial,
            Read,
            Accepted,
            "lifecycle_accept_not_completed",
        ),
        (
            JobState::Failed,
            Finality::Partial,
            Read,
            Accepted,
            "lifecycle_accept_not_completed",
        ),
        (
            JobState::Cancelled,
            Finality::Partial,
            Read,
            Accepted,
            "lifecycle_accept_not_completed",
        ),
        (
            JobState::Completed,
            Finality::Partial,
            Read,
            Accepted,
            "lifecycle_accept_partial",
        ),
    ] {
        let e = disposition_transition(job, fin, from, to).unwrap_err();
        assert_eq!(e.code, want);
        got.insert(e.code);
    }
    // Rejecting stopped evidence is fine.
    assert!(disposition_transition(JobState::Stopped, Finality::Partial, Read, Rejected).is_ok());
    got.insert("lifecycle_job_transition");
    got.insert("x".parse::<JobState>().unwrap_err().code);
    assert_eq!(got, LIFECYCLE_CODES.iter().copied().collect());
}

#[test]
fn states_persist_as_snake_case_text() {
    for &s in JobState::ALL {
        let j = serde_json::to_value(s).unwrap();
        assert_eq!(j, json!(s.as_str()));
        assert_eq!(s.as_str().parse::<JobState>().unwrap(), s);
        assert_eq!(s.to_string(), s.as_str());
    }
    for &d in Disposition::ALL {
        assert_eq!(serde_json::to_value(d).unwrap(), json!(d.as_str()));
        assert_eq!(d.as_str().parse::<Disposition>().unwrap(), d);
    }
    assert_eq!(JobState::Cancelled.as_str(), "cancelled");
    assert_eq!(
        serde_json::to_value(Finality::Partial).unwrap(),
        json!("partial")
    );
    assert!("Running".parse::<JobState>().is_err());
}
