//! Integration tests: each runs real commands in the sandbox and checks that a confinement
//! really holds (the denial happens and its effect is absent), with a control where the same
//! action outside the sandbox would have succeeded.

mod common;

use std::io::Read;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use vox_sandbox::{LimitHit, Limits, RunRequest, SandboxError};

#[test]
fn probe_reports_full_support_here() {
    let s = vox_sandbox::probe().expect("this machine offers Landlock, root and netns");
    assert!(s.landlock_abi >= 3, "{s:?}");
    // The machine offers ABI 7: the TCP layer and scopes must be on.
    assert!(s.landlock_tcp && s.landlock_scopes, "{s:?}");
}

#[test]
fn runs_in_a_scratch_copy_and_may_write_there() {
    let skill = skill();
    let out = run_ok(
        skill.path(),
        &sh(
            "pwd; cat SKILL.md; ./bin/hello.sh; echo inside > made.txt && cat made.txt; \
             echo h > \"$HOME/h\" && echo t > \"$TMPDIR/t\" && cat \"$HOME/h\" \"$TMPDIR/t\"; \
             mkdir -p sub/deeper && rm -r sub && echo removed; id -u",
        ),
        limits(),
    );
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stderr, "", "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let pwd = lines[0];
    assert_ne!(
        Path::new(pwd),
        skill.path(),
        "runs in a copy, not the skill dir"
    );
    assert!(pwd.ends_with("/work"), "{pwd}");
    assert!(
        out.stdout.contains("marker-skill-content"),
        "sees the skill files: {out:?}"
    );
    assert!(
        out.stdout.contains("hello from hello.sh"),
        "executable bits kept: {out:?}"
    );
    assert!(out.stdout.contains("inside\n"), "{out:?}");
    assert!(
        out.stdout.contains("h\nt\n"),
        "HOME and TMPDIR writable: {out:?}"
    );
    assert!(out.stdout.contains("removed\n"), "{out:?}");
    let uid: u32 = lines.last().unwrap().parse().unwrap();
    assert_eq!(uid, out.sandbox_uid);
    assert!(uid >= vox_sandbox::SANDBOX_UID_BASE, "not root: {uid}");
    // The original is untouched and the scratch copy is gone.
    assert!(!skill.path().join("made.txt").exists());
    let scratch = scratch_root_from_pwd(pwd);
    assert!(!scratch.exists(), "scratch {} deleted", scratch.display());
    assert_eq!(out.limit, None);
}

#[test]
fn writes_outside_the_scratch_dir_are_denied() {
    let skill = skill();
    // Make the original skill dir and its file writable by anyone, so only Landlock can stop
    // the write (the sandbox uid is not the owner; /tmp is 1777 anyway).
    std::fs::set_permissions(skill.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let md = skill.path().join("SKILL.md");
    std::fs::set_permissions(&md, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = std::fs::read_to_string(&md).unwrap();
    let outside = std::env::temp_dir().join(format!("vox-sandbox-outside-{}", unique()));
    let into_skill = skill.path().join(format!("planted-{}", unique()));
    let script = format!(
        "echo x > {o}; echo \"rc1=$?\"; echo x > {s}; echo \"rc2=$?\"; echo x >> {m}; echo \"rc3=$?\"; \
         truncate -s 0 {m}; echo \"rc4=$?\"; mkdir {s}.d; echo \"rc5=$?\"; echo ok > inside; cat inside",
        o = outside.display(),
        s = into_skill.display(),
        m = md.display()
    );
    let out = run_ok(skill.path(), &sh(&script), limits());
    for rc in ["rc1=", "rc2=", "rc3=", "rc4=", "rc5="] {
        assert!(
            !out.stdout.contains(&format!("{rc}0")),
            "{rc} should fail: {out:?}"
        );
    }
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    assert!(
        out.stdout.ends_with("ok\n"),
        "writing inside still works: {out:?}"
    );
    assert!(!outside.exists(), "{} must not exist", outside.display());
    assert!(!into_skill.exists());
    assert!(!Path::new(&format!("{}.d", into_skill.display())).exists());
    assert_eq!(
        std::fs::read_to_string(&md).unwrap(),
        before,
        "original SKILL.md unchanged"
    );
    // Control: the same write as an ordinary process succeeds, so the test can fail.
    let ctl = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo x > {}", outside.display()))
        .status()
        .unwrap();
    assert!(ctl.success() && outside.exists());
    std::fs::remove_file(&outside).unwrap();
}

#[test]
fn tcp_connection_to_the_host_fails_and_the_listener_sees_nothing() {
    let skill = skill();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let py = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('CONNECTED')\n\
         except OSError as e:\n    print('errno', e.errno)\n"
    );
    // Control: an unsandboxed python reaches the listener, so the test can fail.
    let ctl = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(&py)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ctl.stdout), "CONNECTED\n");
    let (mut c, _) =
        accept_within(&listener, Duration::from_secs(2)).expect("control connection arrives");
    let _ = c.read(&mut [0u8; 1]);

    let out = run_ok(skill.path(), &argv(&["python3", "-c", &py]), limits());
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    // EACCES (13): Landlock's TCP rule (ABI >= 4) refuses before routing is even tried; without
    // it the empty namespace answers ENETUNREACH (101).
    let expected = if vox_sandbox::probe().unwrap().landlock_tcp {
        "errno 13"
    } else {
        "errno 101"
    };
    assert_eq!(out.stdout.trim(), expected, "{out:?}");
    assert!(
        accept_within(&listener, Duration::from_millis(300)).is_none(),
        "listener saw a connection"
    );
}

