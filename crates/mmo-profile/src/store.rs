//! Installed packs, the active profile and snapshots under `$XDG_DATA_HOME/codex-mmo/`.
//!
//! Layout (every swap is a single `rename`, so a killed install leaves the previous state):
//! - `packs/<content-sha256>/pack/…` and `record.json`: immutable installed copies;
//! - `profiles/<id>`: a symlink to `../packs/<content-sha256>`, replaced atomically;
//! - `snapshots/<address>/`: immutable compiled snapshots;
//! - `active.json`: the profile chosen by `use` and its snapshot address;
//! - `staging/`: work in progress, never read.

use crate::compile::{CompileReport, Snapshot, compile};
use crate::diag::Rejected;
use crate::model::{PACKAGE_VERSION, SCHEMA_VERSION};
use crate::pack::Pack;
use crate::parse::is_profile_id;
use crate::snapshot::{Verified, is_address, is_safe_rel, verify_snapshot};
use crate::toolmcp::Registry;
use crate::validate::{Validated, validate};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where state and operator configuration live.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub data: PathBuf,
    pub config: PathBuf,
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Dirs {
    /// Resolve from `CODEX_MMO_DATA_DIR`/`CODEX_MMO_CONFIG_DIR`, else the XDG variables, else HOME.
    pub fn from_env() -> Result<Dirs, Rejected> {
        let home = env_dir("HOME");
        let data = env_dir("CODEX_MMO_DATA_DIR")
            .or_else(|| env_dir("XDG_DATA_HOME").map(|d| d.join("codex-mmo")))
            .or_else(|| home.as_ref().map(|h| h.join(".local/share/codex-mmo")));
        let config = env_dir("CODEX_MMO_CONFIG_DIR")
            .or_else(|| env_dir("XDG_CONFIG_HOME").map(|d| d.join("codex-mmo")))
            .or_else(|| home.as_ref().map(|h| h.join(".config/codex-mmo")));
        match (data, config) {
            (Some(data), Some(config)) => Ok(Dirs { data, config }),
            _ => Err(Rejected::one(
                "<environment>",
                "",
                "store_no_home",
                "set XDG_DATA_HOME and XDG_CONFIG_HOME (or HOME)",
            )),
        }
    }

    /// The operator Tool MCP registry directory.
    pub fn tool_mcp_dir(&self) -> PathBuf {
        self.config.join("tool-mcp.d")
    }
    fn profile_link(&self, id: &str) -> PathBuf {
        self.data.join("profiles").join(id)
    }
    /// Directory of one snapshot.
    pub fn snapshot_dir(&self, address: &str) -> PathBuf {
        self.data.join("snapshots").join(address)
    }
}

/// The stamp written beside every installed pack.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub package_version: String,
    pub schema_version: i64,
    pub profile_id: String,
    pub content_sha256: String,
}

/// The `use` selection.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Active {
    pub package_version: String,
    pub profile_id: String,
    pub snapshot: String,
}

/// What an install did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InstallOutcome {
    pub profile_id: String,
    pub content_sha256: String,
    /// `installed`, `unchanged` or `replaced`.
    pub action: &'static str,
}

fn io_err(path: &Path, rule: &'static str, e: impl std::fmt::Display) -> Rejected {
    Rejected::one(path.display().to_string(), "", rule, e.to_string())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, Rejected> {
    let bytes = fs::read(path).map_err(|e| io_err(path, "store_unreadable", e))?;
    serde_json::from_slice(&bytes).map_err(|e| io_err(path, "store_record_invalid", e))
}

/// Write a file durably under a temporary name, then rename it into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Rejected> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| io_err(dir, "store_write", e))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("f"),
        std::process::id()
    ));
    let mut f = fs::File::create(&tmp).map_err(|e| io_err(&tmp, "store_write", e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| io_err(&tmp, "store_write", e))?;
    fs::rename(&tmp, path).map_err(|e| io_err(path, "store_write", e))
}

