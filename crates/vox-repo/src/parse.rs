//! Parsers for git's machine-readable (`-z`) output formats.

use crate::{Commit, DiffFile, EntryKind, ObjectKind, RepoError, StatusEntry, TreeEntry, Upstream};

/// Field order of [`LOG_FORMAT`]; the subject is last because it is the only free text.
pub(crate) const LOG_FIELDS: usize = 7;

/// `git log` format for [`Commit`]; used with `-z`, so every field and record ends in NUL.
pub(crate) const LOG_FORMAT: &str = "--format=tformat:%H%x00%h%x00%an%x00%ae%x00%at%x00%P%x00%s";

/// Splits NUL-terminated output into its records, dropping the empty tail after the last NUL.
pub(crate) fn nul_records(bytes: &[u8]) -> Vec<String> {
    let mut records: Vec<String> = bytes
        .split(|b| *b == 0)
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect();
    if records.last().is_some_and(String::is_empty) {
        records.pop();
    }
    records
}

/// Drops a partial record after the last NUL (output that was cut at the cap).
pub(crate) fn complete_records(bytes: &[u8]) -> &[u8] {
    match bytes.iter().rposition(|b| *b == 0) {
        Some(last) => &bytes[..=last],
        None => &[],
    }
}

fn parse_error(command: &str, detail: impl Into<String>) -> RepoError {
    RepoError::Parse {
        command: command.to_owned(),
        detail: detail.into(),
    }
}

fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Builds a commit from the first [`LOG_FIELDS`] fields of a record.
pub(crate) fn commit_from_fields(fields: &[String]) -> Result<Commit, RepoError> {
    let [
        sha,
        short_sha,
        author_name,
        author_email,
        time,
        parents,
        subject,
    ] = fields
    else {
        return Err(parse_error(
            "log",
            "a commit record has the wrong field count",
        ));
    };
    // A message cannot normally hold NUL, but a hand-made commit object can; a misaligned
    // record then shows up here instead of as a garbled commit.
    if !is_object_id(sha) {
        return Err(parse_error(
            "log",
            format!("expected a commit id, got {sha:?}"),
        ));
    }
    let author_time = time
        .parse::<i64>()
        .map_err(|_| parse_error("log", format!("bad author time {time:?} for {sha}")))?;
    Ok(Commit {
        sha: sha.clone(),
        short_sha: short_sha.clone(),
        author_name: author_name.clone(),
        author_email: author_email.clone(),
        author_time,
        subject: subject.clone(),
        parents: parents.split_whitespace().map(str::to_owned).collect(),
    })
}

/// Parses `git log -z` output written with [`LOG_FORMAT`].
pub(crate) fn parse_log(bytes: &[u8]) -> Result<Vec<Commit>, RepoError> {
    let fields = nul_records(bytes);
    if !fields.len().is_multiple_of(LOG_FIELDS) {
        return Err(parse_error(
            "log",
            format!("{} fields is not a whole number of commits", fields.len()),
        ));
    }
    fields.chunks(LOG_FIELDS).map(commit_from_fields).collect()
}

/// Branch information from the `# branch.*` headers of `git status --porcelain=v2 --branch`.
#[derive(Debug, Default)]
pub(crate) struct BranchHeaders {
    pub oid: Option<String>,
    pub head: Option<String>,
    pub upstream: Option<Upstream>,
}