#[test]
fn udp_and_interfaces_show_a_fresh_network_namespace() {
    // UDP is not covered by Landlock: only the namespace stops this datagram.
    let skill = skill();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = sock.local_addr().unwrap().port();
    let py = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n    s.sendto(b'leak', ('127.0.0.1', {port}))\n    print('SENT')\n\
         except OSError as e:\n    print('errno', e.errno)\nprint(open('/proc/self/net/dev').read())\n"
    );
    // Control: outside the sandbox the datagram arrives.
    let ctl = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(&py)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&ctl.stdout).starts_with("SENT"));
    let mut buf = [0u8; 16];
    assert_eq!(sock.recv(&mut buf).unwrap(), 4);

    let out = run_ok(skill.path(), &argv(&["python3", "-c", &py]), limits());
    assert!(
        out.stdout.starts_with("errno 101"),
        "ENETUNREACH expected: {out:?}"
    );
    let interfaces: Vec<&str> = out
        .stdout
        .lines()
        .skip(3)
        .filter(|l| l.contains(':'))
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"], "only a loopback: {out:?}");
    assert!(sock.recv(&mut buf).is_err(), "no datagram may arrive");
}

#[test]
fn a_cancelled_run_is_killed_with_its_children_within_a_second() {
    let skill = skill();
    let marker = format!("30.{}", unique());
    let cancel = std::sync::atomic::AtomicBool::new(false);
    // A shell with a child in the background and one in the foreground.
    let argv = sh(&format!("sleep {marker} & sleep {marker}; wait"));
    let (out, cancelled_at) = std::thread::scope(|s| {
        let run = s.spawn(|| {
            vox_sandbox::run(&RunRequest {
                skill_dir: skill.path(),
                argv: &argv,
                stdin: None,
                limits: limits(),
                cancel: Some(&cancel),
            })
        });
        let seen = Instant::now();
        while pids_with_cmdline(&format!("sleep {marker}")).len() < 2 {
            assert!(
                seen.elapsed() < Duration::from_secs(10),
                "the sleeps never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let at = Instant::now();
        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        (run.join().unwrap().unwrap(), at)
    });
    let took = cancelled_at.elapsed();
    assert_eq!(out.limit, Some(LimitHit::Cancelled), "{out:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(pids_with_cmdline(&format!("sleep {marker}")).is_empty());
    assert!(live_pids_of_uid(out.sandbox_uid).is_empty());
}

#[test]
fn sleep_past_the_wall_limit_is_killed_with_no_leftover() {
    let skill = skill();
    let marker = format!("30.{}", unique());
    let l = Limits {
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let started = Instant::now();
    let out = run_ok(skill.path(), &argv(&["sleep", &marker]), l);
    let took = started.elapsed();
    assert_eq!(out.limit, Some(LimitHit::Wall), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGKILL), "{out:?}");
    assert!(out.duration_ms >= 950 && out.duration_ms < 3000, "{out:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        pids_with_cmdline(&format!("sleep {marker}")).is_empty(),
        "sleep still running"
    );
    assert!(live_pids_of_uid(out.sandbox_uid).is_empty());
    assert!(all_gone_within(out.sandbox_uid, Duration::from_secs(10)));
}

#[test]
fn processes_that_leave_the_group_are_killed_too() {
    // `setsid` puts the sleeper in its own session and process group: killing the command's
    // group would miss it; the per-run uid sweep must not.
    let skill = skill();
    let marker = format!("31.{}", unique());
    // The middle process calls setsid before forking the sleeper, so the sleeper is outside the
    // command's process group from birth (no race with the group kill).
    let py = format!(
        "import os, sys\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    if os.fork() == 0:\n        \
         os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('started')\n"
    );
    let out = run_ok(skill.path(), &argv(&["python3", "-c", &py]), limits());
    assert_eq!(out.stdout, "started\n", "{out:?}");
    assert_eq!(out.exit_code, Some(0));
    assert!(
        out.duration_ms < 5000,
        "returns when the command exits: {out:?}"
    );
    assert!(
        pids_with_cmdline(&format!("sleep {marker}")).is_empty(),
        "an escaped sleeper survived"
    );
    assert!(live_pids_of_uid(out.sandbox_uid).is_empty());
    assert!(
        all_gone_within(out.sandbox_uid, Duration::from_secs(10)),
        "zombies are reaped"
    );
}

#[test]
fn a_cpu_spin_hits_the_cpu_limit() {
    let skill = skill();
    let l = Limits {
        cpu_seconds: 1,
        wall: Duration::from_secs(20),
        ..Limits::default()
    };
    let out = run_ok(skill.path(), &sh("while :; do :; done"), l);
    assert_eq!(out.limit, Some(LimitHit::Cpu), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXCPU), "SIGXCPU: {out:?}");
    // rusage and the rlimit's tick sampling differ a little; the point is "about a second".
    assert!(out.cpu_ms >= 500 && out.cpu_ms < 3000, "{out:?}");
    assert!(out.duration_ms < 15_000, "{out:?}");
}

#[test]
fn allocating_beyond_the_memory_limit_fails() {
    let skill = skill();
    let l = || Limits {
        memory_bytes: 256 << 20,
        ..limits()
    };
    let py = |mib: u64| {
        argv(&[
            "python3",
            "-c",
            &format!("b = bytearray({mib} * 1024 * 1024); b[-1] = 1; print('allocated', len(b))"),
        ])
    };
    // Control under the limit: the same program works.
    let ok = run_ok(skill.path(), &py(64), l());
    assert_eq!(ok.exit_code, Some(0), "{ok:?}");
    assert!(ok.stdout.starts_with("allocated"), "{ok:?}");
    let out = run_ok(skill.path(), &py(400), l());
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(!out.stdout.contains("allocated"), "{out:?}");
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
    // And without the limit 400 MiB is fine, so it is the limit that failed it.
    let big = run_ok(
        skill.path(),
        &py(400),
        Limits {
            memory_bytes: 2 << 30,
            ..limits()
        },
    );
    assert_eq!(big.exit_code, Some(0), "{big:?}");
}

#[test]
fn output_beyond_the_cap_is_truncated() {
    let skill = skill();
    let l = Limits {
        max_output_bytes: 1000,
        ..limits()
    };
    let out = run_ok(
        skill.path(),
        &sh("head -c 200000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' e >&2"),
        l,
    );
    assert_eq!(
        out.exit_code,
        Some(0),
        "the command is drained, not blocked: {out:?}"
    );
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout.bytes().all(|b| b == b'a'));
    assert_eq!(out.stderr.len(), 1000);
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.limit, Some(LimitHit::Output));
    // Small output is not marked.
    let small = run_ok(
        skill.path(),
        &argv(&["echo", "hi"]),
        Limits {
            max_output_bytes: 1000,
            ..limits()
        },
    );
    assert_eq!(small.stdout, "hi\n");
    assert!(!small.stdout_truncated && small.limit.is_none());
}

