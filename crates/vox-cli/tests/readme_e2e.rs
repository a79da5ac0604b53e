//! The READMEs and the pages of `docs/` run: every `sh` block of every tracked README and of
//! every `docs/*.md` is executed, in order, by bash in a scratch copy of the repository's tracked
//! files, with this build's binaries first on PATH and a fresh HOME per block. Each document gets
//! a fresh copy of its own, so a page's blocks hold for a reader who starts on that page: the
//! blocks of one document share its workspace (what one block creates, the next finds), and no
//! document sees another's. A renamed file, a missing example input or a wrong flag fails here,
//! and so does a relative link to a file or heading that does not exist.
//!
//! What the runner changes, so the blocks run against the build under test instead of building
//! again: `cargo build …` is already done; `cargo run [--release] (--bin|-p) NAME [--]` is
//! `NAME`; `target/{debug,release}/` is the build's own directory.
//!
//! A `console` block is a transcript: each `$ command` runs, and its output must be the lines
//! that follow it, with this build's `vox` written as `/usr/local/bin/vox` and the scratch
//! workspace as `/home/ada/proj`.
//!
//! A block may say, on the line before its fence:
//! - `<!-- readme: serves -->`: its first command (after `export`s) is a server that runs
//!   until stopped; it runs in the background, the rest of the block runs once the workspace
//!   daemon answers, and it is stopped at the end.
//! - `<!-- readme: skip — reason -->`: not run, for the reason given (the test command itself,
//!   minutes-long benchmarks). Its repository paths must still exist.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const VOX: &str = env!("CARGO_BIN_EXE_vox");

/// Binaries a README may call by name.
const BINARIES: &[&str] = &[
    "vox",
    "vox-orchestrator-d",
    "codex-mmo",
    "mcp-bench",
    "http-bench",
    "rmcp-bare",
];

#[derive(Debug, PartialEq)]
enum Mode {
    Run,
    Transcript,
    Serves,
    Skip(String),
}

#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    mode: Mode,
    text: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The repository's files as a fresh clone has them, plus any not yet committed.
fn tracked_files(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-co", "--exclude-standard", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files");
    assert!(out.status.success());
    let files: BTreeSet<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| root.join(p).is_file())
        .collect();
    files.into_iter().collect()
}

fn parse_blocks(file: &str, text: &str) -> Vec<Block> {
    let mut blocks = vec![];
    let mut lines = text.lines().enumerate().peekable();
    let mut directive: Option<Mode> = None;
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(d) = trimmed
            .strip_prefix("<!-- readme:")
            .and_then(|d| d.strip_suffix("-->"))
        {
            let d = d.trim();
            directive = Some(if d == "serves" {
                Mode::Serves
            } else if let Some(reason) = d.strip_prefix("skip") {
                let reason = reason.trim_start_matches([' ', '—', '-', ':']).trim();
                assert!(
                    !reason.is_empty(),
                    "{file}:{}: a skipped block says why",
                    i + 1
                );
                Mode::Skip(reason.to_owned())
            } else {
                panic!("{file}:{}: unknown readme directive `{d}`", i + 1)
            });
            continue;
        }
        if let Some(lang) = trimmed.strip_prefix("```") {
            let mut body = String::new();
            for (_, l) in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                body.push_str(l);
                body.push('\n');
            }
            let mut mode = directive.take().unwrap_or(Mode::Run);
            if lang.trim() == "console" && mode == Mode::Run {
                mode = Mode::Transcript;
            }
            if matches!(lang.trim(), "sh" | "bash" | "console") {
                blocks.push(Block {
                    file: file.to_owned(),
                    line: i + 1,
                    mode,
                    text: body,
                });
            } else {
                assert!(
                    mode == Mode::Run,
                    "{file}:{}: a readme directive stands before an `sh` block",
                    i + 1
                );
            }
        } else if !trimmed.is_empty() {
            directive = None;
        }
    }
    blocks
}

