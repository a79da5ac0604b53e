//! Snapshots as a runtime reads them.
//!
//! A snapshot directory is trusted only after [`verify_snapshot`] has matched it against its
//! `MANIFEST`: the directory is named by the SHA-256 of `MANIFEST`, every file is listed with its
//! digest, and nothing else may be there. Codex homes are never used in place (Codex writes
//! sessions, logs and state into `CODEX_HOME`): [`materialize`] copies a verified snapshot's homes
//! into a fresh per-session live directory. `profile use` verifies; the session runtime, a later
//! issue, is to call both before starting any app-server.

use crate::diag::{Diags, Rejected};
use crate::model::{PACKAGE_VERSION, SCHEMA_VERSION};
use crate::pack::hex;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A snapshot that matched its MANIFEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The address (SHA-256 of MANIFEST), which is also the directory's name.
    pub address: String,
    /// SHA-256 of every file except MANIFEST, by relative path.
    pub files: BTreeMap<String, String>,
}

/// The live Codex homes of one session, materialized from a verified snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHomes {
    /// The snapshot they came from.
    pub address: String,
    /// The live directory itself.
    pub dir: PathBuf,
    /// `CODEX_HOME` of each role (`<dir>/<role>`), by role id.
    pub homes: BTreeMap<String, PathBuf>,
}

/// Whether `s` is a snapshot address: 64 lowercase hex digits.
pub fn is_address(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `rel` stays inside the directory it is joined to: `/`-separated non-empty segments,
/// none `.` or `..`, not absolute, and no backslash, NUL or line break (a MANIFEST line holds it).
pub fn is_safe_rel(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.contains(['\\', '\0', '\n', '\r'])
        && rel
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// Parse MANIFEST: one `<sha256>  <path>` line per file, sorted, every path safe and unique.
fn parse_manifest(text: &str, file: &str, d: &mut Diags) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut last: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let ok = line.split_once("  ").filter(|(h, p)| {
            is_address(h) && is_safe_rel(p) && *p != "MANIFEST" && last.is_none_or(|l| l < *p)
        });
        match ok {
            Some((h, p)) => {
                out.insert(p.to_string(), h.to_string());
                last = Some(p);
            }
            None => d.push(
                file,
                "",
                "snapshot_manifest_invalid",
                format!(
                    "line {}: not a `<sha256>  <path>` entry in sorted order with a safe, unique path",
                    i + 1
                ),
            ),
        }
    }
    out
}

/// Check a snapshot directory against its MANIFEST. Refuses, each problem naming the path: a
/// directory not named by the MANIFEST's digest (`snapshot_manifest_digest`), a malformed
/// MANIFEST, a modified file, a missing file, an extra file or directory, a symlink or special
/// file, and a snapshot written by another package or schema generation (`record_generation`).
pub fn verify_snapshot(dir: &Path) -> Result<Verified, Rejected> {
    let address = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    if !is_address(&address) {
        return Err(Rejected::one(
            shown(dir),
            "",
            "snapshot_address",
            "a snapshot directory is named by its address (64 lowercase hex digits)",
        ));
    }
    let mpath = dir.join("MANIFEST");
    let manifest = match fs::symlink_metadata(&mpath) {
        Ok(m) if m.is_file() => fs::read(&mpath)
            .map_err(|e| Rejected::one(shown(&mpath), "", "snapshot_unreadable", e.to_string()))?,
        Ok(_) => {
            return Err(Rejected::one(
                shown(&mpath),
                "",
                "snapshot_not_regular",
                "MANIFEST must be a regular file",
            ));
        }
        Err(e) => {
            return Err(Rejected::one(
                shown(&mpath),
                "",
                "snapshot_file_missing",
                format!("no MANIFEST: {e}"),
            ));
        }
    };
    let digest = hex(&Sha256::digest(&manifest));
    if digest != address {
        // Nothing the MANIFEST says can be trusted then.
        return Err(Rejected::one(
            shown(&mpath),
            "",
            "snapshot_manifest_digest",
            format!(
                "MANIFEST hashes to {digest}, not to the snapshot's address {address}; remove {} and compile again",
                shown(dir)
            ),
        ));
    }
    let mut d = Diags::default();
    let text = String::from_utf8_lossy(&manifest);
    let listed = parse_manifest(&text, &shown(&mpath), &mut d);
    // Directories the listed files need; any other directory is extra.
    let mut dirs = BTreeSet::new();
    for p in listed.keys() {
        let mut cur = p.as_str();
        while let Some((parent, _)) = cur.rsplit_once('/') {
            dirs.insert(parent.to_string());
            cur = parent;
        }
    }
    let mut seen = BTreeSet::new();
    let mut snapshot_json = None;
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        let entries = match fs::read_dir(&abs) {
            Ok(e) => e,
            Err(e) => {
                d.push(shown(&abs), "", "snapshot_unreadable", e.to_string());
                continue;
            }
        };
        for e in entries.flatten() {
            let path = e.path();
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                d.push(
                    shown(&path),
                    "",
                    "snapshot_extra_file",
                    "not in MANIFEST (not even UTF-8)",
                );
                continue;
            };
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if r == "MANIFEST" {
                continue;
            }
            let ft = match fs::symlink_metadata(&path) {
                Ok(m) => m.file_type(),
                Err(e) => {
                    d.push(shown(&path), "", "snapshot_unreadable", e.to_string());
                    continue;
                }
            };
            if ft.is_dir() {
                if dirs.contains(&r) {
                    stack.push((path, r));
                } else {
                    d.push(
                        shown(&path),
                        "",
                        "snapshot_extra_file",
                        format!("directory `{r}` is not in MANIFEST"),
                    );
                }
                continue;
            }
            if !ft.is_file() {
                seen.insert(r.clone());
                d.push(
                    shown(&path),
                    "",
                    "snapshot_not_regular",
                    format!(
                        "`{r}` is a symlink or special file; snapshots hold regular files only"
                    ),
                );
                continue;
            }
            let Some(want) = listed.get(&r) else {
                d.push(
                    shown(&path),
                    "",
                    "snapshot_extra_file",
                    format!("`{r}` is not in MANIFEST"),
                );
                continue;
            };
            seen.insert(r.clone());
            match fs::read(&path) {
                Ok(bytes) => {
                    let got = hex(&Sha256::digest(&bytes));
                    if &got != want {
                        d.push(
                            shown(&path),
                            "",
                            "snapshot_file_modified",
                            format!("`{r}` hashes to {got}; MANIFEST says {want}"),
                        );
                    } else if r == "snapshot.json" {
                        snapshot_json = Some(bytes);
                    }
                }
                Err(e) => d.push(shown(&path), "", "snapshot_unreadable", e.to_string()),
            }
        }
    }
    for p in listed.keys().filter(|p| !seen.contains(*p)) {
        d.push(
            shown(&dir.join(p)),
            "",
            "snapshot_file_missing",
            format!("`{p}` is listed in MANIFEST but absent"),
        );
    }
    if let Some(bytes) = snapshot_json {
        check_generation(&dir.join("snapshot.json"), &bytes, &mut d);
    } else if !listed.contains_key("snapshot.json") {
        d.push(
            shown(&dir.join("snapshot.json")),
            "",
            "snapshot_file_missing",
            "every snapshot carries snapshot.json",
        );
    }
    if d.is_empty() {
        Ok(Verified {
            address,
            files: listed,
        })
    } else {
        Err(Rejected(d.into_sorted()))
    }
}

