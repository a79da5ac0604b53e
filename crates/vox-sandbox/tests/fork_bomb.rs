//! Process-limit tests, in their own test binary so that `cargo test` does not run them
//! alongside the other sandbox tests.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use vox_sandbox::{Limits, SANDBOX_UID_BASE, SANDBOX_UID_COUNT};

const FORKER: &str = "import os, time
n = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    print('forked', n)
except OSError as e:
    print('stopped', n, e.errno)
";

#[test]
fn the_process_limit_stops_forks_even_though_the_caller_is_root() {
    let skill = skill();
    let out = run_ok(
        skill.path(),
        &argv(&["python3", "-c", FORKER]),
        Limits {
            max_processes: 16,
            ..limits()
        },
    );
    // python itself is one process: 15 more fit, the 16th fork fails with EAGAIN (11).
    assert_eq!(out.stdout.trim(), "stopped 15 11", "{out:?}");
    assert!(
        live_pids_of_uid(out.sandbox_uid).is_empty(),
        "the sleepers were killed"
    );
    // Control: with room for them, all 100 forks succeed, so the limit is what stopped them.
    let ctl = run_ok(
        skill.path(),
        &argv(&["python3", "-c", FORKER]),
        Limits {
            max_processes: 200,
            ..limits()
        },
    );
    assert_eq!(ctl.stdout.trim(), "forked 100", "{ctl:?}");
    assert!(live_pids_of_uid(ctl.sandbox_uid).is_empty());
    assert!(all_gone_within(ctl.sandbox_uid, Duration::from_secs(10)));
}

#[test]
fn a_fork_bomb_is_contained_and_cleaned_up() {
    let skill = skill();
    let before = processes().len();
    // Watch the peak number of processes of every sandbox uid while the bomb runs.
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let range = SANDBOX_UID_BASE..SANDBOX_UID_BASE + SANDBOX_UID_COUNT;
            let mut peak: HashMap<u32, usize> = HashMap::new();
            while !stop.load(Ordering::Relaxed) {
                let mut now: HashMap<u32, usize> = HashMap::new();
                for p in processes() {
                    if let Some(&u) = p.uids.first().filter(|u| range.contains(u)) {
                        *now.entry(u).or_default() += 1;
                    }
                }
                for (u, n) in now {
                    let e = peak.entry(u).or_default();
                    *e = (*e).max(n);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let limit = 32;
    let l = Limits {
        max_processes: limit,
        wall: Duration::from_secs(3),
        ..Limits::default()
    };
    let started = Instant::now();
    let out = run_ok(
        skill.path(),
        &sh("bomb() { bomb | bomb & }; bomb; sleep 10"),
        l,
    );
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let peak = monitor
        .join()
        .unwrap()
        .get(&out.sandbox_uid)
        .copied()
        .unwrap_or(0);
    eprintln!(
        "fork bomb: peak {peak} processes, returned after {took:?}, reaped after {} ms, limit {:?}",
        out.duration_ms, out.limit
    );

    assert!(
        took < Duration::from_secs(6),
        "returns at the wall limit plus cleanup: {took:?} {out:?}"
    );
    assert!(
        peak as u64 <= limit,
        "never more than {limit} processes, saw {peak}"
    );
    assert!(peak >= 8, "the bomb really ran (peak {peak})");
    assert!(out.stderr.contains("fork"), "forks were refused: {out:?}");
    assert!(
        live_pids_of_uid(out.sandbox_uid).is_empty(),
        "nothing of the bomb is alive"
    );
    // Orphaned zombies are init's to reap; they must go too.
    assert!(
        all_gone_within(out.sandbox_uid, Duration::from_secs(10)),
        "zombies reaped"
    );
    let after = processes().len();
    assert!(
        // Loose: other test processes may come and go meanwhile; the bomb's own are checked
        // exactly above.
        after <= before + 200,
        "machine back to normal: {before} processes before, {after} after"
    );
    // And the machine can still fork.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
}
