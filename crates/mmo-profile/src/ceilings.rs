//! The compiler's derived ceilings: concurrency, writers, depth and per-resource-group fit.

use crate::model::Profile;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One ceiling as declared, derived, and in force.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ceiling {
    /// What the pack wrote (or the schema default).
    pub declared: u32,
    /// Whether the pack wrote it; only explicit declarations above the derivation are rejected.
    pub explicit: bool,
    /// What the graph and resources can actually reach (`None` = unbounded).
    pub derived: Option<u32>,
    /// The ceiling the runtime enforces: min(declared, derived).
    pub effective: u32,
}

impl Ceiling {
    fn new(declared: u32, explicit: bool, derived: Option<u32>) -> Self {
        let effective = derived.map_or(declared, |d| d.min(declared));
        Ceiling {
            declared,
            explicit,
            derived,
            effective,
        }
    }
    /// Whether an explicit declaration asks more than can ever be active.
    pub fn exceeded(&self) -> bool {
        self.explicit && self.derived.is_some_and(|d| self.declared > d)
    }
}

/// How one resource group is filled.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupFit {
    pub capacity: u32,
    /// Units the root holds while active; reserved before any worker.
    pub root_units: u32,
    /// Every reachable participant slot's weight, ascending.
    pub slot_units: Vec<u32>,
    /// Most participant slots that fit at once (cheapest combination).
    pub fitting_slots: u32,
    /// Most writer slots that fit at once.
    pub fitting_writer_slots: u32,
}

/// Everything the compiler derives.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ceilings {
    /// Roles reachable from the root within the depth ceiling, root first then by name.
    pub reachable_roles: Vec<String>,
    pub max_active_agents: Ceiling,
    pub max_active_writers: Ceiling,
    pub max_depth: Ceiling,
    pub native_max_concurrent_threads: u32,
    pub resource_groups: BTreeMap<String, GroupFit>,
}

/// Whether a role is an Agent-MCP writer: a workspace-write participant with an MCP backend.
pub fn is_mcp_writer(p: &Profile, role: &str) -> bool {
    p.agents.get(role).is_some_and(|a| {
        a.kind != "root"
            && a.permissions == "workspace-write"
            && a.backends.iter().any(|b| b == "mcp")
    })
}