/// One logical command per entry: backslash continuations joined.
fn commands(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut current = String::new();
    for line in text.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
        } else {
            current.push_str(line);
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Runs the block against this build (see the module comment).
fn rewrite(command: &str) -> String {
    let mut c = command.to_owned();
    for prefix in [
        "$PWD/target/release/",
        "$PWD/target/debug/",
        "target/release/",
        "target/debug/",
    ] {
        c = c.replace(prefix, "$VOX_README_BIN/");
    }
    // `cargo run [--release] (--bin|-p) NAME [--] args` → `NAME args`.
    while let Some(start) = c.find("cargo run ") {
        let rest = &c[start + "cargo run ".len()..];
        let mut words = rest.split(' ').peekable();
        let mut name = None;
        let mut used = 0;
        while let Some(w) = words.next() {
            used += w.len() + 1;
            match w {
                "--release" | "" => {}
                "--bin" | "-p" => {
                    let n = words.next().unwrap_or_default();
                    used += n.len() + 1;
                    name = Some(n.to_owned());
                }
                "--" => break,
                _ => {
                    used -= w.len() + 1;
                    break;
                }
            }
        }
        let name = name.unwrap_or_else(|| panic!("cargo run without --bin or -p: {command}"));
        let end = (start + "cargo run ".len() + used).min(c.len());
        c.replace_range(start..end, &format!("{name} "));
    }
    // `cargo build …` (up to `&&`, `;` or the end) is already done.
    if let Some(start) = c.find("cargo build") {
        let end = c[start..]
            .find("&&")
            .or_else(|| c[start..].find(';'))
            .map_or(c.len(), |e| start + e);
        c.replace_range(start..end, "true ");
    }
    c
}

fn script(block: &Block) -> String {
    let mut s = String::from(
        "set -eo pipefail\nshopt -s expand_aliases\n\
         trap 'rc=$?; trap - EXIT; set +e; trap \"\" TERM; kill -TERM 0 2>/dev/null; wait; vox daemon stop >/dev/null 2>&1; exit $rc' EXIT\n",
    );
    let mut server_started = block.mode != Mode::Serves;
    for command in commands(&block.text) {
        let command = rewrite(&command);
        let bare = command.trim();
        assert!(
            !bare.split_whitespace().any(|w| w == "cargo"),
            "{}:{}: `{bare}` would build: only `cargo build` and `cargo run` are mapped to this build; mark the block `<!-- readme: skip — why -->`",
            block.file,
            block.line
        );
        if !server_started
            && !bare.is_empty()
            && !bare.starts_with('#')
            && !bare.starts_with("export ")
        {
            // Before a trailing comment, or the `&` would be part of it.
            let command = command.split(" #").next().unwrap_or(&command);
            s.push_str(&format!("{command} &\n"));
            s.push_str(
                "for _ in $(seq 300); do vox daemon status >/dev/null 2>&1 && break; sleep 0.1; done\n\
                 vox daemon status >/dev/null\n",
            );
            server_started = true;
            continue;
        }
        s.push_str(&command);
        s.push('\n');
    }
    s
}

/// Repository paths a block names (`crates/…`, `./profiles/…`) that do not exist.
fn missing_paths(root: &Path, text: &str) -> Vec<String> {
    let tops: BTreeSet<String> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let mut missing = vec![];
    for word in text.split_whitespace() {
        // `NAME=path` and `--flag=path` name a path after the `=`; quoting and shell
        // punctuation around a word are not part of it. A JSON argument is not a path.
        let word = word.rsplit('=').next().unwrap_or(word);
        let word = word.trim_matches(|c: char| "'\"(),;|&".contains(c));
        if word.starts_with(['{', '[']) {
            continue;
        }
        let path = word.trim_start_matches("./");
        let Some((top, _)) = path.split_once('/') else {
            continue;
        };
        if !tops.contains(top) || path.contains(['<', '{', '*', '$', '…']) {
            continue;
        }
        if !root.join(path.trim_end_matches('/')).exists() {
            missing.push(word.to_owned());
        }
    }
    missing
}

fn run_block(block: &Block, repo: &Path, bin: &Path, scratch: &Path) -> Result<(), String> {
    match block.mode {
        Mode::Transcript => run_transcript(block, repo, bin, scratch),
        _ => run_script(block, repo, bin, scratch).map(drop),
    }
}

/// Runs the block's script; its stdout when it succeeds.
fn run_script(block: &Block, repo: &Path, bin: &Path, scratch: &Path) -> Result<String, String> {
    let home = tempfile::tempdir_in(scratch).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(script(block))
        .current_dir(repo)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("VOX_README_BIN", bin)
        .env("HOME", home.path())
        .env("TMPDIR", scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("VOX_") || k.starts_with("CODEX_") || k.starts_with("XDG_") {
            cmd.env_remove(k);
        }
    }
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            // SAFETY: signalling the block's own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A daemon the block left behind (it failed or timed out before its own stop).
    let _ = Command::new(VOX)
        .args(["daemon", "stop"])
        .current_dir(repo)
        .env("HOME", home.path())
        .env_remove("VOX_WORKSPACE")
        .env_remove("VOX_HOME")
        .output();
    let (stdout, stderr) = (out_reader.join().unwrap(), err_reader.join().unwrap());
    let tail = |s: &str| {
        s.lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n    ")
    };
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "{}:{}: {s}\n  stdout:\n    {}\n  stderr:\n    {}",
            block.file,
            block.line,
            tail(&stdout),
            tail(&stderr)
        )),
        None => Err(format!(
            "{}:{}: still running after 180 s",
            block.file, block.line
        )),
    }
}

