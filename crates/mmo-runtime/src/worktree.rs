//! TEMP STUB
use std::path::{Path, PathBuf};
#[derive(Debug)] pub struct E;
impl E { pub fn code(&self) -> &'static str { "x" } }
impl std::fmt::Display for E { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "x") } }
pub struct Worktree { pub path: PathBuf }
#[derive(serde::Serialize, serde::Deserialize, Default)] pub struct ChangedFile;
pub struct Patch { pub base_commit: String, pub bytes: Vec<u8>, pub sha256: String, pub files: Vec<ChangedFile> }
#[derive(Default)] pub struct ArtifactPolicy;
#[derive(Debug)] pub struct Violation;
impl std::fmt::Display for Violation { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "x") } }
#[derive(Debug)] pub struct Integrated;
pub fn create(_c: &Path, _d: &Path, _n: &str) -> Result<Worktree, E> { Err(E) }
pub fn record(_w: &Worktree) -> Result<Patch, E> { Err(E) }
pub fn check(_p: &Patch, _w: &Worktree, _s: &[String], _a: &ArtifactPolicy) -> Vec<Violation> { vec![] }
pub fn integrate(_c: &Path, _p: &Patch, _s: &str, _l: &[String]) -> Result<Integrated, E> { Err(E) }
pub fn remove(_c: &Path, _w: &Worktree) -> Result<(), E> { Ok(()) }