#[test]
fn endless_output_is_capped_and_stopped_at_the_wall() {
    let skill = skill();
    let l = Limits {
        max_output_bytes: 4096,
        wall: Duration::from_secs(1),
        ..Limits::default()
    };
    let out = run_ok(skill.path(), &argv(&["yes"]), l);
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout_truncated);
    assert_eq!(out.limit, Some(LimitHit::Wall));
    assert!(out.duration_ms < 3000, "{out:?}");
}

#[test]
fn writing_a_file_beyond_the_file_size_limit_is_stopped() {
    let skill = skill();
    let l = Limits {
        max_file_bytes: 1 << 20,
        ..limits()
    };
    let out = run_ok(
        skill.path(),
        &argv(&["dd", "if=/dev/zero", "of=big", "bs=1M", "count=4"]),
        l,
    );
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "SIGXFSZ: {out:?}");
    assert_eq!(out.limit, Some(LimitHit::FileSize));
}

#[test]
fn the_environment_is_scrubbed() {
    // The test process has plenty of variables (cargo's CARGO_*, the CI's, ...): none may reach
    // the command.
    let parent: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    let allowed = ["HOME", "LANG", "PATH", "TMPDIR"];
    assert!(
        parent.iter().any(|k| !allowed.contains(&k.as_str())),
        "{parent:?}"
    );
    let skill = skill();
    let out = run_ok(skill.path(), &argv(&["env"]), limits());
    let mut keys: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split('=').next().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, allowed, "{out:?}");
    assert!(out.stdout.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"));
    assert!(out.stdout.contains("LANG=C.UTF-8\n"));
    for k in parent.iter().filter(|k| !allowed.contains(&k.as_str())) {
        assert!(
            !out.stdout.contains(&format!("{k}=")),
            "{k} leaked: {out:?}"
        );
    }
}