fn check_generation(path: &Path, bytes: &[u8], d: &mut Diags) {
    let v: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            d.push(shown(path), "", "store_record_invalid", e.to_string());
            return;
        }
    };
    let pkg = v["package_version"].as_str().unwrap_or_default();
    let schema = v["schema_version"].as_i64().unwrap_or_default();
    if pkg != PACKAGE_VERSION || schema != SCHEMA_VERSION {
        d.push(
            shown(path),
            "package_version",
            "record_generation",
            format!(
                "snapshot of package {pkg} / schema {schema} is refused; this is {PACKAGE_VERSION} / schema {SCHEMA_VERSION}"
            ),
        );
    }
}

/// Copy the Codex homes of a verified snapshot into the fresh directory `dest` (created here;
/// its parent must exist), one `CODEX_HOME` per role at `<dest>/<role>`: `config.toml`,
/// `AGENTS.md`, the orchestration skill where materialized, and in the root's home its native
/// custom agents. The copies are the session's own, writable, and never shared; the snapshot
/// is verified first and every byte copied is checked against its MANIFEST digest as it is
/// read. On failure `dest` is removed again.
pub fn materialize(snapshot: &Path, dest: &Path) -> Result<LiveHomes, Rejected> {
    let v = verify_snapshot(snapshot)?;
    match fs::create_dir(dest) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Rejected::one(
                shown(dest),
                "",
                "materialize_dest_exists",
                "live homes go into a fresh directory; this one exists",
            ));
        }
        Err(e) => {
            return Err(Rejected::one(
                shown(dest),
                "",
                "materialize_write",
                e.to_string(),
            ));
        }
    }
    let result = copy_homes(snapshot, dest, &v);
    if result.is_err() {
        let _ = fs::remove_dir_all(dest);
    }
    result
}

fn copy_homes(snapshot: &Path, dest: &Path, v: &Verified) -> Result<LiveHomes, Rejected> {
    let mut homes = BTreeMap::new();
    for (rel, want) in &v.files {
        let Some((role, inner)) = rel
            .strip_prefix("roles/")
            .and_then(|r| r.split_once("/codex-home/"))
        else {
            continue;
        };
        let src = snapshot.join(rel);
        let bytes = fs::read(&src)
            .map_err(|e| Rejected::one(shown(&src), "", "snapshot_unreadable", e.to_string()))?;
        if &hex(&Sha256::digest(&bytes)) != want {
            return Err(Rejected::one(
                shown(&src),
                "",
                "snapshot_file_modified",
                format!("`{rel}` changed while it was copied"),
            ));
        }
        let home = dest.join(role);
        let target = home.join(inner);
        let write = |p: &Path| -> std::io::Result<()> {
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(p, &bytes)
        };
        write(&target)
            .map_err(|e| Rejected::one(shown(&target), "", "materialize_write", e.to_string()))?;
        homes.insert(role.to_string(), home);
    }
    Ok(LiveHomes {
        address: v.address.clone(),
        dir: dest.to_path_buf(),
        homes,
    })
}
