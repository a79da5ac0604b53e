//! Finding the `.vox` files that `import`s name.
//!
//! `import a.b.{c, d}` (or `import a.b.c`) names the module `a.b`, the file `a/b.vox`. A
//! [`ModuleLoader`] turns that into source bytes; [`crate::analyze_with`] loads every file a
//! root file reaches, checks each, and lowers them into one program so calls across files run
//! under the caller's budget. An import whose module is no `.vox` file (`import std.text.{…}`)
//! is accepted and not loaded, as the subset spec says; calling its names fails at run time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Most files one root may load through its imports (itself excluded).
pub const MAX_IMPORTED_FILES: usize = 64;

/// Most bytes all files of one compilation may hold together.
pub const MAX_UNIT_BYTES: usize = 64 << 20;

/// A module's source, as a loader found it.
#[derive(Clone, Debug)]
pub struct LoadedSource {
    /// The name diagnostics and run-time errors use (a path relative to the loader's root when
    /// the file is under it).
    pub name: String,
    /// Identity for de-duplication: two imports that reach the same file share one copy.
    pub key: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Why a module could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// There is no such `.vox` file; `looked` says where the loader looked (empty when the
    /// loader never loads anything).
    NotFound {
        /// Places tried, for the diagnostic.
        looked: Vec<String>,
    },
    /// The file exists but may not or cannot be read.
    Refused(String),
}

/// Resolves module paths to sources.
pub trait ModuleLoader {
    /// The file for module `path` (`["a", "b"]` for `a.b`), imported by the file named `from`.
    fn load(&self, from: &str, path: &[&str]) -> Result<LoadedSource, LoadError>;

    /// The [`LoadedSource::key`] the file named `name` would have, so an import that leads
    /// back to the root file is seen as a cycle.
    fn key(&self, name: &str) -> Option<String> {
        let _ = name;
        None
    }
}

/// Loads nothing: every import stays unresolved. Used for source text with no place on disk.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoImports;

impl ModuleLoader for NoImports {
    fn load(&self, _from: &str, _path: &[&str]) -> Result<LoadedSource, LoadError> {
        Err(LoadError::NotFound { looked: Vec::new() })
    }
}

/// In-memory modules by relative path (`"a/b.vox"`), for tests, tools and fuzzing. Every
/// module path resolves from the root, whatever the importing file.
#[derive(Clone, Debug, Default)]
pub struct MemoryLoader {
    /// Sources by path.
    pub files: HashMap<String, Vec<u8>>,
}

impl ModuleLoader for MemoryLoader {
    fn load(&self, _from: &str, path: &[&str]) -> Result<LoadedSource, LoadError> {
        let rel = module_file(path);
        match self.files.get(&rel) {
            Some(bytes) => Ok(LoadedSource {
                name: rel.clone(),
                key: rel,
                bytes: bytes.clone(),
            }),
            None => Err(LoadError::NotFound { looked: vec![rel] }),
        }
    }

    fn key(&self, name: &str) -> Option<String> {
        Some(name.to_string())
    }
}

/// Loads modules from disk: `a.b` is `a/b.vox` next to the importing file (when that file is
/// under `root`), else under `root` (the workspace root; for the CLI, the current directory).
/// Nothing outside `root` is read: a candidate that a symbolic link leads out of it is
/// refused, as is anything but a regular file or a file over [`crate::MAX_SOURCE_BYTES`].
#[derive(Clone, Debug)]
pub struct FsLoader {
    root: PathBuf,
    max_file_bytes: u64,
}

