//! Pack loading: the exact on-disk layout of the spec, read into memory once.
//!
//! Everything after this module works on the in-memory copy, so a pack changed on disk while it
//! is validated cannot make validation and compilation disagree.

use crate::diag::{Diags, Rejected};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Largest file a pack may hold; packs are small text compositions, never data.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Top-level files a pack may contain.
const TOP_FILES: &[&str] = &[
    "profile.toml",
    "README.md",
    "LICENSE",
    "catalog.toml",
    "smoke.toml",
];
/// Top-level directories and the one suffix each admits.
const TOP_DIRS: &[(&str, &str)] = &[("agents", ".md"), ("contracts", ".json")];

/// A pack read from disk: every member's bytes keyed by its relative `/`-separated path.
#[derive(Debug, Clone)]
pub struct Pack {
    /// Where it was read from (for messages only; never part of identity).
    pub source: PathBuf,
    /// Members by relative path.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Pack {
    /// Read and check a pack directory. Returns every layout problem at once.
    pub fn load(dir: &Path) -> Result<Pack, Rejected> {
        let mut d = Diags::default();
        let mut files = BTreeMap::new();
        let meta = match fs::symlink_metadata(dir) {
            Ok(m) => m,
            Err(e) => {
                return Err(Rejected::one(
                    dir.display().to_string(),
                    "",
                    "pack_unreadable",
                    format!("cannot read pack directory: {e}"),
                ));
            }
        };
        if !meta.is_dir() {
            return Err(Rejected::one(
                dir.display().to_string(),
                "",
                "pack_not_directory",
                "a pack is a directory (symlinks are not followed)",
            ));
        }
        let entries = match sorted_entries(dir) {
            Ok(e) => e,
            Err(e) => {
                return Err(Rejected::one(
                    dir.display().to_string(),
                    "",
                    "pack_unreadable",
                    e.to_string(),
                ));
            }
        };
        for (name, path) in entries {
            let Some(m) = check_member(&path, &name, &mut d) else {
                continue;
            };
            if m.is_dir() {
                let Some((_, suffix)) = TOP_DIRS.iter().find(|(n, _)| *n == name) else {
                    d.push(
                        &name,
                        "",
                        "pack_unknown_member",
                        format!("`{name}/` is not a pack member (allowed: agents/, contracts/)"),
                    );
                    continue;
                };
                match sorted_entries(&path) {
                    Ok(inner) => {
                        for (iname, ipath) in inner {
                            let rel = format!("{name}/{iname}");
                            let Some(im) = check_member(&ipath, &rel, &mut d) else {
                                continue;
                            };
                            if im.is_dir() {
                                d.push(
                                    &rel,
                                    "",
                                    "pack_nested_directory",
                                    format!("`{name}/` holds files only, not directories"),
                                );
                            } else if !iname.ends_with(suffix) || iname.len() == suffix.len() {
                                d.push(
                                    &rel,
                                    "",
                                    "pack_unsupported_suffix",
                                    format!("`{name}/` admits only *{suffix} files"),
                                );
                            } else {
                                read_member(&ipath, &rel, &im, &mut files, &mut d);
                            }
                        }
                    }
                    Err(e) => d.push(&name, "", "pack_unreadable", e.to_string()),
                }
            } else if TOP_FILES.contains(&name.as_str()) {
                read_member(&path, &name, &m, &mut files, &mut d);
            } else {
                let rule = if TOP_DIRS.iter().any(|(n, _)| *n == name) {
                    "pack_unknown_member"
                } else if has_script_suffix(&name) {
                    "pack_script"
                } else {
                    "pack_unknown_member"
                };
                d.push(
                    &name,
                    "",
                    rule,
                    format!(
                        "`{name}` is not a pack member (allowed: {}, agents/, contracts/)",
                        TOP_FILES.join(", ")
                    ),
                );
            }
        }
        // A profile.toml that exists but was rejected already has its own diagnostic.
        if dir.join("profile.toml").symlink_metadata().is_err() {
            d.push(
                "profile.toml",
                "",
                "pack_missing_file",
                "every pack needs profile.toml",
            );
        }
        if d.is_empty() {
            Ok(Pack {
                source: dir.to_path_buf(),
                files,
            })
        } else {
            Err(Rejected(d.into_sorted()))
        }
    }

    /// UTF-8 text of a member, if present.
    pub fn text(&self, rel: &str) -> Option<&str> {
        self.files
            .get(rel)
            .and_then(|b| std::str::from_utf8(b).ok())
    }

    /// SHA-256 over the members' paths and bytes: identical content gives identical digests.
    pub fn content_digest(&self) -> String {
        let mut h = Sha256::new();
        for (p, b) in &self.files {
            // Length prefixes keep (path, bytes) boundaries unambiguous.
            h.update((p.len() as u64).to_be_bytes());
            h.update(p.as_bytes());
            h.update((b.len() as u64).to_be_bytes());
            h.update(b);
        }
        hex(&h.finalize())
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        out.push((name, e.path()));
    }
    out.sort();
    Ok(out)
}

fn has_script_suffix(name: &str) -> bool {
    const SCRIPT: &[&str] = &[
        ".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".ts", ".rb", ".pl", ".ps1", ".bat", ".cmd",
        ".exe",
    ];
    SCRIPT.iter().any(|s| name.ends_with(s))
}

/// Reject symlinks and special files; return metadata of regular files and directories.
fn check_member(path: &Path, rel: &str, d: &mut Diags) -> Option<fs::Metadata> {
    let m = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            d.push(rel, "", "pack_unreadable", e.to_string());
            return None;
        }
    };
    let ft = m.file_type();
    if ft.is_symlink() {
        d.push(
            rel,
            "",
            "pack_symlink",
            "symlinks are not allowed in a pack",
        );
        return None;
    }
    if !ft.is_file() && !ft.is_dir() {
        d.push(
            rel,
            "",
            "pack_special_file",
            "only regular files and directories are allowed",
        );
        return None;
    }
    Some(m)
}

fn read_member(
    path: &Path,
    rel: &str,
    m: &fs::Metadata,
    files: &mut BTreeMap<String, Vec<u8>>,
    d: &mut Diags,
) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if m.permissions().mode() & 0o111 != 0 {
            d.push(
                rel,
                "",
                "pack_executable",
                "pack files must not be executable",
            );
            return;
        }
    }
    if m.len() > MAX_FILE_BYTES {
        d.push(
            rel,
            "",
            "pack_file_too_large",
            format!(
                "{} bytes exceeds the {MAX_FILE_BYTES}-byte member limit",
                m.len()
            ),
        );
        return;
    }
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            d.push(rel, "", "pack_unreadable", e.to_string());
            return;
        }
    };
    if bytes.starts_with(b"#!") {
        d.push(
            rel,
            "",
            "pack_script",
            "a file starting with `#!` is a script; packs are not executable",
        );
        return;
    }
    if std::str::from_utf8(&bytes).is_err() {
        d.push(rel, "", "pack_not_utf8", "pack files are UTF-8 text");
        return;
    }
    files.insert(rel.to_string(), bytes);
}

/// Normalize a pack-relative reference (`./agents/x.md` → `agents/x.md`), rejecting absolute
/// paths and anything that leaves the pack.
pub fn normalize_ref(s: &str) -> Result<String, &'static str> {
    if s.is_empty() {
        return Err("empty path");
    }
    if s.starts_with('/') || s.starts_with('\\') || s.contains('\\') || s.contains(':') {
        return Err("absolute or non-portable path");
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err("path escapes the pack"),
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Err("empty path");
    }
    Ok(parts.join("/"))
}
