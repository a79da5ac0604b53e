//! Installed packs, the active profile and snapshots under `$XDG_DATA_HOME/codex-mmo/`.
//!
//! Layout (every swap is a single `rename`, so a killed install leaves the previous state):
//! - `packs/<content-sha256>/pack/…` and `record.json`: immutable installed copies;
//! - `profiles/<id>`: a symlink to `../packs/<content-sha256>`, replaced atomically;
//! - `snapshots/<address>/`: immutable compiled snapshots;
//! - `active.json`: the profile chosen by `use` and its snapshot address;
//! - `staging/`: work in progress, never read. Every name there carries its owner's pid
//!   (`<kind>-<pid>-<nanos>`), and so does every temporary file (`.<name>.tmp-<pid>`); the next
//!   compile or install removes those whose owner no longer runs (a killed process).
//!
//! Records and selections are data, not trusted paths: a record of another generation, one that
//! does not parse, or one whose digest is not a digest is refused with its path; `list`,
//! `install` and `uninstall` report it as a warning and go on with everything else.

use crate::compile::{CompileReport, Snapshot, compile};
use crate::consent::Consent;
use crate::diag::{Diagnostic, Rejected};
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
    /// The installed link of `id` (a profile id, checked by every caller).
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
    /// When this id is the active profile: the snapshot `use` selected. Installing never moves
    /// the selection; `use` does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_snapshot: Option<String>,
    /// When this id is the active profile: whether the installed content compiles to that same
    /// snapshot (false: `use` again to run the new content).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_snapshot_current: Option<bool>,
    /// Records refused on the way (another generation, unreadable), with their paths.
    pub warnings: Vec<Diagnostic>,
}

/// Installed profiles, the active selection, and what was refused on the way.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Listing {
    pub profiles: Vec<Record>,
    pub active: Option<Active>,
    pub warnings: Vec<Diagnostic>,
}

/// What an uninstall removed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Uninstalled {
    pub profile_id: String,
    pub warnings: Vec<Diagnostic>,
}