fn check_record(path: &Path, r: &Record) -> Result<(), Rejected> {
    if r.package_version != PACKAGE_VERSION || r.schema_version != SCHEMA_VERSION {
        return Err(Rejected::one(
            path.display().to_string(),
            "package_version",
            "record_generation",
            format!(
                "record of package {} / schema {} is refused; this is {PACKAGE_VERSION} / schema {SCHEMA_VERSION} (historical state is never adopted)",
                r.package_version, r.schema_version
            ),
        ));
    }
    Ok(())
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

/// The store.
pub struct Store {
    pub dirs: Dirs,
}

impl Store {
    /// A store over these directories (nothing is created until written).
    pub fn new(dirs: Dirs) -> Store {
        Store { dirs }
    }

    /// The operator registry.
    pub fn registry(&self) -> Result<Registry, Rejected> {
        Registry::load(&self.dirs.tool_mcp_dir())
    }

    /// The installed record of `id`, refusing other generations.
    pub fn record(&self, id: &str) -> Result<Option<(Record, PathBuf)>, Rejected> {
        let link = self.dirs.profile_link(id);
        if fs::symlink_metadata(&link).is_err() {
            return Ok(None);
        }
        let dir = fs::canonicalize(&link).map_err(|e| io_err(&link, "store_unreadable", e))?;
        let rpath = dir.join("record.json");
        let r: Record = read_json(&rpath)?;
        check_record(&rpath, &r)?;
        Ok(Some((r, dir.join("pack"))))
    }

    /// Load a pack named by installed id or by directory path.
    pub fn load_target(&self, target: &str) -> Result<Pack, Rejected> {
        let as_path = Path::new(target);
        if target.contains('/')
            || target.starts_with('.')
            || (!is_profile_id(target) && as_path.is_dir())
        {
            return Pack::load(as_path);
        }
        match self.record(target)? {
            Some((_, dir)) => Pack::load(&dir),
            None => Err(Rejected::one(
                "<store>",
                target,
                "profile_not_installed",
                format!(
                    "no installed profile `{target}` (pass a directory path to use a pack in place)"
                ),
            )),
        }
    }

    /// Validate a pack with the operator registry.
    pub fn validate(&self, pack: &Pack, binds: &[(String, String)]) -> Result<Validated, Rejected> {
        let reg = self.registry()?;
        validate(pack, &reg, binds)
    }

    /// Install `dir`; identical content is a no-op, different content needs `replace`.
    pub fn install(&self, dir: &Path, replace: bool) -> Result<InstallOutcome, Rejected> {
        let pack = Pack::load(dir)?;
        let v = self.validate(&pack, &[])?;
        let id = v.profile.id.clone();
        let digest = pack.content_digest();
        let previous = self.record(&id)?;
        if let Some((r, _)) = &previous {
            if r.content_sha256 == digest {
                return Ok(InstallOutcome {
                    profile_id: id,
                    content_sha256: digest,
                    action: "unchanged",
                });
            }
            if !replace {
                return Err(Rejected::one(
                    dir.display().to_string(),
                    "",
                    "install_exists",
                    format!(
                        "`{id}` is installed with different content; pass --replace to swap it"
                    ),
                ));
            }
        }
        let staging = self.dirs.data.join("staging");
        let packs = self.dirs.data.join("packs");
        let profiles = self.dirs.data.join("profiles");
        for d in [&staging, &packs, &profiles] {
            fs::create_dir_all(d).map_err(|e| io_err(d, "store_write", e))?;
        }
        self.sweep_trash(&staging);
        let final_dir = packs.join(&digest);
        // Reuse an existing copy only if its bytes are exactly this content; copies only ever
        // appear or disappear by rename, but verifying costs little and guards the invariant.
        let reusable = Pack::load(&final_dir.join("pack"))
            .is_ok_and(|p| p.content_digest() == digest)
            && final_dir.join("record.json").is_file();
        if !reusable {
            let stage = staging.join(format!("{digest}-{}", unique_suffix()));
            self.stage_pack(&stage, &pack, &id, &digest)?;
            // Validate the staged copy itself: what is swapped in is exactly what was checked.
            let staged = Pack::load(&stage.join("pack"))?;
            self.validate(&staged, &[])?;
            if final_dir.exists() {
                self.discard(&staging, &final_dir)?;
            }
            fs::rename(&stage, &final_dir).map_err(|e| io_err(&final_dir, "store_write", e))?;
        }
        let had_previous = previous.is_some();
        let tmp_link = staging.join(format!("link-{}", unique_suffix()));
        #[cfg(unix)]
        std::os::unix::fs::symlink(Path::new("../packs").join(&digest), &tmp_link)
            .map_err(|e| io_err(&tmp_link, "store_write", e))?;
        fs::rename(&tmp_link, self.dirs.profile_link(&id))
            .map_err(|e| io_err(&profiles, "store_write", e))?;
        if let Some((old, _)) = previous {
            // The old copy is unreachable now; running sessions use snapshots, never packs.
            let _ = self.discard(&staging, &packs.join(old.content_sha256));
        }
        Ok(InstallOutcome {
            profile_id: id,
            content_sha256: digest,
            action: if had_previous {
                "replaced"
            } else {
                "installed"
            },
        })
    }

    /// Remove a directory without ever exposing a half-deleted copy under its name: it is
    /// renamed into the staging area first, so a kill mid-delete leaves only unread trash.
    fn discard(&self, staging: &Path, dir: &Path) -> Result<(), Rejected> {
        fs::create_dir_all(staging).map_err(|e| io_err(staging, "store_write", e))?;
        let trash = staging.join(format!("trash-{}", unique_suffix()));
        match fs::rename(dir, &trash) {
            Ok(()) => {
                let _ = fs::remove_dir_all(&trash);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(dir, "store_write", e)),
        }
    }

    /// Best-effort removal of trash left by killed processes (never read, so racing is harmless).
    fn sweep_trash(&self, staging: &Path) {
        if let Ok(rd) = fs::read_dir(staging) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("trash-") {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }

    fn stage_pack(
        &self,
        stage: &Path,
        pack: &Pack,
        id: &str,
        digest: &str,
    ) -> Result<(), Rejected> {
        for (rel, bytes) in &pack.files {
            let p = stage.join("pack").join(rel);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).map_err(|e| io_err(parent, "store_write", e))?;
            }
            let mut f = fs::File::create(&p).map_err(|e| io_err(&p, "store_write", e))?;
            f.write_all(bytes)
                .and_then(|_| f.sync_all())
                .map_err(|e| io_err(&p, "store_write", e))?;
        }
        let record = Record {
            package_version: PACKAGE_VERSION.into(),
            schema_version: SCHEMA_VERSION,
            profile_id: id.into(),
            content_sha256: digest.into(),
        };
        let mut bytes = serde_json::to_vec_pretty(&record).unwrap_or_default();
        bytes.push(b'\n');
        // record.json is written last: its presence marks a complete copy.
        write_atomic(&stage.join("record.json"), &bytes)
    }

    /// Compile a target and materialize its snapshot (a no-op when the address exists).
    pub fn compile(
        &self,
        target: &str,
        binds: &[(String, String)],
    ) -> Result<CompileReport, Rejected> {
        let pack = self.load_target(target)?;
        let v = self.validate(&pack, binds)?;
        let (snap, report) = compile(&pack, &v)?;
        self.write_snapshot(&snap)?;
        Ok(report)
    }

    /// Write a snapshot directory atomically; an existing address is left untouched, but it
    /// must still match its MANIFEST. Every path is checked before anything is written: the
    /// address must be one and no file may leave the snapshot.
    pub fn write_snapshot(&self, snap: &Snapshot) -> Result<PathBuf, Rejected> {
        if !is_address(&snap.address) {
            return Err(Rejected::one(
                "<snapshot>",
                snap.address.clone(),
                "snapshot_path_unsafe",
                "a snapshot address is 64 lowercase hex digits",
            ));
        }
        if let Some(bad) = snap.files.keys().find(|rel| !is_safe_rel(rel)) {
            return Err(Rejected::one(
                "<snapshot>",
                bad.clone(),
                "snapshot_path_unsafe",
                format!("`{bad}` would leave the snapshot directory"),
            ));
        }
        let dest = self.dirs.snapshot_dir(&snap.address);
        if dest.join("MANIFEST").exists() {
            verify_snapshot(&dest)?;
            return Ok(dest);
        }
        let staging = self.dirs.data.join("staging");
        let stage = staging.join(format!("snap-{}-{}", snap.address, unique_suffix()));
        for (rel, bytes) in &snap.files {
            let p = stage.join(rel);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).map_err(|e| io_err(parent, "store_write", e))?;
            }
            fs::write(&p, bytes).map_err(|e| io_err(&p, "store_write", e))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o444));
            }
        }
        let parent = dest.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(|e| io_err(parent, "store_write", e))?;
        if let Err(e) = fs::rename(&stage, &dest) {
            // Another process may have won the race with identical content.
            let _ = fs::remove_dir_all(&stage);
            if !dest.join("MANIFEST").exists() {
                return Err(io_err(&dest, "store_write", e));
            }
        }
        Ok(dest)
    }

    /// Select `id` as active, compiling it so the selection names an exact snapshot.
    pub fn use_profile(&self, id: &str) -> Result<Active, Rejected> {
        if self.record(id)?.is_none() {
            return Err(Rejected::one(
                "<store>",
                id,
                "profile_not_installed",
                format!("no installed profile `{id}`"),
            ));
        }
        let report = self.compile(id, &[])?;
        self.verify(&report.address)?;
        let active = Active {
            package_version: PACKAGE_VERSION.into(),
            profile_id: id.into(),
            snapshot: report.address,
        };
        let mut bytes = serde_json::to_vec_pretty(&active).unwrap_or_default();
        bytes.push(b'\n');
        write_atomic(&self.dirs.data.join("active.json"), &bytes)?;
        Ok(active)
    }

    /// Verify the stored snapshot `address` against its MANIFEST (what `use`, and later `run`,
    /// do before using it).
    pub fn verify(&self, address: &str) -> Result<Verified, Rejected> {
        if !is_address(address) {
            return Err(Rejected::one(
                "<store>",
                address,
                "snapshot_address",
                "a snapshot address is 64 lowercase hex digits",
            ));
        }
        verify_snapshot(&self.dirs.snapshot_dir(address))
    }

    /// The active selection, refusing other generations.
    pub fn active(&self) -> Result<Option<Active>, Rejected> {
        let p = self.dirs.data.join("active.json");
        if !p.exists() {
            return Ok(None);
        }
        let a: Active = read_json(&p)?;
        if a.package_version != PACKAGE_VERSION {
            return Err(Rejected::one(
                p.display().to_string(),
                "package_version",
                "record_generation",
                format!(
                    "active selection of package {} is refused",
                    a.package_version
                ),
            ));
        }
        Ok(Some(a))
    }

    /// Installed ids, sorted.
    pub fn list(&self) -> Result<Vec<Record>, Rejected> {
        let dir = self.dirs.data.join("profiles");
        let mut ids = Vec::new();
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd.flatten() {
                ids.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        ids.sort();
        let mut out = Vec::new();
        for id in ids {
            if let Some((r, _)) = self.record(&id)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Remove an installed profile (and the active selection if it pointed there).
    pub fn uninstall(&self, id: &str) -> Result<Record, Rejected> {
        let Some((r, _)) = self.record(id)? else {
            return Err(Rejected::one(
                "<store>",
                id,
                "profile_not_installed",
                format!("no installed profile `{id}`"),
            ));
        };
        let link = self.dirs.profile_link(id);
        fs::remove_file(&link).map_err(|e| io_err(&link, "store_write", e))?;
        let _ = self.discard(
            &self.dirs.data.join("staging"),
            &self.dirs.data.join("packs").join(&r.content_sha256),
        );
        if self
            .active()
            .ok()
            .flatten()
            .is_some_and(|a| a.profile_id == id)
        {
            let _ = fs::remove_file(self.dirs.data.join("active.json"));
        }
        Ok(r)
    }
}
