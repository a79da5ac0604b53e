//! Behaviour of the workspace file and declaration index, on real temporary directories.

use std::fs;
use std::path::Path;

use vox_search::{SearchError, WorkspaceIndex};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn paths(hits: &[vox_search::FileHit]) -> Vec<&str> {
    hits.iter().map(|h| h.path.as_str()).collect()
}

fn workspace() -> (tempfile::TempDir, WorkspaceIndex) {
    let dir = tempfile::tempdir().unwrap();
    let index = WorkspaceIndex::new(dir.path().to_path_buf());
    (dir, index)
}

#[test]
fn new_is_lazy_and_refresh_indexes_text_files() {
    let (dir, index) = workspace();
    write(dir.path(), "src/lib.rs", "pub fn alpha() {}\n");
    write(dir.path(), "README.md", "alpha docs\n");
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.indexed, stats.removed), (2, 2, 0));
    assert!(!stats.truncated);
    let hits = index.search_text("alpha", 10, None).unwrap();
    assert_eq!(hits.len(), 2);
}

#[test]
fn gitignored_hidden_and_always_skipped_paths_are_not_indexed() {
    let (dir, index) = workspace();
    write(dir.path(), ".gitignore", "generated/\n*.log\n");
    write(dir.path(), ".ignore", "private.txt\n");
    write(dir.path(), "kept.txt", "needle\n");
    write(dir.path(), "generated/out.txt", "needle\n");
    write(dir.path(), "debug.log", "needle\n");
    write(dir.path(), "private.txt", "needle\n");
    write(dir.path(), ".hidden/file.txt", "needle\n");
    write(dir.path(), ".env", "needle\n");
    write(dir.path(), ".vox/state.txt", "needle\n");
    write(dir.path(), "target/debug/x.txt", "needle\n");
    write(dir.path(), "web/node_modules/pkg/index.js", "needle\n");
    write(dir.path(), "sub/target/y.txt", "needle\n");
    let hits = index.search_text("needle", 50, None).unwrap();
    assert_eq!(paths(&hits), ["kept.txt"]);
}

#[test]
fn changed_files_are_reindexed_and_removed_files_dropped_on_next_refresh() {
    let (dir, index) = workspace();
    write(dir.path(), "a.txt", "original words\n");
    write(dir.path(), "b.txt", "doomed words\n");
    index.refresh().unwrap();

    let warm = index.refresh().unwrap();
    assert_eq!((warm.indexed, warm.removed), (0, 0), "nothing changed");

    write(
        dir.path(),
        "a.txt",
        "replacement text, longer than before\n",
    );
    fs::remove_file(dir.path().join("b.txt")).unwrap();
    write(dir.path(), "c.txt", "fresh words\n");
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.indexed, stats.removed), (2, 2, 1));

    assert!(index.search_text("original", 10, None).unwrap().is_empty());
    assert!(index.search_text("doomed", 10, None).unwrap().is_empty());
    assert_eq!(
        paths(&index.search_text("replacement", 10, None).unwrap()),
        ["a.txt"]
    );
    assert_eq!(
        paths(&index.search_text("fresh", 10, None).unwrap()),
        ["c.txt"]
    );
}

#[test]
fn newly_gitignored_file_is_removed_from_the_index() {
    let (dir, index) = workspace();
    write(dir.path(), "secret.txt", "token\n");
    assert_eq!(index.search_text("token", 10, None).unwrap().len(), 1);
    write(dir.path(), ".gitignore", "secret.txt\n");
    assert!(index.search_text("token", 10, None).unwrap().is_empty());
}