#[test]
fn stdin_is_passed_and_fds_do_not_leak() {
    let skill = skill();
    // A descriptor the parent holds without CLOEXEC must not be visible to the command.
    let leaked = std::fs::File::open("/etc/hostname").unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    // SAFETY: clearing FD_CLOEXEC on our own fd.
    unsafe { libc::fcntl(raw, libc::F_SETFD, 0) };
    let input = b"line one\nline two\n";
    let argv = sh(&format!(
        "cat; ls /proc/self/fd/{raw} 2>&1 || echo no-fd-{raw}"
    ));
    let out = vox_sandbox::run(&RunRequest {
        skill_dir: skill.path(),
        argv: &argv,
        stdin: Some(input),
        limits: limits(),
        cancel: None,
    })
    .unwrap();
    assert!(out.stdout.starts_with("line one\nline two\n"), "{out:?}");
    assert!(out.stdout.contains(&format!("no-fd-{raw}")), "{out:?}");
    drop(leaked);
}

#[test]
fn no_new_privileges_and_no_root() {
    let skill = skill();
    let out = run_ok(
        skill.path(),
        &sh("grep -E '^(NoNewPrivs|Uid|Gid|Groups):' /proc/self/status; cat /root/.bashrc"),
        limits(),
    );
    assert!(out.stdout.contains("NoNewPrivs:\t1"), "{out:?}");
    assert!(
        !out.stdout.contains("\t0\t"),
        "no uid/gid 0 anywhere: {out:?}"
    );
    let groups = out
        .stdout
        .lines()
        .find(|l| l.starts_with("Groups:"))
        .unwrap();
    assert_eq!(
        groups["Groups:".len()..].trim(),
        "",
        "no supplementary groups: {out:?}"
    );
    assert!(
        out.stderr.contains("Permission denied"),
        "root's files stay private: {out:?}"
    );
}

#[test]
fn bad_requests_are_refused_clearly() {
    let skill = skill();
    let invalid = |r: Result<vox_sandbox::RunOutcome, SandboxError>| match r {
        Err(SandboxError::InvalidRequest(m)) => m,
        other => panic!("expected InvalidRequest, got {other:?}"),
    };
    assert!(invalid(run_with(skill.path(), &[], limits())).contains("argv is empty"));
    assert!(invalid(run_with(skill.path(), &argv(&[""]), limits())).contains("empty"));
    let m = invalid(run_with(
        skill.path(),
        &argv(&["no-such-program-xyz"]),
        limits(),
    ));
    assert!(m.contains("not found"), "{m}");
    let m = invalid(run_with(
        skill.path(),
        &argv(&["./bin/missing.sh"]),
        limits(),
    ));
    assert!(m.contains("not found"), "{m}");
    let m = invalid(run_with(skill.path(), &argv(&["./SKILL.md"]), limits()));
    assert!(m.contains("not an executable"), "{m}");
    let m = invalid(run_with(
        &skill.path().join("SKILL.md"),
        &argv(&["true"]),
        limits(),
    ));
    assert!(m.contains("not a directory"), "{m}");
    let m = invalid(run_with(
        &skill.path().join("nope"),
        &argv(&["true"]),
        limits(),
    ));
    assert!(m.contains("nope"), "{m}");
    let m = invalid(run_with(skill.path(), &argv(&["echo", "a\0b"]), limits()));
    assert!(m.contains("NUL"), "{m}");
    let m = invalid(run_with(
        skill.path(),
        &argv(&["true"]),
        Limits {
            cpu_seconds: 0,
            ..limits()
        },
    ));
    assert!(m.contains("positive"), "{m}");
}

