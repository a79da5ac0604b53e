//! What a node needs to join a mesh: the NATS server and its credentials (from the
//! environment, never from a file in the workspace), and the trust list (`.vox/mesh.toml`):
//! which nodes this one accepts, and the profile each may call here under.

use crate::MeshError;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// Largest `.vox/mesh.toml`.
const MAX_FILE: u64 = 256 * 1024;
/// Most peers a trust list names.
const MAX_PEERS: usize = 1024;

/// How the node authenticates to the NATS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// No credentials (a server that asks for none).
    None,
    /// `VOX_MESH_NATS_CREDS`: a `.creds` file (a user JWT and its nkey seed).
    CredsFile(String),
    /// `VOX_MESH_NATS_USER` and `VOX_MESH_NATS_PASSWORD`.
    UserPassword(String, String),
    /// `VOX_MESH_NATS_TOKEN`.
    Token(String),
    /// `VOX_MESH_NATS_NKEY`: a file holding a user nkey seed (`SU...`); the server knows its
    /// public key.
    NkeyFile(String),
}

/// A node this one trusts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// Its id (public key, `N...`).
    pub node: String,
    /// How it is shown (default: the name it announces).
    pub name: Option<String>,
    /// The capability profile its remote calls are decided under here (default `mesh`).
    #[serde(default = "mesh_profile")]
    pub profile: String,
}

fn mesh_profile() -> String {
    "mesh".into()
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    heartbeat_ms: Option<u64>,
    #[serde(default)]
    peer: Vec<Peer>,
}

/// How this node joins the mesh: the NATS server, its credentials, the node's name, the heartbeat
/// interval and the trust list.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// `VOX_MESH_NATS_URL`: the NATS server, e.g. `nats://host:4222`.
    pub url: String,
    /// The credentials presented to the NATS server.
    pub auth: Auth,
    /// This node's display name.
    pub name: String,
    /// How often the node announces itself (`heartbeat_ms`, 100 ms to 10 min; default 2 s).
    pub heartbeat: Duration,
    /// The nodes this one trusts (`[[peer]]` of `.vox/mesh.toml`); any other is refused.
    pub peers: Vec<Peer>,
}

impl MeshConfig {
    /// The mesh this node joins: `None` when `VOX_MESH_NATS_URL` is unset (the embedded mesh).
    /// `env` reads a variable; `file` is the trust list (missing: no peer is trusted);
    /// `default_name` names the node when the file does not.
    pub fn load(
        env: impl Fn(&str) -> Option<String>,
        file: &Path,
        default_name: &str,
    ) -> Result<Option<Self>, MeshError> {
        let Some(url) = env("VOX_MESH_NATS_URL").filter(|u| !u.trim().is_empty()) else {
            return Ok(None);
        };
        let auth = match (
            env("VOX_MESH_NATS_CREDS"),
            env("VOX_MESH_NATS_USER"),
            env("VOX_MESH_NATS_PASSWORD"),
            env("VOX_MESH_NATS_TOKEN"),
            env("VOX_MESH_NATS_NKEY"),
        ) {
            (None, None, None, None, None) => Auth::None,
            (Some(c), None, None, None, None) => Auth::CredsFile(c),
            (None, Some(u), Some(p), None, None) => Auth::UserPassword(u, p),
            (None, None, None, Some(t), None) => Auth::Token(t),
            (None, None, None, None, Some(k)) => Auth::NkeyFile(k),
            _ => {
                return Err(MeshError::Config(
                    "set one NATS credential: VOX_MESH_NATS_CREDS, VOX_MESH_NATS_NKEY, \
                     VOX_MESH_NATS_USER with VOX_MESH_NATS_PASSWORD, or VOX_MESH_NATS_TOKEN"
                        .into(),
                ));
            }
        };
        let parsed = read_file(file)?;
        if parsed.peer.len() > MAX_PEERS {
            return Err(MeshError::Config(format!(
                "{}: at most {MAX_PEERS} peers",
                file.display()
            )));
        }
        for (i, p) in parsed.peer.iter().enumerate() {
            if !crate::identity::is_node_id(&p.node) {
                return Err(MeshError::Config(format!(
                    "{}: peer {}: `{}` is not a node id (a public key starting with N; `vox mesh key` prints a node's)",
                    file.display(),
                    i + 1,
                    p.node
                )));
            }
        }
        let heartbeat_ms = parsed.heartbeat_ms.unwrap_or(2000);
        if !(100..=600_000).contains(&heartbeat_ms) {
            return Err(MeshError::Config(format!(
                "{}: heartbeat_ms must be between 100 and 600000, not {heartbeat_ms}",
                file.display()
            )));
        }
        let name = parsed.name.unwrap_or_else(|| default_name.to_owned());
        if name.len() > 128 {
            return Err(MeshError::Config(format!(
                "{}: name is longer than 128 bytes",
                file.display()
            )));
        }
        Ok(Some(MeshConfig {
            url,
            auth,
            name,
            heartbeat: Duration::from_millis(heartbeat_ms),
            peers: parsed.peer,
        }))
    }

