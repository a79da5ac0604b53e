//! The runtime's modules import each other as a DAG (ARCHITECTURE.md, "codex-mmo runtime"):
//! a module that reaches back up the graph fails here, naming the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's top-level modules, from `lib.rs`.
fn modules(src: &Path) -> Vec<String> {
    std::fs::read_to_string(src.join("lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// Every source file of a module: `m.rs` and everything under `m/`.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = vec![src.join(format!("{module}.rs"))];
    walk(&src.join(module), &mut out);
    out.retain(|p| p.is_file());
    out
}

/// The other top-level modules a module names as `crate::…` (tests included).
fn uses(src: &Path, module: &str, all: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files_of(src, module) {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name != module && all.contains(&name) {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn the_runtime_modules_import_each_other_as_a_dag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all: BTreeSet<String> = modules(&src).into_iter().collect();
    assert!(all.len() >= 13, "{all:?}");
    let graph: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .map(|m| (m.clone(), uses(&src, m, &all)))
        .collect();
    // Depth-first search; a module met again on the current path closes a circle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_string());
            panic!(
                "the modules import each other in a circle: {}",
                circle.join(" → ")
            );
        }
        path.push(m.to_string());
        for d in &graph[m] {
            visit(d, graph, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}