/// Parses `git status --porcelain=v2 -z --branch` output into headers and entries, keeping at
/// most `max_entries` entries. The boolean says whether entries were left out.
pub(crate) fn parse_status(
    bytes: &[u8],
    max_entries: usize,
) -> Result<(BranchHeaders, Vec<StatusEntry>, bool), RepoError> {
    let records = nul_records(bytes);
    let mut headers = BranchHeaders::default();
    let mut entries = Vec::new();
    let mut dropped = false;
    let mut push = |entry: StatusEntry, entries: &mut Vec<StatusEntry>| {
        if entries.len() < max_entries {
            entries.push(entry);
        } else {
            dropped = true;
        }
    };
    let mut iter = records.into_iter();
    while let Some(record) = iter.next() {
        let (tag, rest) = record.split_once(' ').unwrap_or((record.as_str(), ""));
        match tag {
            "#" => parse_branch_header(rest, &mut headers),
            "1" => {
                // 1 XY sub mH mI mW hH hI path
                let fields: Vec<&str> = rest.splitn(8, ' ').collect();
                let [xy, _, _, _, _, _, _, path] = fields.as_slice() else {
                    return Err(parse_error("status", format!("short record {record:?}")));
                };
                for entry in changed_entries(xy, path, None) {
                    push(entry, &mut entries);
                }
            }
            "2" => {
                // 2 XY sub mH mI mW hH hI Xscore path, then the original path as its own record
                let fields: Vec<&str> = rest.splitn(9, ' ').collect();
                let [xy, _, _, _, _, _, _, _, path] = fields.as_slice() else {
                    return Err(parse_error("status", format!("short record {record:?}")));
                };
                let orig = iter.next().ok_or_else(|| {
                    parse_error("status", format!("rename without its source: {record:?}"))
                })?;
                for entry in changed_entries(xy, path, Some(&orig)) {
                    push(entry, &mut entries);
                }
            }
            "u" => {
                // u XY sub m1 m2 m3 mW h1 h2 h3 path
                let fields: Vec<&str> = rest.splitn(10, ' ').collect();
                let [xy, _, _, _, _, _, _, _, _, path] = fields.as_slice() else {
                    return Err(parse_error("status", format!("short record {record:?}")));
                };
                let (x, y) = split_xy(xy)?;
                push(
                    StatusEntry {
                        path: (*path).to_owned(),
                        orig_path: None,
                        index_status: x,
                        worktree_status: y,
                        kind: EntryKind::Conflicted,
                    },
                    &mut entries,
                );
            }
            "?" => push(
                StatusEntry {
                    path: rest.to_owned(),
                    orig_path: None,
                    index_status: "?".to_owned(),
                    worktree_status: "?".to_owned(),
                    kind: EntryKind::Untracked,
                },
                &mut entries,
            ),
            // Ignored files are not requested; tolerate them should config ever add them.
            "!" => {}
            _ => return Err(parse_error("status", format!("unknown record {record:?}"))),
        }
    }
    Ok((headers, entries, dropped))
}

fn parse_branch_header(rest: &str, headers: &mut BranchHeaders) {
    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
    match key {
        "branch.oid" if value != "(initial)" => headers.oid = Some(value.to_owned()),
        "branch.head" if value != "(detached)" => headers.head = Some(value.to_owned()),
        "branch.upstream" => {
            headers.upstream = Some(Upstream {
                name: value.to_owned(),
                ahead: None,
                behind: None,
            });
        }
        "branch.ab" => {
            if let Some(upstream) = headers.upstream.as_mut() {
                for part in value.split_whitespace() {
                    if let Some(n) = part.strip_prefix('+') {
                        upstream.ahead = n.parse().ok();
                    } else if let Some(n) = part.strip_prefix('-') {
                        upstream.behind = n.parse().ok();
                    }
                }
            }
        }
        _ => {}
    }
}

fn split_xy(xy: &str) -> Result<(String, String), RepoError> {
    let mut chars = xy.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some(x), Some(y), None) => Ok((x.to_string(), y.to_string())),
        _ => Err(parse_error("status", format!("bad XY field {xy:?}"))),
    }
}

/// A tracked path changed in the index, the worktree or both: one entry per side that changed,
/// so that filtering by kind finds every staged (or unstaged) change.
fn changed_entries(xy: &str, path: &str, orig: Option<&str>) -> Vec<StatusEntry> {
    let Ok((x, y)) = split_xy(xy) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (changed, kind) in [
        (x != ".", EntryKind::Staged),
        (y != ".", EntryKind::Unstaged),
    ] {
        if changed {
            out.push(StatusEntry {
                path: path.to_owned(),
                orig_path: orig.map(str::to_owned),
                index_status: x.clone(),
                worktree_status: y.clone(),
                kind,
            });
        }
    }
    out
}

/// Parses `git diff --numstat -z`, keeping at most `max_files`; the boolean says whether files
/// were left out.
pub(crate) fn parse_numstat(
    bytes: &[u8],
    max_files: usize,
) -> Result<(Vec<DiffFile>, bool), RepoError> {
    let records = nul_records(bytes);
    let mut files = Vec::new();
    let mut iter = records.into_iter();
    while let Some(record) = iter.next() {
        let mut parts = record.splitn(3, '\t');
        let (Some(add), Some(del), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(parse_error(
                "diff",
                format!("bad numstat record {record:?}"),
            ));
        };
        // `-` for both counts is how numstat marks a binary file.
        let binary = add == "-" && del == "-";
        let count = |n: &str| -> Result<u64, RepoError> {
            if binary {
                Ok(0)
            } else {
                n.parse()
                    .map_err(|_| parse_error("diff", format!("bad count {n:?} in {record:?}")))
            }
        };
        let (additions, deletions) = (count(add)?, count(del)?);
        // A rename or copy leaves the path empty and puts source and destination in the next
        // two records.
        let (path, old_path) = if path.is_empty() {
            let old = iter.next();
            let new = iter.next();
            match (old, new) {
                (Some(old), Some(new)) => (new, Some(old)),
                _ => return Err(parse_error("diff", "rename record without its paths")),
            }
        } else {
            (path.to_owned(), None)
        };
        if files.len() == max_files {
            return Ok((files, true));
        }
        files.push(DiffFile {
            path,
            old_path,
            additions,
            deletions,
            binary,
        });
    }
    Ok((files, false))
}