/// Deepest spawn chain from the root, in edges; `None` when it is unbounded.
///
/// The longest simple path is NP-hard in general and a naive search is factorial on a dense
/// spawn graph, so this is exact on acyclic graphs (longest path in topological order) and an
/// upper bound on cyclic ones: with `reject_ancestor_role` a lineage holds each reachable role at
/// most once, so it is at most the number of reachable participants. Without it, a reachable
/// cycle makes depth unbounded.
fn deepest_chain(p: &Profile) -> Option<u32> {
    let reach = reachable(p, u32::MAX);
    let idx: BTreeMap<&str, usize> = reach
        .iter()
        .enumerate()
        .map(|(i, r)| (r.as_str(), i))
        .collect();
    let edges: Vec<Vec<usize>> = reach
        .iter()
        .map(|r| {
            p.agents
                .get(r)
                .map(|a| {
                    // Edges back to the root are rejected elsewhere and never run.
                    a.can_spawn
                        .iter()
                        .filter(|c| **c != p.root)
                        .filter_map(|c| idx.get(c.as_str()).copied())
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let mut indegree = vec![0usize; reach.len()];
    for e in &edges {
        for &t in e {
            indegree[t] += 1;
        }
    }
    let mut queue: Vec<usize> = (0..reach.len()).filter(|&i| indegree[i] == 0).collect();
    let mut depth = vec![0u32; reach.len()];
    let mut visited = 0;
    while let Some(n) = queue.pop() {
        visited += 1;
        for &t in &edges[n] {
            depth[t] = depth[t].max(depth[n] + 1);
            indegree[t] -= 1;
            if indegree[t] == 0 {
                queue.push(t);
            }
        }
    }
    if visited == reach.len() {
        return Some(depth.into_iter().max().unwrap_or(0));
    }
    if p.coordination.reject_ancestor_role {
        Some(reach.len().saturating_sub(1) as u32)
    } else {
        None
    }
}

/// Roles reachable from the root in at most `depth` spawn edges.
fn reachable(p: &Profile, depth: u32) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut frontier = vec![p.root.clone()];
    seen.insert(p.root.clone());
    for _ in 0..depth {
        if frontier.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for r in &frontier {
            if let Some(a) = p.agents.get(r) {
                for c in &a.can_spawn {
                    if p.agents.contains_key(c) && seen.insert(c.clone()) {
                        next.push(c.clone());
                    }
                }
            }
        }
        frontier = next;
    }
    let mut out = vec![p.root.clone()];
    out.extend(seen.into_iter().filter(|r| *r != p.root));
    out
}

fn fit(mut weights: Vec<u32>, room: u32) -> u32 {
    // Smallest weights first: the cheapest combination admits the most simultaneous slots.
    weights.sort_unstable();
    let mut used = 0u32;
    let mut n = 0u32;
    for w in weights {
        if used + w > room {
            break;
        }
        used += w;
        n += 1;
    }
    n
}

/// Derive the ceilings. `group_of` and `capacity_of` come from the resolved catalog.
pub fn derive(p: &Profile, capacity_of: &dyn Fn(&str) -> Option<u32>) -> Ceilings {
    let co = &p.coordination;
    let depth_derived = deepest_chain(p);
    let max_depth = Ceiling::new(co.max_depth, co.max_depth_declared, depth_derived);
    let roles = reachable(p, max_depth.effective);
    let mut groups: BTreeMap<String, GroupFit> = BTreeMap::new();
    let mut writer_weights: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for r in &roles {
        // An unknown root is its own diagnostic; derive what can be derived without it.
        let Some(a) = p.agents.get(r) else { continue };
        let Some(g) = a.resource_group.clone() else {
            continue;
        };
        let Some(cap) = capacity_of(&g) else { continue };
        let e = groups.entry(g.clone()).or_insert(GroupFit {
            capacity: cap,
            root_units: 0,
            slot_units: Vec::new(),
            fitting_slots: 0,
            fitting_writer_slots: 0,
        });
        if *r == p.root {
            e.root_units = a.resource_units;
        } else {
            for _ in 0..a.max_active {
                e.slot_units.push(a.resource_units);
                if is_mcp_writer(p, r) {
                    writer_weights
                        .entry(g.clone())
                        .or_default()
                        .push(a.resource_units);
                }
            }
        }
    }
    let mut workers = 0u32;
    let mut writers = 0u32;
    for (g, fitg) in groups.iter_mut() {
        fitg.slot_units.sort_unstable();
        let room = fitg.capacity.saturating_sub(fitg.root_units);
        fitg.fitting_slots = fit(fitg.slot_units.clone(), room);
        fitg.fitting_writer_slots = fit(writer_weights.remove(g).unwrap_or_default(), room);
        workers += fitg.fitting_slots;
        writers += fitg.fitting_writer_slots;
    }
    let max_active_agents = Ceiling::new(
        co.max_active_agents,
        co.max_active_agents_declared,
        Some(1 + workers),
    );
    let writers_derived = writers.min(max_active_agents.effective.saturating_sub(1));
    let max_active_writers = Ceiling::new(
        co.max_active_writers,
        co.max_active_writers_declared,
        Some(writers_derived),
    );
    let native_max_concurrent_threads = co
        .native_max_concurrent_threads
        .unwrap_or(max_active_agents.effective.saturating_sub(1));
    Ceilings {
        reachable_roles: roles,
        max_active_agents,
        max_active_writers,
        max_depth,
        native_max_concurrent_threads,
        resource_groups: groups,
    }
}

#[cfg(test)]
mod tests {
    use super::fit;

    /// Largest number of items from `w` whose sum fits in `room`, by trying every subset.
    fn brute(w: &[u32], room: u32) -> u32 {
        (0u32..1 << w.len())
            .filter(|mask| {
                (0..w.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| w[i])
                    .sum::<u32>()
                    <= room
            })
            .map(u32::count_ones)
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn cheapest_first_fits_the_most_slots() {
        // Exhaustive over small inputs: weights 1..=4, up to 6 slots, capacities 0..=12.
        let mut cases = 0;
        for n in 0..=6usize {
            for code in 0..4u32.pow(n as u32) {
                let w: Vec<u32> = (0..n).map(|i| code / 4u32.pow(i as u32) % 4 + 1).collect();
                for room in 0..=12 {
                    assert_eq!(fit(w.clone(), room), brute(&w, room), "{w:?} in {room}");
                    cases += 1;
                }
            }
        }
        assert!(cases > 50_000);
    }
}
