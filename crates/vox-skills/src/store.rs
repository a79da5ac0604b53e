//! Discovery roots, the loaded catalog of skills with its search index, and the workspace store
//! that `install` copies into and `uninstall` removes from.

use crate::manifest::{self, Manifest, Problem};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most files a skill directory may hold.
pub const MAX_SKILL_FILES: usize = 1_000;
/// Most bytes a skill directory may hold.
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// Deepest directory nesting inside a skill.
pub const MAX_SKILL_DEPTH: usize = 16;
/// Most skills loaded from all roots together.
pub const MAX_SKILLS: usize = 10_000;
/// Most bytes of `SKILL.md` loaded from all roots together.
pub const MAX_CATALOG_BYTES: u64 = 64 * 1024 * 1024;
/// Staging directories of an install older than this are leftovers of a crash: removed at hydrate.
const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(600);

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `<workspace>/.vox/skills`: the store `vox_skill_install` writes.
    Workspace,
    /// `<workspace>/skills`: the skills a project ships in its repository.
    Project,
    /// `~/.vox/skills` (or `$VOX_HOME/skills`).
    Home,
    /// A directory of `VOX_SKILL_PATH`.
    SkillPath,
}

/// The search roots, in precedence order (the first root holding an id wins).
#[derive(Debug, Clone)]
pub struct Roots {
    /// `<workspace>/.vox/skills`: where installs go; first in precedence.
    pub workspace: PathBuf,
    /// `<workspace>/skills`; only its subdirectories holding a `SKILL.md` count, so a project's
    /// unrelated `skills/` folder adds no load errors.
    pub project: Option<PathBuf>,
    /// `$VOX_HOME/skills` or `~/.vox/skills`: the user's skills for every workspace.
    pub home: Option<PathBuf>,
    /// The directories of `VOX_SKILL_PATH`, in order; last in precedence.
    pub extra: Vec<PathBuf>,
}

impl Roots {
    /// `<workspace>/.vox/skills`, `<workspace>/skills`, `$VOX_HOME/skills` or `~/.vox/skills`,
    /// then each directory of `VOX_SKILL_PATH` (`:`-separated). The daemon and `vox skill list`
    /// both use this, so they serve one catalog.
    pub fn from_env(workspace_root: &Path) -> Self {
        let home = std::env::var_os("VOX_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".vox")))
            .map(|h| h.join("skills"));
        let extra = std::env::var_os("VOX_SKILL_PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Roots {
            workspace: workspace_root.join(".vox").join("skills"),
            project: Some(workspace_root.join("skills")),
            home,
            extra,
        }
    }

    fn all(&self) -> Vec<(Origin, &Path)> {
        let mut v = vec![(Origin::Workspace, self.workspace.as_path())];
        if let Some(p) = &self.project {
            v.push((Origin::Project, p.as_path()));
        }
        if let Some(h) = &self.home {
            v.push((Origin::Home, h.as_path()));
        }
        v.extend(self.extra.iter().map(|p| (Origin::SkillPath, p.as_path())));
        v
    }
}

/// An installed (or discovered) skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// The skill's id (its manifest name and directory name).
    pub id: String,
    /// The parsed `SKILL.md` front matter and body.
    pub manifest: Manifest,
    /// The directory the skill was loaded from.
    pub dir: PathBuf,
    /// Which root the skill came from.
    pub origin: Origin,
    /// The whole `SKILL.md`, served as `skill://{id}/SKILL.md`.
    pub source: String,
}

/// A skill directory that did not load, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LoadError {
    /// The skill directory that failed to load.
    pub path: String,
    /// Everything wrong with its `SKILL.md`.
    pub problems: Vec<Problem>,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.problems.iter().map(|p| p.to_string()).collect();
        write!(f, "{}: {}", self.path, parts.join("; "))
    }
}

/// A skill id also found in a root of lower precedence, which is therefore not served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Shadowed {
    /// The id served from a root of higher precedence.
    pub id: String,
    /// The directory of the copy that is not served.
    pub path: String,
}