/// Runs each `$ command` of a transcript and compares its output with the lines below it.
fn run_transcript(block: &Block, repo: &Path, bin: &Path, scratch: &Path) -> Result<(), String> {
    let mut steps: Vec<(String, Vec<&str>)> = vec![];
    for line in block.text.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command.to_owned(), vec![])),
            None => steps
                .last_mut()
                .ok_or_else(|| {
                    format!(
                        "{}:{}: a transcript starts with `$ `",
                        block.file, block.line
                    )
                })?
                .1
                .push(line),
        }
    }
    let vox_path = std::fs::canonicalize(Path::new(VOX)).unwrap();
    for (command, expected) in steps {
        let step = Block {
            file: block.file.clone(),
            line: block.line,
            mode: Mode::Run,
            text: format!("{command}\n"),
        };
        let stdout = run_script(&step, repo, bin, scratch)?;
        let stdout = stdout
            .replace(&vox_path.display().to_string(), "/usr/local/bin/vox")
            .replace(&repo.display().to_string(), "/home/ada/proj");
        let got: Vec<&str> = stdout.lines().collect();
        if got != expected {
            return Err(format!(
                "{}:{}: `{command}` printed\n{}\ninstead of\n{}",
                block.file,
                block.line,
                got.join("\n"),
                expected.join("\n")
            ));
        }
    }
    Ok(())
}

/// The documents whose blocks run: every README, and the pages of `docs/`.
fn documents(files: &[String]) -> Vec<&String> {
    let mut docs: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with("README.md") || (f.starts_with("docs/") && f.ends_with(".md")))
        .collect();
    docs.sort();
    docs
}

/// Copies the repository's files to `dest`, a checkout of its own as a user's is: the workspace
/// a block's `vox` finds is the copy, never a `.vox/` or `.git` that happens to sit above it in
/// /tmp.
fn scratch_copy(root: &Path, files: &[String], dest: &Path) {
    for f in files {
        let to = dest.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(f), &to).unwrap();
    }
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dest)
        .status()
        .unwrap();
    assert!(init.success(), "git init of the scratch copy");
}