impl FsLoader {
    /// A loader resolving against `root`; relative importing-file names are taken as relative
    /// to it too.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsLoader {
            root: root.into(),
            max_file_bytes: crate::MAX_SOURCE_BYTES as u64,
        }
    }

    /// The same loader refusing files over `max` bytes (the workspace caps its files lower
    /// than the language does).
    pub fn with_max_file_bytes(mut self, max: u64) -> Self {
        self.max_file_bytes = max.min(crate::MAX_SOURCE_BYTES as u64);
        self
    }

    /// For the command line: the current directory as root, or the file's own directory when
    /// the file is elsewhere.
    pub fn for_file(file: &Path) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let abs = cwd.join(file);
        if abs.starts_with(&cwd)
            && !file
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            FsLoader::new(cwd)
        } else {
            FsLoader::new(abs.parent().unwrap_or(&cwd).to_path_buf())
        }
    }

    /// The real path of `name` (relative to the root) when it exists and, after links are
    /// resolved, lies inside the root: what workspace tools may look at.
    pub fn confined(&self, name: &str) -> Result<PathBuf, LoadError> {
        self.resolve(name).map(|(real, _)| real)
    }

    /// `name`'s real path and the root's, refusing a path that leads outside the root.
    fn resolve(&self, name: &str) -> Result<(PathBuf, PathBuf), LoadError> {
        let real = self
            .root
            .join(name)
            .canonicalize()
            .map_err(|e| LoadError::Refused(format!("cannot resolve `{name}`: {e}")))?;
        let root_real = self.root.canonicalize().map_err(|e| {
            LoadError::Refused(format!("cannot resolve {}: {e}", self.root.display()))
        })?;
        if !real.starts_with(&root_real) {
            return Err(LoadError::Refused(format!(
                "`{name}` leads outside {}",
                self.root.display()
            )));
        }
        Ok((real, root_real))
    }

    /// Reads the file `name` (relative to the root) with the loader's checks: inside the root
    /// after links are resolved, a regular file, at most the size limit. For callers that
    /// re-read what a module loaded, to see whether it changed.
    pub fn read_file(&self, name: &str) -> Result<Vec<u8>, LoadError> {
        let (real, root_real) = self.resolve(name)?;
        self.read(&real, name, &root_real)
    }

    /// Reads a regular file of at most `max_file_bytes`, checking the opened file itself (so a
    /// file swapped for a device after the check is still refused) and never reading more
    /// than the limit.
    fn read(&self, real: &Path, shown: &str, root_real: &Path) -> Result<Vec<u8>, LoadError> {
        use std::io::Read;
        let refused = |e: std::io::Error| LoadError::Refused(format!("cannot read `{shown}`: {e}"));
        let too_big = |n: u64| {
            LoadError::Refused(format!(
                "`{shown}` is {n} bytes; the limit is {}",
                self.max_file_bytes
            ))
        };
        // Checked before opening too: opening a FIFO for reading would block.
        let meta = std::fs::metadata(real).map_err(refused)?;
        if !meta.is_file() {
            return Err(LoadError::Refused(format!("`{shown}` is not a file")));
        }
        let file = std::fs::File::open(real).map_err(refused)?;
        // The path was checked before it was opened; a directory swapped for a link in between
        // would have led elsewhere, so the opened file's own path is checked too (Linux names
        // it under /proc; without /proc the earlier check stands alone).
        {
            use std::os::fd::AsRawFd;
            if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
                && !opened.starts_with(root_real)
            {
                return Err(LoadError::Refused(format!(
                    "`{shown}` was replaced while it was opened and now leads outside {}",
                    self.root.display()
                )));
            }
        }
        let meta = file.metadata().map_err(refused)?;
        if !meta.is_file() {
            return Err(LoadError::Refused(format!("`{shown}` is not a file")));
        }
        if meta.len() > self.max_file_bytes {
            return Err(too_big(meta.len()));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(self.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(refused)?;
        if bytes.len() as u64 > self.max_file_bytes {
            return Err(too_big(bytes.len() as u64));
        }
        Ok(bytes)
    }

    fn display(&self, p: &Path) -> String {
        match p.strip_prefix(&self.root) {
            Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
            Err(_) => p.display().to_string(),
        }
    }
}

impl ModuleLoader for FsLoader {
    fn load(&self, from: &str, path: &[&str]) -> Result<LoadedSource, LoadError> {
        let rel = module_file(path);
        let root_real = self.root.canonicalize().map_err(|e| {
            LoadError::Refused(format!("cannot resolve {}: {e}", self.root.display()))
        })?;
        // Next to the importing file when that is under the root, then at the root.
        let importer = self.root.join(from);
        let mut bases = Vec::with_capacity(2);
        if let Some(here) = importer.parent()
            && here.strip_prefix(&self.root).is_ok_and(|r| {
                r.components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
            })
        {
            bases.push(here.to_path_buf());
        }
        if bases.first() != Some(&self.root) {
            bases.push(self.root.clone());
        }
        let mut looked = Vec::new();
        for base in bases {
            let candidate = base.join(&rel);
            let shown = self.display(&candidate);
            looked.push(shown.clone());
            if std::fs::symlink_metadata(&candidate).is_err() {
                continue;
            }
            let real = candidate
                .canonicalize()
                .map_err(|e| LoadError::Refused(format!("cannot resolve `{shown}`: {e}")))?;
            if !real.starts_with(&root_real) {
                return Err(LoadError::Refused(format!(
                    "`{shown}` is a link that leads outside {}",
                    self.root.display()
                )));
            }
            let bytes = self.read(&real, &shown, &root_real)?;
            return Ok(LoadedSource {
                name: shown,
                key: real.display().to_string(),
                bytes,
            });
        }
        Err(LoadError::NotFound { looked })
    }

    fn key(&self, name: &str) -> Option<String> {
        let p = self.root.join(name).canonicalize().ok()?;
        Some(p.display().to_string())
    }
}

/// `["a", "b"]` → `a/b.vox`.
pub fn module_file(path: &[&str]) -> String {
    format!("{}.vox", path.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_leads_outside_the_root_once_opened_is_refused() {
        // What a directory swapped for a link between the check and the open would give: the
        // opened file's own path is outside the root.
        let dir = std::env::temp_dir().join(format!("vox-fsloader-{}", std::process::id()));
        let root = dir.join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let outside = dir.join("secret.vox");
        std::fs::write(&outside, "fn s() { 1 }\n").unwrap();
        let loader = FsLoader::new(&root);
        let root_real = root.canonicalize().unwrap();
        let e = loader.read(&outside, "lib.vox", &root_real).unwrap_err();
        assert!(
            matches!(&e, LoadError::Refused(m) if m.contains("replaced")),
            "{e:?}"
        );
        // Inside the root the same read succeeds.
        std::fs::write(root.join("lib.vox"), "fn f() { 1 }\n").unwrap();
        assert!(
            loader
                .read(&root.join("lib.vox"), "lib.vox", &root_real)
                .is_ok()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
