//! A node's identity: an Ed25519 key pair (an NATS nkey of the server kind, public keys start
//! with `N`), kept in a file only its user reads. The public key is the node's id everywhere in
//! the mesh: in subjects, in the trust list, and in every sealed envelope. The same key, read
//! on its Montgomery form, is the node's X25519 key: envelopes are encrypted to it.

use crate::MeshError;
use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::montgomery::MontgomeryPoint;
use nkeys::{KeyPair, KeyPairType};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// This node's Ed25519 key pair (an nkey of the server kind) and its public key, the node id.
pub struct NodeKey {
    pair: KeyPair,
    id: String,
    /// The X25519 secret: the first half of SHA-512 of the Ed25519 seed, as Ed25519 itself
    /// derives its scalar (clamped where it is used).
    x_secret: [u8; 32],
}

impl NodeKey {
    /// Reads the seed at `path`, or creates one there (mode 0600, never overwriting a file a
    /// racing process wrote).
    pub fn load_or_create(path: &Path) -> Result<Self, MeshError> {
        match std::fs::read_to_string(path) {
            Ok(seed) => Self::from_seed(seed.trim())
                .map_err(|e| MeshError::Config(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let pair = KeyPair::new(KeyPairType::Server);
                let seed = pair.seed().map_err(|e| MeshError::Config(e.to_string()))?;
                let created = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .and_then(|mut f| f.write_all(format!("{seed}\n").as_bytes()));
                match created {
                    Ok(()) => Self::from_seed(&seed),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::load_or_create(path)
                    }
                    Err(e) => Err(MeshError::Config(format!(
                        "cannot write the node key {}: {e}",
                        path.display()
                    ))),
                }
            }
            Err(e) => Err(MeshError::Config(format!(
                "cannot read the node key {}: {e}",
                path.display()
            ))),
        }
    }

    /// The key of a seed (`SN...`); an error if it is not a node (server) seed.
    pub fn from_seed(seed: &str) -> Result<Self, MeshError> {
        let pair = KeyPair::from_seed(seed)
            .map_err(|e| MeshError::Config(format!("not a node key seed: {e}")))?;
        if pair.key_pair_type() != KeyPairType::Server {
            return Err(MeshError::Config(
                "the node key is not of the node (server, `SN...`) kind".into(),
            ));
        }
        let id = pair.public_key();
        let (_, raw) = nkeys::decode_seed(seed)
            .map_err(|e| MeshError::Config(format!("not a node key seed: {e}")))?;
        let digest = ring::digest::digest(&ring::digest::SHA512, &raw);
        let mut x_secret = [0u8; 32];
        x_secret.copy_from_slice(&digest.as_ref()[..32]);
        Ok(NodeKey { pair, id, x_secret })
    }

    /// The node's id: its public key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The Ed25519 signature of `payload` by this node.
    pub fn sign(&self, payload: &[u8]) -> Vec<u8> {
        // Signing with a seeded pair only fails without a seed, which this pair always has.
        self.pair.sign(payload).unwrap_or_default()
    }

    /// The X25519 Diffie-Hellman of this node's key with the point `other`.
    pub(crate) fn diffie_hellman(&self, other: &MontgomeryPoint) -> [u8; 32] {
        other.mul_clamped(self.x_secret).to_bytes()
    }

    /// This node's X25519 public key (the same as [`x25519_public`] of its id).
    pub fn x25519_public(&self) -> [u8; 32] {
        MontgomeryPoint::mul_base_clamped(self.x_secret).to_bytes()
    }
}

/// The X25519 public key of node `node`: its Ed25519 public key on the Montgomery form; `None`
/// when `node` is not a node id or not a point of the curve.
pub fn x25519_public(node: &str) -> Option<MontgomeryPoint> {
    if !is_node_id(node) {
        return None;
    }
    let (_, raw) = nkeys::from_public_key(node).ok()?;
    Some(CompressedEdwardsY(raw).decompress()?.to_montgomery())
}

/// Whether `node` (a public key) signed `payload` with `sig`.
pub fn verify(node: &str, payload: &[u8], sig: &[u8]) -> bool {
    KeyPair::from_public_key(node)
        .and_then(|k| k.verify(payload, sig))
        .is_ok()
}

/// Whether `id` is a well-formed node id (a public key of the node kind): checked before it is
/// used in a subject or a consumer name.
pub fn is_node_id(id: &str) -> bool {
    id.starts_with('N')
        && KeyPair::from_public_key(id).is_ok_and(|k| k.key_pair_type() == KeyPairType::Server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_created_once_private_and_reloaded() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.nk");
        let a = NodeKey::load_or_create(&path).unwrap();
        let b = NodeKey::load_or_create(&path).unwrap();
        assert_eq!(a.id(), b.id());
        assert!(is_node_id(a.id()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let sig = a.sign(b"hello");
        assert!(verify(a.id(), b"hello", &sig));
        assert!(!verify(a.id(), b"hellO", &sig));
        let other = NodeKey::from_seed(&KeyPair::new(KeyPairType::Server).seed().unwrap()).unwrap();
        assert!(!verify(other.id(), b"hello", &sig));
    }

    #[test]
    fn the_x25519_key_of_a_node_id_is_the_one_its_seed_gives() {
        let k = NodeKey::from_seed(&KeyPair::new(KeyPairType::Server).seed().unwrap()).unwrap();
        assert_eq!(x25519_public(k.id()).unwrap().to_bytes(), k.x25519_public());
        let other = NodeKey::from_seed(&KeyPair::new(KeyPairType::Server).seed().unwrap()).unwrap();
        // Both sides of a Diffie-Hellman agree.
        assert_eq!(
            k.diffie_hellman(&x25519_public(other.id()).unwrap()),
            other.diffie_hellman(&x25519_public(k.id()).unwrap())
        );
        assert!(x25519_public("N.>").is_none());
    }

    #[test]
    fn a_user_key_is_not_a_node_key() {
        let user = KeyPair::new(KeyPairType::User);
        assert!(NodeKey::from_seed(&user.seed().unwrap()).is_err());
        assert!(!is_node_id(&user.public_key()));
        assert!(!is_node_id("N.>"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.nk");
        std::fs::write(&path, "garbage").unwrap();
        let e = NodeKey::load_or_create(&path).err().unwrap().to_string();
        assert!(e.contains("node.nk"), "{e}");
    }
}