/// A directory of links to the binaries a document may call by name.
fn link_binaries(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    let built = Path::new(VOX).parent().unwrap();
    // The bench binaries are built only when their package is (blocks that use them are
    // skipped); a block that runs a binary that is not here fails with "command not found".
    for name in BINARIES {
        let exe = built.join(name);
        if exe.is_file() {
            std::os::unix::fs::symlink(&exe, bin.join(name)).unwrap();
        }
    }
    for name in ["vox", "vox-orchestrator-d", "codex-mmo"] {
        assert!(
            bin.join(name).exists(),
            "{name} is not built in {}",
            built.display()
        );
    }
}

/// What the documents' blocks came to.
#[derive(Default)]
struct Tally {
    ran: usize,
    skipped: Vec<String>,
    failures: Vec<String>,
}

/// Runs one document's blocks, in order, in a fresh copy of the repository of its own.
fn run_document(doc: &str, root: &Path, files: &[String], scratch: &Path, tally: &mut Tally) {
    let text = std::fs::read_to_string(root.join(doc)).unwrap();
    let blocks = parse_blocks(doc, &text);
    if blocks.is_empty() {
        return;
    }
    // Named after the document, so what one document's daemons left behind is never the next's.
    let repo = scratch.join(format!("repo-{}", doc.replace('/', "_")));
    scratch_copy(root, files, &repo);
    let bin = scratch.join("bin");
    for block in blocks {
        let missing = missing_paths(root, &block.text);
        if !missing.is_empty() {
            tally.failures.push(format!(
                "{}:{}: names paths that do not exist: {}",
                block.file,
                block.line,
                missing.join(", ")
            ));
        }
        if let Mode::Skip(reason) = &block.mode {
            tally
                .skipped
                .push(format!("{}:{} ({reason})", block.file, block.line));
            continue;
        }
        tally.ran += 1;
        if let Err(e) = run_block(&block, &repo, &bin, scratch) {
            tally.failures.push(e);
        }
    }
    // The next document starts from the repository as it is, not from what these blocks left.
    let _ = std::fs::remove_dir_all(&repo);
}

#[test]
fn every_readme_and_docs_command_block_runs() {
    let root = repo_root();
    let files = tracked_files(&root);
    let scratch = tempfile::Builder::new()
        .prefix("voxrd")
        .tempdir_in("/tmp")
        .unwrap();
    link_binaries(&scratch.path().join("bin"));
    let mut tally = Tally::default();
    for doc in documents(&files) {
        run_document(doc, &root, &files, scratch.path(), &mut tally);
    }
    let Tally {
        ran,
        skipped,
        failures,
    } = tally;
    eprintln!(
        "README and docs blocks: {ran} ran; skipped: {}",
        skipped.join("; ")
    );
    assert!(ran >= 5, "only {ran} README and docs blocks ran");
    assert!(
        failures.is_empty(),
        "README and docs blocks that fail:\n{}",
        failures.join("\n\n")
    );
}

/// Relative link targets (`[text](target)`) of a markdown text with their line numbers; code
/// blocks and inline code hold examples, not links, and are left out.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = vec![];
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // The text outside backticks: every other piece between them.
        let prose: Vec<&str> = line.split('`').step_by(2).collect();
        let prose = prose.join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = &rest[..end];
            // A URL (`https:`, `mailto:`) is not the repository's to check.
            let url = target
                .split_once(':')
                .is_some_and(|(scheme, _)| scheme.chars().all(|c| c.is_ascii_alphabetic()));
            if !target.is_empty() && !url && !target.contains(char::is_whitespace) {
                targets.push((i + 1, target.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    targets
}

/// The anchors GitHub gives a markdown text's headings: lower case, punctuation other than `-`
/// and `_` dropped, spaces as `-`, and a repeated one suffixed `-1`, `-2`, ...
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let level = line.len() - line.trim_start_matches('#').len();
        if in_fence || level == 0 || level > 6 || !line[level..].starts_with(' ') {
            continue;
        }
        let title = line[level..].trim().trim_end_matches('#').trim_end();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(if *n == 0 { slug } else { format!("{slug}-{n}") });
        *n += 1;
    }
    anchors
}