/// An installed id as found in the store.
enum Lookup {
    Missing,
    Found(Record, PathBuf),
    /// The link exists but its record is refused; `target` is where the link leads, if anywhere.
    Refused {
        problem: Rejected,
        target: Option<PathBuf>,
    },
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

fn check_record(path: &Path, r: &Record, id: &str) -> Result<(), Rejected> {
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
    // The digest becomes a path component (`packs/<digest>`), so it must be one.
    if !is_address(&r.content_sha256) {
        return Err(Rejected::one(
            path.display().to_string(),
            "content_sha256",
            "store_record_invalid",
            format!("`{}` is not a SHA-256 digest", r.content_sha256),
        ));
    }
    if r.profile_id != id {
        return Err(Rejected::one(
            path.display().to_string(),
            "profile_id",
            "store_record_invalid",
            format!("record of `{}` installed as `{id}`", r.profile_id),
        ));
    }
    Ok(())
}

fn read_record(dir: &Path, id: &str) -> Result<Record, Rejected> {
    let rpath = dir.join("record.json");
    let r: Record = read_json(&rpath)?;
    check_record(&rpath, &r, id)?;
    Ok(r)
}

fn id_arg(id: &str) -> Result<(), Rejected> {
    if is_profile_id(id) {
        Ok(())
    } else {
        Err(Rejected::one(
            "<store>",
            id,
            "profile_id_format",
            format!("`{id}` is not a profile id ([a-z][a-z0-9-]*, at most 64)"),
        ))
    }
}

/// The owner pid a staging name (`<kind>-<pid>-<nanos>`) or a temporary file name
/// (`.<name>.tmp-<pid>`) carries; `None` for a name this build never writes.
fn owner_pid(name: &str) -> Option<u32> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let pid = if name.starts_with('.') {
        name.rsplit_once(".tmp-")?.1
    } else {
        let mut it = name.rsplitn(3, '-');
        let nanos = it.next()?;
        let pid = it.next()?;
        it.next()?;
        if !digits(nanos) {
            return None;
        }
        pid
    };
    if !digits(pid) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` still runs. Without `/proc` every owner counts as running, so nothing is
/// swept. (A pid reused since its owner was killed keeps that staging until the new process
/// ends: the error is toward keeping. A process in another pid namespace sharing this data
/// directory looks gone, though, so one data directory must not span pid namespaces.)
fn pid_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
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
        id_arg(id)?;
        match self.lookup(id) {
            Lookup::Missing => Ok(None),
            Lookup::Found(r, dir) => Ok(Some((r, dir))),
            Lookup::Refused { problem, .. } => Err(problem),
        }
    }

    fn lookup(&self, id: &str) -> Lookup {
        let link = self.dirs.profile_link(id);
        if fs::symlink_metadata(&link).is_err() {
            return Lookup::Missing;
        }
        let dir = match fs::canonicalize(&link) {
            Ok(d) => d,
            Err(e) => {
                return Lookup::Refused {
                    problem: io_err(&link, "store_unreadable", e),
                    target: None,
                };
            }
        };
        match read_record(&dir, id) {
            Ok(r) => Lookup::Found(r, dir.join("pack")),
            Err(problem) => Lookup::Refused {
                problem,
                target: Some(dir),
            },
        }
    }

    /// Remove stale staging: directories, links and temporary files whose owner process is
    /// gone (a killed install or compile). Best effort; staging is never read, so racing
    /// another sweeper is harmless, and a running owner's staging is never touched.
    pub fn sweep_stale(&self) {
        let remove = |p: &Path| match fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => {
                let _ = fs::remove_dir_all(p);
            }
            Ok(_) => {
                let _ = fs::remove_file(p);
            }
            Err(_) => {}
        };
        let staging = self.dirs.data.join("staging");
        for dir in [&staging, &self.dirs.data] {
            let Ok(rd) = fs::read_dir(dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // Outside staging only temporary files are ours to sweep.
                if *dir != staging && !name.starts_with('.') {
                    continue;
                }
                if let Some(pid) = owner_pid(&name)
                    && !pid_alive(pid)
                {
                    remove(&e.path());
                }
            }
        }
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

    /// Where the operator lets pack routes send credentials (`credentials.toml`).
    pub fn consent(&self) -> Result<Consent, Rejected> {
        Consent::load(&self.dirs.config)
    }

    /// Validate a pack with the operator's registry and credential consent.
    pub fn validate(&self, pack: &Pack, binds: &[(String, String)]) -> Result<Validated, Rejected> {
        validate(pack, &self.registry()?, &self.consent()?, binds)
    }

    /// Install `dir`; identical content is a no-op, different content needs `replace`.
    pub fn install(&self, dir: &Path, replace: bool) -> Result<InstallOutcome, Rejected> {
        self.sweep_stale();
        let pack = Pack::load(dir)?;
        let v = self.validate(&pack, &[])?;
        let id = v.profile.id.clone();
        let digest = pack.content_digest();
        let mut warnings = Vec::new();
        // A refused record (another generation, unreadable) is no install of this generation:
        // the id installs afresh and the refused copy is left where it is (only `uninstall`
        // removes it, or a new copy of the very same content taking its address).
        let previous = match self.lookup(&id) {
            Lookup::Missing => None,
            Lookup::Found(r, _) => Some(r),
            Lookup::Refused { problem, .. } => {
                warnings.extend(problem.0);
                None
            }
        };
        if let Some(r) = &previous {
            if r.content_sha256 == digest {
                return Ok(InstallOutcome {
                    profile_id: id,
                    content_sha256: digest,
                    action: "unchanged",
                    active_snapshot: None,
                    active_snapshot_current: None,
                    warnings,
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
        let final_dir = packs.join(&digest);
        // Reuse an existing copy only if its bytes are exactly this content and its record is
        // this generation's; copies only ever appear or disappear by rename, but verifying
        // costs little and guards the invariant.
        let reusable = Pack::load(&final_dir.join("pack"))
            .is_ok_and(|p| p.content_digest() == digest)
            && read_record(&final_dir, &id).is_ok();
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
        if let Some(old) = previous {
            // The old copy is unreachable now; running sessions use snapshots, never packs.
            let _ = self.discard(&staging, &packs.join(old.content_sha256));
        }
        // The selection names an exact snapshot and stays on it (sessions keep their snapshot
        // when profile files are replaced); say whether the new content still compiles to it.
        let (active_snapshot, active_snapshot_current) = match self.active() {
            Ok(Some(a)) if a.profile_id == id => {
                let current = compile(&pack, &v).is_ok_and(|(snap, _)| snap.address == a.snapshot);
                (Some(a.snapshot), Some(current))
            }
            _ => (None, None),
        };
        Ok(InstallOutcome {
            profile_id: id,
            content_sha256: digest,
            action: if had_previous {
                "replaced"
            } else {
                "installed"
            },
            active_snapshot,
            active_snapshot_current,
            warnings,
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
        self.sweep_stale();
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
        if !is_profile_id(&a.profile_id) || !is_address(&a.snapshot) {
            return Err(Rejected::one(
                p.display().to_string(),
                "snapshot",
                "store_record_invalid",
                "the active selection must name a profile id and a snapshot address",
            ));
        }
        Ok(Some(a))
    }

    /// Installed profiles by id, and the active selection. A refused record or selection is a
    /// warning naming its path, never the end of the listing.
    pub fn list(&self) -> Result<Listing, Rejected> {
        let dir = self.dirs.data.join("profiles");
        let mut ids = Vec::new();
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd.flatten() {
                ids.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        ids.sort();
        let mut profiles = Vec::new();
        let mut warnings = Vec::new();
        for id in ids {
            if !is_profile_id(&id) {
                let path = dir.join(&id);
                warnings.extend(
                    Rejected::one(
                        path.display().to_string(),
                        "",
                        "store_unexpected_entry",
                        "not a profile id; codex-mmo never writes this name",
                    )
                    .0,
                );
                continue;
            }
            match self.lookup(&id) {
                Lookup::Found(r, _) => profiles.push(r),
                Lookup::Refused { problem, .. } => warnings.extend(problem.0),
                Lookup::Missing => {}
            }
        }
        let active = match self.active() {
            Ok(a) => a,
            Err(problem) => {
                warnings.extend(problem.0);
                None
            }
        };
        Ok(Listing {
            profiles,
            active,
            warnings,
        })
    }

    /// Remove an installed profile (and the active selection if it pointed there). A refused
    /// record can be removed too: its link goes, and the copy it leads to if that is one of
    /// `packs/`; the record itself is never trusted for a path.
    pub fn uninstall(&self, id: &str) -> Result<Uninstalled, Rejected> {
        id_arg(id)?;
        let packs = self.dirs.data.join("packs");
        let staging = self.dirs.data.join("staging");
        let mut warnings = Vec::new();
        let copy = match self.lookup(id) {
            Lookup::Missing => {
                return Err(Rejected::one(
                    "<store>",
                    id,
                    "profile_not_installed",
                    format!("no installed profile `{id}`"),
                ));
            }
            Lookup::Found(r, _) => Some(packs.join(&r.content_sha256)),
            Lookup::Refused { problem, target } => {
                warnings.extend(problem.0);
                let packs = fs::canonicalize(&packs).ok();
                target.filter(|t| t.parent().is_some() && t.parent() == packs.as_deref())
            }
        };
        let link = self.dirs.profile_link(id);
        fs::remove_file(&link).map_err(|e| io_err(&link, "store_write", e))?;
        if let Some(copy) = copy {
            let _ = self.discard(&staging, &copy);
        }
        if self
            .active()
            .ok()
            .flatten()
            .is_some_and(|a| a.profile_id == id)
        {
            let _ = fs::remove_file(self.dirs.data.join("active.json"));
        }
        Ok(Uninstalled {
            profile_id: id.to_string(),
            warnings,
        })
    }
}