    /// The trust-list entry of node id `node`, if it is trusted.
    pub fn peer(&self, node: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.node == node)
    }
}

fn read_file(path: &Path) -> Result<File, MeshError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
        Err(e) => return Err(MeshError::Config(format!("{}: {e}", path.display()))),
    };
    if meta.len() > MAX_FILE {
        return Err(MeshError::Config(format!(
            "{}: larger than {MAX_FILE} bytes",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| MeshError::Config(format!("{}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| MeshError::Config(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn no_url_is_the_embedded_mesh() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            MeshConfig::load(env(&[]), &dir.path().join("mesh.toml"), "w")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_trust_list_is_strict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mesh.toml");
        let url = [("VOX_MESH_NATS_URL", "nats://127.0.0.1:4222")];
        let node = nkeys::KeyPair::new(nkeys::KeyPairType::Server).public_key();
        std::fs::write(
            &path,
            format!("name = \"alpha\"\n[[peer]]\nnode = \"{node}\"\nprofile = \"orchestrator\"\n"),
        )
        .unwrap();
        let c = MeshConfig::load(env(&url), &path, "w").unwrap().unwrap();
        assert_eq!(c.name, "alpha");
        assert_eq!(c.peer(&node).unwrap().profile, "orchestrator");
        assert_eq!(c.auth, Auth::None);

        std::fs::write(
            &path,
            format!("[[peer]]\nnode = \"{node}\"\nrole = \"x\"\n"),
        )
        .unwrap();
        let e = MeshConfig::load(env(&url), &path, "w")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `role`"), "{e}");

        std::fs::write(&path, "[[peer]]\nnode = \"UABC\"\n").unwrap();
        let e = MeshConfig::load(env(&url), &path, "w")
            .unwrap_err()
            .to_string();
        assert!(e.contains("peer 1") && e.contains("not a node id"), "{e}");

        std::fs::write(&path, "heartbeat_ms = 5\n").unwrap();
        let e = MeshConfig::load(env(&url), &path, "w")
            .unwrap_err()
            .to_string();
        assert!(e.contains("heartbeat_ms"), "{e}");
    }

    #[test]
    fn credentials_come_from_one_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mesh.toml");
        let c = MeshConfig::load(
            env(&[
                ("VOX_MESH_NATS_URL", "nats://h:1"),
                ("VOX_MESH_NATS_USER", "u"),
                ("VOX_MESH_NATS_PASSWORD", "p"),
            ]),
            &path,
            "w",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.auth, Auth::UserPassword("u".into(), "p".into()));
        let e = MeshConfig::load(
            env(&[
                ("VOX_MESH_NATS_URL", "nats://h:1"),
                ("VOX_MESH_NATS_USER", "u"),
                ("VOX_MESH_NATS_TOKEN", "t"),
            ]),
            &path,
            "w",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("one NATS credential"), "{e}");
    }
}