/// The relative links of `file` (a repository path) whose file or heading does not exist.
fn broken_links(root: &Path, file: &str, text: &str) -> Vec<String> {
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut broken = vec![];
    for (line, target) in link_targets(text) {
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            root.join(file)
        } else {
            root.join(dir).join(path)
        };
        if !resolved.exists() {
            broken.push(format!("{file}:{line}: {target}: no such file"));
            continue;
        }
        if let Some(anchor) = anchor
            && resolved.extension().is_some_and(|e| e == "md")
        {
            let linked = std::fs::read_to_string(&resolved).unwrap_or_default();
            if !heading_anchors(&linked).contains(anchor) {
                broken.push(format!("{file}:{line}: {target}: no such heading"));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_documentation_resolves() {
    let root = repo_root();
    let mut broken = vec![];
    for f in tracked_files(&root).iter().filter(|f| f.ends_with(".md")) {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        broken.extend(broken_links(&root, f, &text));
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

#[test]
fn links_and_anchors_are_read_as_github_renders_them() {
    let anchors = heading_anchors(
        "# vox\n## Other people's MCP servers (upstream)\n## stdio (`vox mcp`)\n## A\n## A\n```sh\n# not a heading\n```\n",
    );
    let want: BTreeSet<String> = [
        "vox",
        "other-peoples-mcp-servers-upstream",
        "stdio-vox-mcp",
        "a",
        "a-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(anchors, want);
    let targets = link_targets(
        "[a](docs/a.md) and [b](https://example.com) `[c](no.md)`\n```\n[d](no.md)\n```\n[e](#a)\n",
    );
    assert_eq!(
        targets,
        vec![(1, "docs/a.md".to_owned()), (5, "#a".to_owned())]
    );
    let root = repo_root();
    assert_eq!(
        broken_links(
            &root,
            "docs/x.md",
            "[r](../README.md#vox) [n](nope.md) [h](../README.md#nope)\n"
        ),
        vec![
            "docs/x.md:1: nope.md: no such file",
            "docs/x.md:1: ../README.md#nope: no such heading"
        ]
    );
}

#[test]
fn the_runner_rewrites_builds_to_this_build() {
    assert_eq!(
        rewrite("cargo run --release --bin vox-orchestrator-d"),
        "vox-orchestrator-d "
    );
    assert_eq!(
        rewrite("cargo run -p codex-mmo -- profile compile profiles/review-pair --json"),
        "codex-mmo profile compile profiles/review-pair --json"
    );
    assert_eq!(
        rewrite("cargo build -p codex-mmo && alias codex-mmo=$PWD/target/debug/codex-mmo"),
        "true && alias codex-mmo=$VOX_README_BIN/codex-mmo"
    );
    assert_eq!(rewrite("target/release/vox mcp"), "$VOX_README_BIN/vox mcp");
}

#[test]
fn a_block_naming_a_missing_file_is_caught() {
    let root = repo_root();
    assert_eq!(
        missing_paths(&root, "vox run examples/workspace/tools/greet.vox greet"),
        vec!["examples/workspace/tools/greet.vox"]
    );
    assert!(missing_paths(&root, "vox check examples/workspace/tools/ profiles/<name>").is_empty());
    let blocks = parse_blocks(
        "x.md",
        "<!-- readme: skip — slow -->\n```sh\nsleep 1\n```\n\n```rust\nfn f() {}\n```\n```sh\necho hi\n```\n",
    );
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].mode, Mode::Skip("slow".into()));
    assert_eq!(blocks[1].mode, Mode::Run);
}
