//! `WorkspaceMcpLoader`: scans a workspace's `.vox` files, compiles each once (cached by
//! content hash), and builds the federated surface of `@tool` functions and `@mcp.resource`
//! functions under the spec's collision rules:
//!
//! - a static catalog name wins: the workspace tool is *shadowed* (reported, never served);
//! - a second tool name or resource URI across files is skipped: the first file in sorted path
//!   order wins (reported);
//! - a file that fails to compile is reported with its diagnostic and the scan goes on.
//!
//! The scan globs come from `contracts/mcp/workspace-mcp-surface.v1.yaml` in the workspace when
//! it exists, else `**/*.vox` minus `target/`, `node_modules/`, `.vox/` and `.git/`.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use vox_lang::Module;
use vox_lang::hir::FnRole;

/// Resource URIs a workspace may not declare (the skills' own).
pub const RESERVED_URI_PREFIX: &str = "skill://";

/// Where the surface file lives inside a workspace.
pub const SURFACE_FILE: &str = "contracts/mcp/workspace-mcp-surface.v1.yaml";

/// Largest `.vox` file the loader compiles.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// `contracts/mcp/workspace-mcp-surface.v1.yaml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SurfaceConfig {
    pub version: u32,
    pub scan_globs: Vec<String>,
    #[serde(default)]
    pub exclude_globs: Vec<String>,
}

impl Default for SurfaceConfig {
    fn default() -> Self {
        SurfaceConfig {
            version: 1,
            scan_globs: vec!["**/*.vox".into()],
            exclude_globs: [
                "**/target/**",
                "**/node_modules/**",
                "**/.vox/**",
                "**/.git/**",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        }
    }
}

/// A federated tool.
#[derive(Clone)]
pub struct WorkspaceTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    pub module: Arc<Module>,
}

/// A federated resource.
#[derive(Clone)]
pub struct WorkspaceResource {
    pub uri: String,
    pub name: String,
    pub description: String,
    pub file: String,
    pub module: Arc<Module>,
}

/// A name (or URI) that was not federated, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Skipped {
    pub name: String,
    pub file: String,
    /// The file that keeps the name (duplicates only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_from: Option<String>,
}

/// A file that could not be used.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FileError {
    pub file: String,
    pub diagnostic: String,
}

/// What a scan found: the `vox_workspace_mcp_refresh` answer.
#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct RefreshReport {
    pub tool_count: usize,
    pub resource_count: usize,
    pub shadowed: Vec<Skipped>,
    pub duplicate_tools: Vec<Skipped>,
    pub duplicate_resources: Vec<Skipped>,
    pub errors: Vec<FileError>,
    pub files: usize,
    pub compiled: usize,
}

/// The federated surface, in deterministic (name / URI) order.
#[derive(Clone, Default)]
pub struct Surface {
    pub tools: BTreeMap<String, WorkspaceTool>,
    pub resources: BTreeMap<String, WorkspaceResource>,
    pub report: RefreshReport,
}

impl Surface {
    /// Whether two surfaces look the same to a client: the same tools with the same
    /// descriptions, schemas and files, and the same resources (decides `list_changed`).
    pub fn same_listing(&self, other: &Surface) -> bool {
        fn tool(t: &WorkspaceTool) -> (&str, &str, &serde_json::Value, &str) {
            (&t.name, &t.description, &t.input_schema, &t.file)
        }
        fn resource(r: &WorkspaceResource) -> (&str, &str, &str, &str) {
            (&r.uri, &r.name, &r.description, &r.file)
        }
        self.tools
            .values()
            .map(tool)
            .eq(other.tools.values().map(tool))
            && self
                .resources
                .values()
                .map(resource)
                .eq(other.resources.values().map(resource))
    }
}

/// Why the surface file itself is unusable.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
}

/// A module, with the content hash of its file and the fingerprint of the workspace's `.vox`
/// files when it was compiled (its imports are checked separately).
type Cached = (String, String, Arc<Module>);

/// Scans a workspace; keeps compiled modules by content hash between scans.
pub struct WorkspaceMcpLoader {
    root: PathBuf,
    cache: Mutex<HashMap<String, Cached>>,
}