#[test]
fn the_copy_never_follows_symlinks_out_and_is_bounded() {
    let skill = skill();
    std::os::unix::fs::symlink("SKILL.md", skill.path().join("alias.md")).unwrap();
    let out = run_ok(skill.path(), &sh("cat alias.md"), limits());
    assert!(
        out.stdout.contains("marker-skill-content"),
        "inner symlinks are kept: {out:?}"
    );

    let escaping = self::skill();
    std::os::unix::fs::symlink("/etc/passwd", escaping.path().join("passwd")).unwrap();
    match run_with(escaping.path(), &argv(&["true"]), limits()) {
        Err(SandboxError::InvalidRequest(m)) => assert!(m.contains("symlink"), "{m}"),
        other => panic!("{other:?}"),
    }
    let dotdot = self::skill();
    std::os::unix::fs::symlink("../../etc", dotdot.path().join("up")).unwrap();
    assert!(matches!(
        run_with(dotdot.path(), &argv(&["true"]), limits()),
        Err(SandboxError::InvalidRequest(_))
    ));

    let big = self::skill();
    std::fs::write(big.path().join("blob"), vec![0u8; 10_000]).unwrap();
    match run_with(
        big.path(),
        &argv(&["true"]),
        Limits {
            max_copy_bytes: 5_000,
            ..limits()
        },
    ) {
        Err(SandboxError::InvalidRequest(m)) => assert!(m.contains("max_copy_bytes"), "{m}"),
        other => panic!("{other:?}"),
    }
    let many = self::skill();
    for i in 0..20 {
        std::fs::write(many.path().join(format!("f{i}")), "x").unwrap();
    }
    match run_with(
        many.path(),
        &argv(&["true"]),
        Limits {
            max_copy_files: 10,
            ..limits()
        },
    ) {
        Err(SandboxError::InvalidRequest(m)) => assert!(m.contains("max_copy_files"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_runs_get_distinct_uids() {
    let handles: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let skill = skill();
                run_ok(skill.path(), &argv(&["id", "-u"]), limits())
            })
        })
        .collect();
    let mut uids: Vec<u32> = handles
        .into_iter()
        .map(|h| h.join().unwrap().stdout.trim().parse().unwrap())
        .collect();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 4);
}

fn accept_within(l: &TcpListener, within: Duration) -> Option<(TcpStream, std::net::SocketAddr)> {
    let end = Instant::now() + within;
    loop {
        match l.accept() {
            Ok(c) => return Some(c),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= end {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn the_scratch_dir_is_a_bounded_tmpfs() {
    let skill = skill();
    let l = Limits {
        max_scratch_bytes: 4 << 20,
        max_scratch_files: 200,
        ..limits()
    };
    let script = "stat -f -c %T .; \
                  head -c 8000000 /dev/zero > big; echo \"big=$?\"; \
                  i=0; while [ $i -lt 300 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; echo files=$i";
    let out = run_ok(skill.path(), &sh(script), l.clone());
    assert!(out.stdout.starts_with("tmpfs\n"), "{out:?}");
    assert!(out.stdout.contains("big=1"), "{out:?}");
    assert!(out.stderr.contains("No space left on device"), "{out:?}");
    let files: u32 = out
        .stdout
        .lines()
        .last()
        .unwrap()
        .strip_prefix("files=")
        .unwrap()
        .parse()
        .unwrap();
    assert!(files < 200, "the inode bound held: {out:?}");
    // A skill bigger than the scratch is refused up front.
    let big = self::skill();
    std::fs::write(big.path().join("blob"), vec![7u8; 6 << 20]).unwrap();
    match run_with(big.path(), &argv(&["true"]), l) {
        Err(SandboxError::InvalidRequest(m)) => assert!(m.contains("max_scratch_bytes"), "{m}"),
        other => panic!("{other:?}"),
    }
    // No mount is left behind.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&format!("{}", out.sandbox_uid)),
        "scratch unmounted"
    );
}