/// Why an install, uninstall or lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The skill or the request is malformed: a bad id or `SKILL.md`, a symbolic link or a
    /// special file, a tree too deep or too large.
    #[error("{0}")]
    Invalid(String),
    /// No installed skill has the id.
    #[error("{0}")]
    NotFound(String),
    /// The install would clobber an installed skill (without `replace`) or the copy is the source
    /// itself.
    #[error("{0}")]
    Conflict(String),
    /// Reading, copying or removing files failed, or the search index did.
    #[error("{0}")]
    Io(String),
}

/// A search hit.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchHit {
    /// The skill's id.
    pub id: String,
    /// BM25 relevance score; higher is better.
    pub score: f32,
    /// The skill's description.
    pub description: String,
    /// The best-matching passage, with matched terms in `**`.
    pub snippet: String,
}

/// Every skill the roots hold, with the BM25 index over them. Immutable: a change builds a new
/// catalog, so readers never see a half-updated one.
pub struct Catalog {
    /// Every served skill by id (the copy in the highest-precedence root).
    pub skills: BTreeMap<String, Arc<Skill>>,
    /// Skill directories that did not load.
    pub errors: Vec<LoadError>,
    /// Ids also present in lower-precedence roots, whose copies are not served.
    pub shadowed: Vec<Shadowed>,
    index: vox_search::DocIndex,
}

impl Catalog {
    /// Loads every skill of every root; a malformed skill is reported and the rest load.
    pub fn hydrate(roots: &Roots) -> Catalog {
        sweep_stale_staging(&roots.workspace);
        let mut skills: BTreeMap<String, Arc<Skill>> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut shadowed = Vec::new();
        let mut loaded_bytes = 0u64;
        let report = |path: &Path, message: String| LoadError {
            path: path.display().to_string(),
            problems: vec![Problem {
                line: None,
                message,
            }],
        };
        'roots: for (origin, root) in roots.all() {
            let Ok(entries) = std::fs::read_dir(root) else {
                continue; // a root that does not exist holds no skills
            };
            let mut dirs = Vec::new();
            for entry in entries.filter_map(Result::ok) {
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                match entry.file_type() {
                    Ok(t) if t.is_dir() => {
                        let path = entry.path();
                        let skill_md = std::fs::symlink_metadata(path.join("SKILL.md"));
                        if origin != Origin::Project || skill_md.is_ok() {
                            dirs.push(path);
                        }
                    }
                    Ok(t) if t.is_symlink() => errors.push(report(
                        &entry.path(),
                        "is a symbolic link; a skill must be a directory in its root".into(),
                    )),
                    _ => {}
                }
            }
            dirs.sort();
            for dir in dirs {
                if skills.len() + shadowed.len() >= MAX_SKILLS || loaded_bytes > MAX_CATALOG_BYTES {
                    errors.push(report(
                        root,
                        format!(
                            "skill limit reached ({MAX_SKILLS} skills or {MAX_CATALOG_BYTES} bytes); {} and the skills after it were not loaded",
                            dir.display()
                        ),
                    ));
                    break 'roots;
                }
                match load_dir(&dir, origin) {
                    Ok(skill) if skills.contains_key(&skill.id) => shadowed.push(Shadowed {
                        id: skill.id,
                        path: dir.display().to_string(),
                    }),
                    Ok(skill) => {
                        loaded_bytes += skill.source.len() as u64;
                        skills.insert(skill.id.clone(), Arc::new(skill));
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
        let index = vox_search::DocIndex::new().expect("an in-RAM index always opens");
        let docs = skills.values().map(|s| {
            let m = &s.manifest;
            let title = format!("{} {} {}", s.id, s.id.replace('-', " "), m.tags.join(" "));
            let body = format!("{}\n{}", m.description, m.body);
            (s.id.clone(), title, body)
        });
        if let Err(e) = index.upsert_many(docs) {
            errors.push(LoadError {
                path: roots.workspace.display().to_string(),
                problems: vec![Problem {
                    line: None,
                    message: format!("search index: {e}"),
                }],
            });
        }
        Catalog {
            skills,
            errors,
            shadowed,
            index,
        }
    }

    /// BM25 search over id, name, tags (boosted), description and body.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SkillError> {
        let hits = self
            .index
            .search(query, limit)
            .map_err(|e| SkillError::Io(format!("skill search failed: {e}")))?;
        Ok(hits
            .into_iter()
            .filter_map(|h| {
                let s = self.skills.get(&h.id)?;
                Some(SearchHit {
                    id: h.id,
                    score: h.score,
                    description: s.manifest.description.clone(),
                    snippet: h.snippet,
                })
            })
            .collect())
    }

    /// The skill with this id.
    pub fn get(&self, id: &str) -> Result<&Arc<Skill>, SkillError> {
        self.skills
            .get(id)
            .ok_or_else(|| SkillError::NotFound(format!("no installed skill {id:?}")))
    }
}

/// Loads one skill directory (its `SKILL.md`), checking the whole tree's size limits.
pub fn load_dir(dir: &Path, origin: Origin) -> Result<Skill, LoadError> {
    let fail = |message: String| LoadError {
        path: dir.display().to_string(),
        problems: vec![Problem {
            line: None,
            message,
        }],
    };
    let dir_name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| fail("the directory name is not UTF-8".into()))?;
    let skill_md = dir.join("SKILL.md");
    let bytes = read_skill_md(&skill_md).map_err(fail)?;
    skill_from_bytes(dir, dir_name, origin, &bytes)
}

/// Parses already-read `SKILL.md` bytes into the skill living in `dir`.
fn skill_from_bytes(
    dir: &Path,
    dir_name: &str,
    origin: Origin,
    bytes: &[u8],
) -> Result<Skill, LoadError> {
    let manifest = manifest::parse(bytes, dir_name).map_err(|problems| LoadError {
        path: dir.join("SKILL.md").display().to_string(),
        problems,
    })?;
    Ok(Skill {
        id: manifest.name.clone(),
        manifest,
        dir: dir.to_path_buf(),
        origin,
        source: String::from_utf8_lossy(bytes).into_owned(),
    })
}

/// Opens a regular file without following a symbolic link at its last component (a link
/// swapped in after a check must not be read through).
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// Reads a `SKILL.md`: a regular file (not a link) of at most the size limit.
fn read_skill_md(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = open_regular(path).map_err(|e| format!("no readable SKILL.md ({e})"))?;
    let limit = manifest::MAX_SKILL_MD_BYTES as u64;
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read SKILL.md: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "SKILL.md is larger than the limit of {limit} bytes"
        ));
    }
    Ok(bytes)
}