fn globset(path: &Path, globs: &[String]) -> Result<GlobSet, LoaderError> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(Glob::new(g).map_err(|e| LoaderError::Config {
            path: path.to_owned(),
            message: format!("invalid glob `{g}`: {e}"),
        })?);
    }
    b.build().map_err(|e| LoaderError::Config {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn first_error(e: &vox_lang::CompileError) -> String {
    let diags = vox_lang::diag::to_json(&e.file, &e.diagnostics);
    diags
        .iter()
        .find(|d| matches!(d.severity, vox_lang::Severity::Error))
        .or(diags.first())
        .map(|d| {
            format!(
                "{}:{}:{}: {}: {}",
                d.file, d.line, d.column, d.code, d.message
            )
        })
        .unwrap_or_else(|| "does not compile".into())
}

impl WorkspaceMcpLoader {
    /// A loader for `root`; nothing is read until [`Self::scan`].
    pub fn new(root: PathBuf) -> Self {
        WorkspaceMcpLoader {
            root,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The surface file's settings, or the defaults when there is none.
    pub fn config(&self) -> Result<SurfaceConfig, LoaderError> {
        let path = self.root.join(SURFACE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let c: SurfaceConfig =
                    serde_norway::from_str(&text).map_err(|e| LoaderError::Config {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                if c.version != 1 {
                    return Err(LoaderError::Config {
                        path,
                        message: "version must be 1".into(),
                    });
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SurfaceConfig::default()),
            Err(e) => Err(LoaderError::Config {
                path,
                message: e.to_string(),
            }),
        }
    }

    /// The workspace-relative `.vox` files to load, sorted.
    fn files(&self, config: &SurfaceConfig) -> Result<Vec<String>, LoaderError> {
        let path = self.root.join(SURFACE_FILE);
        let include = globset(&path, &config.scan_globs)?;
        let exclude = globset(&path, &config.exclude_globs)?;
        let mut out = Vec::new();
        let walker = ignore::WalkBuilder::new(&self.root)
            .standard_filters(false)
            .filter_entry(|e| {
                !matches!(
                    e.file_name().to_str(),
                    Some(".git" | ".vox" | "target" | "node_modules")
                )
            })
            .build();
        for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&self.root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if include.is_match(&rel) && !exclude.is_match(&rel) {
                out.push(rel);
            }
        }
        out.sort();
        Ok(out)
    }

    fn fs(&self) -> vox_lang::FsLoader {
        vox_lang::FsLoader::new(self.root.clone()).with_max_file_bytes(MAX_FILE_BYTES)
    }

    /// Reads a scanned file and hashes it.
    fn read(&self, rel: &str) -> Result<(Vec<u8>, String), String> {
        let bytes = self.fs().read_file(rel).map_err(|e| match e {
            vox_lang::import::LoadError::Refused(m) => m,
            vox_lang::import::LoadError::NotFound { .. } => "cannot read: not found".into(),
        })?;
        let hash = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok((bytes, hash))
    }

    /// Compiles `rel` unless it is cached and nothing it may import has changed: a module
    /// with imports is compiled again when any scanned `.vox` file changed (`fingerprint`),
    /// since a file an import did not find may have appeared, and when a file it loaded
    /// (scanned or not) reads differently.
    fn module(
        &self,
        rel: &str,
        (bytes, hash): &(Vec<u8>, String),
        (fingerprint, scanned): (&str, &[String]),
        compiled: &mut usize,
    ) -> Result<Arc<Module>, String> {
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(rel)
            .cloned();
        if let Some((h, f, m)) = cached
            && h == *hash
            && (m.imports().is_empty() || f == fingerprint)
            && self.imports_unchanged(&m, scanned)
        {
            return Ok(m);
        }
        *compiled += 1;
        let m = Module::compile_with(rel, bytes, &self.fs())
            .map(Arc::new)
            .map_err(|e| first_error(&e))?;
        // Only modules are cached: a file that fails may fail because of a file it imports, so
        // it is compiled again on the next scan.
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(
            rel.to_owned(),
            (hash.clone(), fingerprint.to_owned(), m.clone()),
        );
        Ok(m)
    }

    /// Whether every file `m` imported still reads the same. Called only when the
    /// fingerprint of the scanned files is unchanged, so only imported files the scan does not
    /// cover (`scanned`, sorted) are read again, with the loader's checks.
    fn imports_unchanged(&self, m: &Module, scanned: &[String]) -> bool {
        let fs = self.fs();
        m.imported_files()
            .iter()
            .filter(|f| scanned.binary_search(&f.source.name).is_err())
            .all(|f| {
                fs.read_file(&f.source.name)
                    .is_ok_and(|b| vox_lang::decode_source(&b).0 == f.source.text)
            })
    }

    /// Scans and applies the collision rules. `is_static` says whether a name belongs to the
    /// static catalog (which always wins).
    pub fn scan(&self, is_static: &dyn Fn(&str) -> bool) -> Result<Surface, LoaderError> {
        self.scan_observed(is_static, &|_, _| {})
    }

    /// [`Self::scan`], calling `progress(done, total)` as files are compiled.
    pub fn scan_observed(
        &self,
        is_static: &dyn Fn(&str) -> bool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<Surface, LoaderError> {
        let config = self.config()?;
        let files = self.files(&config)?;
        let mut s = Surface::default();
        s.report.files = files.len();
        let read: Vec<Result<(Vec<u8>, String), String>> =
            files.iter().map(|rel| self.read(rel)).collect();
        let mut fingerprint = Sha256::new();
        for (rel, r) in files.iter().zip(&read) {
            fingerprint.update(rel.as_bytes());
            fingerprint.update([0]);
            fingerprint.update(r.as_ref().map_or("-", |(_, h)| h.as_str()).as_bytes());
            fingerprint.update([b'\n']);
        }
        let fingerprint: String = fingerprint
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for (done, (rel, r)) in files.iter().zip(&read).enumerate() {
            progress(done, files.len());
            let module =
                match r.as_ref().map_err(Clone::clone).and_then(|r| {
                    self.module(rel, r, (&fingerprint, &files), &mut s.report.compiled)
                }) {
                    Ok(m) => m,
                    Err(diagnostic) => {
                        s.report.errors.push(FileError {
                            file: rel.clone(),
                            diagnostic,
                        });
                        continue;
                    }
                };
            for f in module.tools() {
                let name = f.name.clone();
                if is_static(&name) {
                    s.report.shadowed.push(Skipped {
                        name,
                        file: rel.clone(),
                        kept_from: None,
                    });
                    continue;
                }
                if let Some(first) = s.tools.get(&name) {
                    s.report.duplicate_tools.push(Skipped {
                        name,
                        file: rel.clone(),
                        kept_from: Some(first.file.clone()),
                    });
                    continue;
                }
                let description = match &f.role {
                    FnRole::Tool {
                        description: Some(d),
                        ..
                    } => d.clone(),
                    _ => format!("{name} (from {rel})"),
                };
                let input_schema = module
                    .input_schema(&name)
                    .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                s.tools.insert(
                    name.clone(),
                    WorkspaceTool {
                        name,
                        description,
                        input_schema,
                        file: rel.clone(),
                        module: module.clone(),
                    },
                );
            }
            for f in module.resources() {
                let FnRole::Resource { uri, description } = &f.role else {
                    continue;
                };
                // `skill://` belongs to the installed skills, as `vox_*` names belong to the
                // catalog: a workspace file cannot stand in for a skill's instructions.
                if uri.starts_with(RESERVED_URI_PREFIX) {
                    s.report.shadowed.push(Skipped {
                        name: uri.clone(),
                        file: rel.clone(),
                        kept_from: None,
                    });
                    continue;
                }
                if let Some(first) = s.resources.get(uri) {
                    s.report.duplicate_resources.push(Skipped {
                        name: uri.clone(),
                        file: rel.clone(),
                        kept_from: Some(first.file.clone()),
                    });
                    continue;
                }
                s.resources.insert(
                    uri.clone(),
                    WorkspaceResource {
                        uri: uri.clone(),
                        name: f.name.clone(),
                        description: description.clone().unwrap_or_default(),
                        file: rel.clone(),
                        module: module.clone(),
                    },
                );
            }
        }
        // Forget files that are gone so the cache does not grow with renames.
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| files.binary_search(k).is_ok());
        s.report.tool_count = s.tools.len();
        s.report.resource_count = s.resources.len();
        progress(files.len(), files.len());
        Ok(s)
    }
}