#[test]
fn binary_and_oversized_files_are_skipped() {
    let (dir, index) = workspace();
    write(dir.path(), "text.txt", "marker\n");
    let mut binary = b"marker\n".to_vec();
    binary.push(0);
    fs::write(dir.path().join("blob.bin"), binary).unwrap();
    let big = "marker ".repeat(200_000); // > 1 MiB
    write(dir.path(), "big.txt", &big);
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.skipped), (1, 2));
    assert_eq!(
        paths(&index.search_text("marker", 10, None).unwrap()),
        ["text.txt"]
    );
    // Unchanged binaries are remembered, not re-read, and still counted as skipped.
    let again = index.refresh().unwrap();
    assert_eq!((again.indexed, again.skipped), (0, 2));
}

#[test]
fn file_that_becomes_binary_is_removed() {
    let (dir, index) = workspace();
    write(dir.path(), "x.dat", "searchable\n");
    assert_eq!(index.search_text("searchable", 10, None).unwrap().len(), 1);
    fs::write(dir.path().join("x.dat"), b"searchable\0\0\0").unwrap();
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.removed), (0, 1));
    assert!(
        index
            .search_text("searchable", 10, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn search_text_reports_matching_lines_case_insensitively() {
    let (dir, index) = workspace();
    let mut text = String::from("first line\nThe NEEDLE is here\nnothing\n");
    for i in 0..10 {
        text.push_str(&format!("needle again {i}\n"));
    }
    text.push_str(&format!("needle {}\n", "x".repeat(1000)));
    write(dir.path(), "notes.txt", &text);
    let hits = index.search_text("needle", 10, None).unwrap();
    let lines = &hits[0].lines;
    assert_eq!(lines.len(), 5, "at most five lines per file");
    assert_eq!(lines[0].line, 2);
    assert_eq!(lines[0].text, "The NEEDLE is here");
    assert_eq!(lines[1].line, 4);

    write(
        dir.path(),
        "long.txt",
        &format!("haystack {}\n", "y".repeat(1000)),
    );
    let hits = index.search_text("haystack", 10, None).unwrap();
    assert!(hits[0].lines[0].text.chars().count() <= 301);
}

#[test]
fn path_glob_restricts_files() {
    let (dir, index) = workspace();
    write(dir.path(), "src/a.rs", "shared\n");
    write(dir.path(), "src/deep/b.rs", "shared\n");
    write(dir.path(), "docs/c.md", "shared\n");
    let by_name = index.search_text("shared", 10, Some("*.rs")).unwrap();
    assert_eq!(paths(&by_name), ["src/a.rs", "src/deep/b.rs"]);
    let shallow = index.search_text("shared", 10, Some("src/*.rs")).unwrap();
    assert_eq!(paths(&shallow), ["src/a.rs"]);
    let deep = index.search_text("shared", 10, Some("src/**")).unwrap();
    assert_eq!(paths(&deep), ["src/a.rs", "src/deep/b.rs"]);
    assert!(
        index
            .search_text("shared", 10, Some("*.py"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn invalid_glob_is_an_error_naming_the_glob() {
    let (dir, index) = workspace();
    write(dir.path(), "a.txt", "x\n");
    let err = index
        .search_text("x", 10, Some("src/[unclosed"))
        .unwrap_err();
    assert!(matches!(err, SearchError::InvalidGlob { .. }));
    assert!(err.to_string().contains("src/[unclosed"), "{err}");
}

#[test]
fn missing_root_is_an_error_naming_it() {
    let index = WorkspaceIndex::new("/definitely/not/here".into());
    let err = index.refresh().unwrap_err();
    assert_eq!(err.code(), "search_root_unreadable");
    assert!(!err.is_invalid_input());
    assert!(err.to_string().contains("/definitely/not/here"), "{err}");
}

#[test]
fn malformed_text_queries_are_searched_leniently() {
    let (dir, index) = workspace();
    write(dir.path(), "a.txt", "quote \"inside\" text\n");
    for query in [
        "\"inside",
        "AND",
        "body:",
        "((",
        "path_text:[a TO",
        "*",
        "-",
    ] {
        let result = index.search_text(query, 10, None);
        assert!(result.is_ok(), "query {query:?} failed: {result:?}");
    }
    assert_eq!(index.search_text("\"inside", 10, None).unwrap().len(), 1);
    // An exists query on a field that cannot run falls back to the plain words.
    assert_eq!(
        index
            .search_text("nofield:* inside", 10, None)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn equal_text_scores_come_back_ordered_by_path() {
    let (dir, index) = workspace();
    for name in ["m.txt", "c.txt", "x.txt", "a.txt"] {
        write(dir.path(), name, "identical\n");
        index.refresh().unwrap(); // one segment per file, in non-alphabetical order
    }
    let hits = index.search_text("identical", 10, None).unwrap();
    assert_eq!(paths(&hits), ["a.txt", "c.txt", "m.txt", "x.txt"]);
    assert_eq!(
        paths(&index.search_text("identical", 2, None).unwrap()),
        ["a.txt", "c.txt"]
    );
}

#[test]
fn declarations_rank_exact_then_prefix_then_words() {
    let (dir, index) = workspace();
    write(
        dir.path(),
        "src/lib.rs",
        "pub fn parse() {}\npub fn parse_request() {}\nfn unrelated() {}\n",
    );
    write(
        dir.path(),
        "web/app.ts",
        "export function handleParseError() {}\n",
    );
    write(dir.path(), "tools/x.vox", "@tool\nfn parse() { }\n");
    let hits = index.search_declarations("parse", None, 10).unwrap();
    let got: Vec<(&str, &str, u32)> = hits
        .iter()
        .map(|h| (h.name.as_str(), h.path.as_str(), h.line))
        .collect();
    assert_eq!(
        got,
        [
            ("parse", "src/lib.rs", 1),
            ("parse", "tools/x.vox", 2),
            ("parse_request", "src/lib.rs", 2),
            ("handleParseError", "web/app.ts", 1),
        ]
    );
    assert!(hits[0].score >= 2.0 && hits[2].score >= 1.0 && hits[2].score < 2.0);
    assert!(hits[3].score < 1.0);
    assert_eq!(hits[0].signature, "pub fn parse() {}");
    assert_eq!(hits[1].kind, "tool");
}

#[test]
fn declaration_words_match_across_snake_and_camel_case() {
    let (dir, index) = workspace();
    write(dir.path(), "a.py", "def load_user_profile():\n    pass\n");
    write(dir.path(), "b.go", "func SaveUserProfile() {}\n");
    let hits = index.search_declarations("userProfile", None, 10).unwrap();
    let mut names: Vec<&str> = hits.iter().map(|h| h.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["SaveUserProfile", "load_user_profile"]);
}

#[test]
fn declaration_kind_filter_accepts_keywords_and_rejects_unknown_kinds() {
    let (dir, index) = workspace();
    write(dir.path(), "a.rs", "struct Widget;\nfn widget() {}\n");
    let structs = index
        .search_declarations("widget", Some("struct"), 10)
        .unwrap();
    assert_eq!(structs.len(), 1);
    assert_eq!(structs[0].kind, "struct");
    let fns = index.search_declarations("widget", Some("fn"), 10).unwrap();
    assert_eq!(fns.len(), 1);
    assert_eq!(fns[0].kind, "function");
    let err = index
        .search_declarations("widget", Some("gizmo"), 10)
        .unwrap_err();
    assert_eq!(err.code(), "search_unknown_kind");
    assert!(err.to_string().contains("gizmo"), "{err}");
}

#[test]
fn declarations_follow_file_changes() {
    let (dir, index) = workspace();
    write(dir.path(), "a.rs", "fn before_change() {}\n");
    assert_eq!(
        index
            .search_declarations("before_change", None, 5)
            .unwrap()
            .len(),
        1
    );
    write(dir.path(), "a.rs", "fn after_the_change() {}\n");
    let names = |query: &str| -> Vec<String> {
        let hits = index.search_declarations(query, None, 5).unwrap();
        hits.into_iter().map(|h| h.name).collect()
    };
    assert_eq!(
        names("before_change"),
        ["after_the_change"],
        "only the shared word"
    );
    assert_eq!(
        index
            .search_declarations("after_the_change", None, 5)
            .unwrap()[0]
            .line,
        1
    );
    fs::remove_file(dir.path().join("a.rs")).unwrap();
    assert!(names("after_the_change").is_empty());
}

#[test]
fn equal_declaration_scores_are_ordered_by_path_then_line() {
    let (dir, index) = workspace();
    write(dir.path(), "z.rs", "fn run() {}\n");
    write(
        dir.path(),
        "a.rs",
        "fn other() {}\n\nfn run() {}\nfn run() {}\n",
    );
    let hits = index.search_declarations("run", None, 10).unwrap();
    let got: Vec<(&str, u32)> = hits.iter().map(|h| (h.path.as_str(), h.line)).collect();
    assert_eq!(got, [("a.rs", 3), ("a.rs", 4), ("z.rs", 1)]);
}

#[test]
fn odd_declaration_queries_do_not_fail() {
    let (dir, index) = workspace();
    write(dir.path(), "a.rs", "fn x() {}\n");
    for query in [
        "",
        "   ",
        "\"",
        "::",
        "AND",
        "a".repeat(5000).as_str(),
        "é🙂",
    ] {
        assert!(
            index.search_declarations(query, None, 10).is_ok(),
            "{query:?}"
        );
    }
}

#[cfg(unix)] // non-UTF-8 file names cannot be created on Windows
#[test]
fn latin1_content_is_searchable_and_non_utf8_names_are_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let (dir, index) = workspace();
    // "café crème" in Latin-1: invalid UTF-8, still text.
    fs::write(dir.path().join("latin1.txt"), b"caf\xe9 cr\xe8me needle\n").unwrap();
    let odd_name = std::ffi::OsStr::from_bytes(b"bad\xffname.txt");
    fs::write(dir.path().join(odd_name), "needle\n").unwrap();
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.skipped), (1, 1));
    assert_eq!(
        paths(&index.search_text("needle", 10, None).unwrap()),
        ["latin1.txt"]
    );
}

#[test]
fn concurrent_searches_and_edits_do_not_fail() {
    let (dir, index) = workspace();
    let index = std::sync::Arc::new(index);
    write(dir.path(), "base.rs", "fn shared_name() {}\n");
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let index = std::sync::Arc::clone(&index);
            let root = dir.path().to_path_buf();
            std::thread::spawn(move || {
                for i in 0..5 {
                    write(&root, &format!("t{t}/f{i}.rs"), "fn shared_name() {}\n");
                    index.search_text("shared_name", 10, None).unwrap();
                    index.search_declarations("shared_name", None, 10).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let stats = index.refresh().unwrap();
    assert_eq!(stats.files, 21);
    assert_eq!(
        index
            .search_declarations("shared_name", None, 100)
            .unwrap()
            .len(),
        21
    );
}

/// Cancels a refresh at its second check (after the first 64 files).
struct CancelAfterFirstBatch(std::sync::atomic::AtomicUsize);

impl vox_search::Observer for CancelAfterFirstBatch {
    fn cancelled(&self) -> bool {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 1
    }
}

#[test]
fn a_cancelled_refresh_keeps_what_it_indexed_and_the_next_one_finishes() {
    let (dir, index) = workspace();
    for i in 0..200 {
        write(
            dir.path(),
            &format!("f{i:03}.txt"),
            &format!("word{i} common\n"),
        );
    }
    let observer = CancelAfterFirstBatch(Default::default());
    let err = index.refresh_with(&observer).unwrap_err();
    assert!(matches!(err, SearchError::Cancelled), "{err}");
    assert_eq!(err.code(), "search_cancelled");
    // The 64 files indexed before the cancel stay; the next refresh indexes the rest.
    let stats = index.refresh().unwrap();
    assert_eq!((stats.files, stats.indexed), (200, 136));
    assert_eq!(index.search_text("word7", 10, None).unwrap().len(), 1);
}