/// Removes install staging directories (`.tmp-*`) a crash left in the store.
fn sweep_stale_staging(store: &Path) {
    let Ok(entries) = std::fs::read_dir(store) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let stale = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_STAGING);
        if e.file_name().to_string_lossy().starts_with(".tmp-") && stale {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Walks a skill directory: calls `on_dir` for each directory and `on_file` for each regular file
/// (relative paths, parents first), refusing symlinks, special files, and trees over the limits.
/// `on_file` gets the bytes still allowed and returns the bytes it took. `.git` is left out.
fn walk_tree(
    dir: &Path,
    mut on_dir: impl FnMut(&Path) -> Result<(), SkillError>,
    mut on_file: impl FnMut(&Path, u64) -> Result<u64, SkillError>,
) -> Result<(), SkillError> {
    let mut files = 0usize;
    let mut total = 0u64;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        if depth > MAX_SKILL_DEPTH {
            return Err(SkillError::Invalid(format!(
                "{} is nested deeper than {MAX_SKILL_DEPTH} directories",
                rel.display()
            )));
        }
        let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir.join(&rel))
            .map_err(|e| SkillError::Io(format!("cannot read {}: {e}", dir.join(&rel).display())))?
            .collect::<Result<_, _>>()
            .map_err(|e| SkillError::Io(e.to_string()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            if rel.as_os_str().is_empty() && name == ".git" {
                continue;
            }
            let path = rel.join(&name);
            let t = entry
                .file_type()
                .map_err(|e| SkillError::Io(e.to_string()))?;
            if t.is_symlink() {
                return Err(SkillError::Invalid(format!(
                    "{} is a symbolic link; a skill must hold plain files only",
                    path.display()
                )));
            } else if t.is_dir() {
                on_dir(&path)?;
                stack.push((path, depth + 1));
            } else if t.is_file() {
                files += 1;
                if files > MAX_SKILL_FILES {
                    return Err(SkillError::Invalid(format!(
                        "the skill holds more than {MAX_SKILL_FILES} files"
                    )));
                }
                total += on_file(&path, MAX_SKILL_BYTES.saturating_sub(total))?;
                if total > MAX_SKILL_BYTES {
                    return Err(SkillError::Invalid(format!(
                        "the skill holds more than {MAX_SKILL_BYTES} bytes"
                    )));
                }
            } else {
                return Err(SkillError::Invalid(format!(
                    "{} is not a regular file or directory",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// The regular files of a skill directory (relative paths, sorted), with the checks install
/// applies.
pub fn tree_files(dir: &Path) -> Result<Vec<PathBuf>, SkillError> {
    let mut files = Vec::new();
    walk_tree(
        dir,
        |_| Ok(()),
        |rel, _| {
            let len = std::fs::symlink_metadata(dir.join(rel))
                .map(|m| m.len())
                .unwrap_or(0);
            files.push(rel.to_path_buf());
            Ok(len)
        },
    )?;
    files.sort();
    Ok(files)
}

/// Copies a skill's files from `src` into `dst` (created; must not exist) in one pass: each
/// file is opened without following links, must be regular, and is copied with the byte budget
/// enforced on what is actually read (a file that grows or is swapped cannot exceed it).
pub fn copy_tree(src: &Path, dst: &Path) -> Result<(), SkillError> {
    use std::io::Read;
    std::fs::create_dir(dst)
        .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", dst.display())))?;
    walk_tree(
        src,
        |rel| {
            std::fs::create_dir(dst.join(rel))
                .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", rel.display())))
        },
        |rel, budget| {
            let from = open_regular(&src.join(rel))
                .map_err(|e| SkillError::Invalid(format!("{}: {e}", rel.display())))?;
            let mode = from.metadata().map(|m| m.permissions()).ok();
            let mut to = std::fs::File::create_new(dst.join(rel))
                .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", rel.display())))?;
            let n = std::io::copy(&mut from.take(budget.saturating_add(1)), &mut to)
                .map_err(|e| SkillError::Io(format!("cannot copy {}: {e}", rel.display())))?;
            if let Some(mode) = mode {
                let _ = to.set_permissions(mode);
            }
            Ok(n)
        },
    )
}

/// Validates the skill at `src` and copies it into the workspace store, atomically (a staging
/// directory renamed into place). What is installed is validated again as copied, so a source
/// that changes meanwhile cannot slip in an unchecked `SKILL.md`. An installed skill with the
/// same id is replaced only when `replace` is set.
pub fn install(roots: &Roots, src: &Path, replace: bool) -> Result<Skill, SkillError> {
    let meta = std::fs::metadata(src)
        .map_err(|e| SkillError::Invalid(format!("{}: {e}", src.display())))?;
    if !meta.is_dir() {
        return Err(SkillError::Invalid(format!(
            "{} is not a directory; a skill is a directory with a SKILL.md",
            src.display()
        )));
    }
    let skill = load_dir(src, Origin::Workspace).map_err(|e| SkillError::Invalid(e.to_string()))?;
    let store = &roots.workspace;
    std::fs::create_dir_all(store)
        .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", store.display())))?;
    let target = store.join(&skill.id);
    if let (Ok(a), Ok(b)) = (src.canonicalize(), target.canonicalize())
        && a == b
    {
        return Err(SkillError::Conflict(format!(
            "{} is already the installed copy of {}",
            src.display(),
            skill.id
        )));
    }
    if target.exists() && !replace {
        return Err(SkillError::Conflict(format!(
            "skill {} is already installed; pass replace=true to overwrite it",
            skill.id
        )));
    }
    let unique = format!(
        ".tmp-{}-{}-{}",
        skill.id,
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let staging = store.join(&unique);
    let staged = copy_tree(src, &staging).and_then(|()| {
        let bytes = read_skill_md(&staging.join("SKILL.md")).map_err(SkillError::Invalid)?;
        skill_from_bytes(&target, &skill.id, Origin::Workspace, &bytes)
            .map_err(|e| SkillError::Invalid(format!("the copied skill: {e}")))
    });
    let installed = match staged {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let old = store.join(format!("{unique}.old"));
    if target.exists()
        && let Err(e) = std::fs::rename(&target, &old)
    {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(SkillError::Io(format!(
            "cannot replace {}: {e}",
            target.display()
        )));
    }
    if let Err(e) = std::fs::rename(&staging, &target) {
        let _ = std::fs::rename(&old, &target);
        let _ = std::fs::remove_dir_all(&staging);
        return Err(SkillError::Io(format!(
            "cannot install into {}: {e}",
            target.display()
        )));
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(installed)
}

/// Removes an installed skill from the workspace store. Skills from other roots are not ours to
/// delete.
pub fn uninstall(roots: &Roots, catalog: &Catalog, id: &str) -> Result<(), SkillError> {
    manifest::check_name(id).map_err(|m| SkillError::Invalid(format!("invalid skill id: {m}")))?;
    let skill = catalog.get(id)?;
    if skill.origin != Origin::Workspace {
        return Err(SkillError::Conflict(format!(
            "skill {id} comes from {} ({:?} root), not the workspace store; remove it there",
            skill.dir.display(),
            skill.origin
        )));
    }
    let target = roots.workspace.join(id);
    std::fs::remove_dir_all(&target)
        .map_err(|e| SkillError::Io(format!("cannot remove {}: {e}", target.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, id: &str, desc: &str, body: &str) -> PathBuf {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {id}\ndescription: {desc}\n---\n{body}\n"),
        )
        .unwrap();
        dir
    }

    fn roots(tmp: &Path) -> Roots {
        Roots {
            workspace: tmp.join("ws/.vox/skills"),
            project: Some(tmp.join("ws/skills")),
            home: Some(tmp.join("home/skills")),
            extra: vec![tmp.join("extra")],
        }
    }

    #[test]
    fn hydrate_reports_malformed_skills_and_loads_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        write_skill(&r.workspace, "good", "A good skill", "Do things.");
        let bad = r.workspace.join("bad");
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(bad.join("SKILL.md"), "---\nname: bad\n---\n").unwrap();
        write_skill(r.home.as_ref().unwrap(), "good", "shadowed copy", "");
        write_skill(&r.extra[0], "other", "From the skill path", "");
        let c = Catalog::hydrate(&r);
        assert_eq!(c.skills.keys().collect::<Vec<_>>(), ["good", "other"]);
        assert_eq!(c.skills["good"].manifest.description, "A good skill");
        assert_eq!(c.skills["other"].origin, Origin::SkillPath);
        assert_eq!(c.errors.len(), 1);
        assert!(
            c.errors[0]
                .to_string()
                .contains("`description` is required")
        );
        assert_eq!(c.shadowed.len(), 1);
    }

    #[test]
    fn search_ranks_by_bm25_over_name_tags_description_and_body() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        write_skill(&r.workspace, "pdf-forms", "Fill PDF forms", "Use qpdf.");
        write_skill(
            &r.workspace,
            "git-bisect",
            "Find a regression",
            "Run git bisect with a test script.",
        );
        let c = Catalog::hydrate(&r);
        let hits = c.search("bisect regression", 10).unwrap();
        assert_eq!(hits[0].id, "git-bisect");
        assert_eq!(c.search("pdf", 10).unwrap()[0].id, "pdf-forms");
        assert!(c.search("nothing-matches-this", 10).unwrap().is_empty());
    }

    #[test]
    fn install_copies_validates_refuses_duplicates_and_uninstall_removes() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let src = write_skill(&tmp.path().join("src"), "tool-kit", "Kit", "Body");
        std::fs::create_dir_all(src.join("scripts")).unwrap();
        std::fs::write(src.join("scripts/run.sh"), "echo hi").unwrap();
        let s = install(&r, &src, false).unwrap();
        assert_eq!(s.id, "tool-kit");
        assert!(r.workspace.join("tool-kit/scripts/run.sh").is_file());
        assert!(matches!(
            install(&r, &src, false),
            Err(SkillError::Conflict(_))
        ));
        install(&r, &src, true).unwrap();
        let c = Catalog::hydrate(&r);
        uninstall(&r, &c, "tool-kit").unwrap();
        assert!(!r.workspace.join("tool-kit").exists());
        assert!(matches!(
            uninstall(&r, &c, "../etc"),
            Err(SkillError::Invalid(_))
        ));
        // No staging directories are left behind.
        assert_eq!(std::fs::read_dir(&r.workspace).unwrap().count(), 0);
    }

    #[test]
    fn install_refuses_symlinks_and_invalid_skills() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let src = write_skill(&tmp.path().join("src"), "linky", "Links", "");
        std::os::unix::fs::symlink("/etc/passwd", src.join("passwd")).unwrap();
        let e = install(&r, &src, false).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let bad = tmp.path().join("src/Bad");
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(
            bad.join("SKILL.md"),
            "---\nname: Bad\ndescription: d\n---\n",
        )
        .unwrap();
        assert!(matches!(
            install(&r, &bad, false),
            Err(SkillError::Invalid(_))
        ));
        assert!(matches!(
            install(&r, &tmp.path().join("missing"), false),
            Err(SkillError::Invalid(_))
        ));
    }

    #[test]
    fn symlinked_skill_dirs_are_reported_and_stale_staging_is_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let real = write_skill(&tmp.path().join("elsewhere"), "linked", "d", "b");
        std::fs::create_dir_all(r.home.as_ref().unwrap()).unwrap();
        std::os::unix::fs::symlink(&real, r.home.as_ref().unwrap().join("linked")).unwrap();
        let stale = r.workspace.join(".tmp-x-1-2");
        std::fs::create_dir_all(&stale).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let fresh = r.workspace.join(".tmp-y-1-2");
        std::fs::create_dir_all(&fresh).unwrap();
        let c = Catalog::hydrate(&r);
        assert!(c.skills.is_empty());
        assert!(
            c.errors[0].to_string().contains("symbolic link"),
            "{:?}",
            c.errors
        );
        assert!(!stale.exists(), "a crash's staging directory is removed");
        assert!(
            fresh.exists(),
            "a concurrent install's staging directory is kept"
        );
    }

    #[test]
    fn special_files_in_a_skill_are_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let src = write_skill(&tmp.path().join("src"), "piped", "d", "b");
        let fifo = std::ffi::CString::new(src.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let e = install(&r, &src, false).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(!r.workspace.join("piped").exists());
    }

    #[test]
    fn the_project_skills_directory_is_a_root_below_the_store_and_above_home() {
        let tmp = tempfile::tempdir().unwrap();
        let r = roots(tmp.path());
        let project = r.project.clone().unwrap();
        write_skill(&project, "bundled", "Shipped with the project", "");
        write_skill(&project, "both", "project copy", "");
        write_skill(&r.workspace, "both", "installed copy", "");
        write_skill(r.home.as_ref().unwrap(), "bundled", "home copy", "");
        // A folder without SKILL.md in the project's skills/ is not a skill and not an error.
        std::fs::create_dir_all(project.join("notes")).unwrap();
        let c = Catalog::hydrate(&r);
        assert_eq!(c.skills["bundled"].origin, Origin::Project);
        assert_eq!(
            c.skills["bundled"].manifest.description,
            "Shipped with the project"
        );
        assert_eq!(c.skills["both"].origin, Origin::Workspace);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.shadowed.len(), 2);
    }
}