/// One `git ls-tree -z -l` record, path as git printed it (relative to the listed tree).
pub(crate) fn parse_ls_tree_record(record: &str) -> Result<TreeEntry, RepoError> {
    let bad = || parse_error("ls-tree", format!("bad record {record:?}"));
    let (meta, path) = record.split_once('\t').ok_or_else(bad)?;
    let mut fields = meta.split_whitespace();
    let (Some(mode), Some(kind), Some(oid), Some(size)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(bad());
    };
    let kind = match kind {
        "blob" => ObjectKind::Blob,
        "tree" => ObjectKind::Tree,
        "commit" => ObjectKind::Commit,
        _ => return Err(bad()),
    };
    Ok(TreeEntry {
        path: path.to_owned(),
        kind,
        size: size.parse().ok(),
        mode: mode.to_owned(),
        oid: oid.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn log_subjects_with_separators_stay_in_one_commit() {
        let record = format!(
            "{SHA}\x000123456\x00A B\x00a@b\x00100\x00\x00tab\there \x1e and ; 'quotes'\x00"
        );
        let commits = parse_log(record.as_bytes()).unwrap();
        assert_eq!(commits.len(), 1);
        assert_eq!(commits[0].subject, "tab\there \x1e and ; 'quotes'");
        assert!(commits[0].parents.is_empty());
    }

    #[test]
    fn misaligned_log_output_is_an_error_not_garbage() {
        let record = format!("{SHA}\x00x\x00A\x00a@b\x00100\x00\x00sub\x00ject\x00");
        assert!(parse_log(record.as_bytes()).is_err());
    }

    #[test]
    fn status_splits_staged_and_unstaged_sides() {
        let out = b"# branch.oid (initial)\0# branch.head main\0\
1 MM N... 100644 100644 100644 aaaa bbbb a file.txt\0? new dir/\0";
        let (headers, entries, dropped) = parse_status(out, 100).unwrap();
        assert!(headers.oid.is_none());
        assert_eq!(headers.head.as_deref(), Some("main"));
        assert!(!dropped);
        let kinds: Vec<_> = entries.iter().map(|e| (e.path.as_str(), e.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("a file.txt", EntryKind::Staged),
                ("a file.txt", EntryKind::Unstaged),
                ("new dir/", EntryKind::Untracked)
            ]
        );
    }

    #[test]
    fn status_entry_cap_reports_dropped_entries() {
        let out = b"? a\0? b\0? c\0";
        let (_, entries, dropped) = parse_status(out, 2).unwrap();
        assert_eq!(entries.len(), 2);
        assert!(dropped);
    }

    #[test]
    fn output_cut_at_the_cap_keeps_only_whole_records() {
        assert_eq!(complete_records(b"a\0bb\0partial"), b"a\0bb\0");
        assert_eq!(complete_records(b"partial"), b"");
        assert_eq!(nul_records(b"a\0\0b\0"), ["a", "", "b"]);
    }

    #[test]
    fn numstat_reads_renames_and_binaries() {
        let out = b"1\t2\tplain\0-\t-\tbin.dat\x000\t0\t\0old name\0new name\0";
        let (files, dropped) = parse_numstat(out, 10).unwrap();
        assert!(!dropped);
        assert_eq!(files.len(), 3);
        assert_eq!((files[0].additions, files[0].deletions), (1, 2));
        assert!(files[1].binary);
        assert_eq!(files[2].path, "new name");
        assert_eq!(files[2].old_path.as_deref(), Some("old name"));
    }

    #[test]
    fn ls_tree_records_keep_spaces_in_paths() {
        let entry =
            parse_ls_tree_record(&format!("100644 blob {SHA}      12\tdir/a b.txt")).unwrap();
        assert_eq!(entry.path, "dir/a b.txt");
        assert_eq!(entry.size, Some(12));
        let tree = parse_ls_tree_record(&format!("040000 tree {SHA}       -\tsub")).unwrap();
        assert_eq!(tree.kind, ObjectKind::Tree);
        assert_eq!(tree.size, None);
    }
}
