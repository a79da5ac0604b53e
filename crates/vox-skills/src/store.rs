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
/// Most skill directories read from one root.
pub const MAX_SKILLS_PER_ROOT: usize = 10_000;

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `<workspace>/.vox/skills`: the store `vox_skill_install` writes.
    Workspace,
    /// `~/.vox/skills` (or `$VOX_HOME/skills`).
    Home,
    /// A directory of `VOX_SKILL_PATH`.
    SkillPath,
}

/// The search roots, in precedence order (the first root holding an id wins).
#[derive(Debug, Clone)]
pub struct Roots {
    pub workspace: PathBuf,
    pub home: Option<PathBuf>,
    pub extra: Vec<PathBuf>,
}

impl Roots {
    /// `<workspace>/.vox/skills`, `$VOX_HOME/skills` or `~/.vox/skills`, then each directory of
    /// `VOX_SKILL_PATH` (`:`-separated).
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
            home,
            extra,
        }
    }

    fn all(&self) -> Vec<(Origin, &Path)> {
        let mut v = vec![(Origin::Workspace, self.workspace.as_path())];
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
    pub id: String,
    pub manifest: Manifest,
    pub dir: PathBuf,
    pub origin: Origin,
    /// The whole `SKILL.md`, served as `skill://{id}/SKILL.md`.
    pub source: String,
}

/// A skill directory that did not load, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadError {
    pub path: String,
    pub problems: Vec<Problem>,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.problems.iter().map(|p| p.to_string()).collect();
        write!(f, "{}: {}", self.path, parts.join("; "))
    }
}

/// A skill id also found in a root of lower precedence, which is therefore not served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    pub id: String,
    pub path: String,
}

/// Why an install, uninstall or lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Io(String),
}

/// A search hit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub id: String,
    pub score: f32,
    pub description: String,
    pub snippet: String,
}

/// Every skill the roots hold, with the BM25 index over them. Immutable: a change builds a new
/// catalog, so readers never see a half-updated one.
pub struct Catalog {
    pub skills: BTreeMap<String, Arc<Skill>>,
    pub errors: Vec<LoadError>,
    pub shadowed: Vec<Shadowed>,
    index: vox_search::DocIndex,
}

impl Catalog {
    /// Loads every skill of every root; a malformed skill is reported and the rest load.
    pub fn hydrate(roots: &Roots) -> Catalog {
        let mut skills: BTreeMap<String, Arc<Skill>> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut shadowed = Vec::new();
        for (origin, root) in roots.all() {
            let Ok(entries) = std::fs::read_dir(root) else {
                continue; // a root that does not exist holds no skills
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .take(MAX_SKILLS_PER_ROOT)
                .collect();
            dirs.sort();
            for dir in dirs {
                match load_dir(&dir, origin) {
                    Ok(skill) if skills.contains_key(&skill.id) => shadowed.push(Shadowed {
                        id: skill.id,
                        path: dir.display().to_string(),
                    }),
                    Ok(skill) => {
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
    let meta = std::fs::symlink_metadata(&skill_md)
        .map_err(|e| fail(format!("no readable SKILL.md ({e})")))?;
    if !meta.is_file() {
        return Err(fail("SKILL.md must be a regular file".into()));
    }
    if meta.len() > manifest::MAX_SKILL_MD_BYTES as u64 {
        return Err(fail(format!(
            "SKILL.md is {} bytes; the limit is {}",
            meta.len(),
            manifest::MAX_SKILL_MD_BYTES
        )));
    }
    let bytes = std::fs::read(&skill_md).map_err(|e| fail(format!("cannot read SKILL.md: {e}")))?;
    let manifest = manifest::parse(&bytes, dir_name).map_err(|problems| LoadError {
        path: skill_md.display().to_string(),
        problems,
    })?;
    Ok(Skill {
        id: manifest.name.clone(),
        manifest,
        dir: dir.to_path_buf(),
        origin,
        source: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// The regular files of a skill directory (relative paths), refusing symlinks, special files,
/// and trees over the limits. `.git` is left out.
pub fn tree_files(dir: &Path) -> Result<Vec<PathBuf>, SkillError> {
    let mut files = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        if depth > MAX_SKILL_DEPTH {
            return Err(SkillError::Invalid(format!(
                "{} is nested deeper than {MAX_SKILL_DEPTH} directories",
                rel.display()
            )));
        }
        let entries = std::fs::read_dir(dir.join(&rel)).map_err(|e| {
            SkillError::Io(format!("cannot read {}: {e}", dir.join(&rel).display()))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| SkillError::Io(e.to_string()))?;
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
                stack.push((path, depth + 1));
            } else if t.is_file() {
                total += entry.metadata().map(|m| m.len()).unwrap_or(0);
                files.push(path);
                if files.len() > MAX_SKILL_FILES {
                    return Err(SkillError::Invalid(format!(
                        "the skill holds more than {MAX_SKILL_FILES} files"
                    )));
                }
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
    files.sort();
    Ok(files)
}

/// Copies a skill's files from `src` into `dst` (which must not exist), with the same checks as
/// install. Used by install, and by `vox ci` to copy the example workspace.
pub fn copy_tree(src: &Path, dst: &Path) -> Result<(), SkillError> {
    let files = tree_files(src)?;
    std::fs::create_dir_all(dst)
        .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", dst.display())))?;
    for rel in files {
        let to = dst.join(&rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| SkillError::Io(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::copy(src.join(&rel), &to)
            .map_err(|e| SkillError::Io(format!("cannot copy {}: {e}", rel.display())))?;
    }
    Ok(())
}

/// Validates the skill at `src` and copies it into the workspace store, atomically (a temporary
/// directory renamed into place). An installed skill with the same id is replaced only when
/// `replace` is set.
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
    if let Err(e) = copy_tree(src, &staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let old = store.join(format!("{unique}.old"));
    if target.exists() {
        std::fs::rename(&target, &old)
            .map_err(|e| SkillError::Io(format!("cannot replace {}: {e}", target.display())))?;
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
    load_dir(&target, Origin::Workspace).map_err(|e| SkillError::Io(e.to_string()))
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
}
