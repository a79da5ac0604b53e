//! What nodes say to each other, sealed: every envelope names its sender node, its recipient
//! node (none for a heartbeat, which every node hears), and when it was sent, and is signed by
//! the sender's node key. A receiver opens an envelope only if it is small enough, well formed,
//! signed by the node it names, addressed to the receiver, and that node is on its trust list.
//!
//! An envelope to one node (a message, a call, a result) is then encrypted to that node
//! (sign-then-encrypt, so only the recipient reads it and the signature inside still names the
//! sender): an ephemeral X25519 key agrees with the recipient's X25519 key (its node key on
//! the Montgomery form), HKDF-SHA-256 makes a one-time ChaCha20-Poly1305 key of it, and the
//! envelope is `voxmesh1 | recipient id (56) | ephemeral public key (32) | ciphertext + tag`,
//! the header authenticated with it. The signed payload names the recipient too, so a node
//! cannot pass on what it was sent as if it had been sent to another. Only heartbeats, which
//! every node hears, are signed and not encrypted.

use crate::MeshError;
use crate::identity::{NodeKey, is_node_id, verify, x25519_public};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use curve25519_dalek::montgomery::MontgomeryPoint;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest envelope a node opens (a 64 KiB message body, escaped, fits).
pub const MAX_ENVELOPE: usize = 512 * 1024;

/// What one node says to another, inside a sealed envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Wire {
    /// A node is up: its name, workspace, agents and pending messages.
    Heartbeat {
        /// The sender's display name.
        name: String,
        /// The sender's workspace (its root path).
        workspace: String,
        /// The ids of the agents the sender runs.
        agents: Vec<String>,
        /// Messages waiting for delivery on the sender.
        pending: i64,
    },
    /// A message from agent `sender` on the sending node to agent `recipient` (or `*`: every
    /// agent) on the receiving one; `id` is unique in the mesh, so a redelivery is recognised.
    A2a {
        /// Mesh-unique message id (`<node prefix>:m<local id>`), so a redelivery is recognised.
        id: String,
        /// The sending agent's id.
        sender: String,
        /// The receiving agent's id, or `*` for every agent.
        recipient: String,
        /// The conversation thread (the first message's own `m<id>` when none was given).
        thread: String,
        /// The message text.
        body: String,
    },
    /// A tool call the receiving node decides under the profile its trust list grants the
    /// sender.
    Call {
        /// Mesh-unique call id, answered by the [`Wire::Result`] of the same id.
        id: String,
        /// The tool to call on the receiving node.
        tool: String,
        /// The tool's arguments (a JSON object).
        arguments: Value,
        /// The nodes the call came through before its sender, originator first: the receiver
        /// decides it under the grant of every one of them and of the sender.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        origin: Vec<String>,
    },
    /// The outcome of call `id`: its result, or an error with a code and message.
    Result {
        /// The [`Wire::Call`]'s id.
        id: String,
        /// Whether the call succeeded.
        ok: bool,
        /// The tool's result when `ok`, else the error (`{"code", "message", ...}`).
        value: Value,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Signed {
    from: String,
    to: Option<String>,
    sent_at_ms: i64,
    wire: Wire,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    /// The JSON of a `Signed`, as signed.
    payload: String,
    sig: String,
}

/// An envelope opened: who sent it, when, and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The sender's node id, checked against the signature.
    pub from: String,
    /// When the sender sealed it (its clock, ms since the Unix epoch).
    pub sent_at_ms: i64,
    /// What the envelope says.
    pub wire: Wire,
}

/// The first bytes of an envelope encrypted to a node.
const MAGIC: &[u8; 8] = b"voxmesh1";
/// The length of a node id.
const ID_LEN: usize = 56;
/// Magic, recipient id, ephemeral public key: authenticated, not encrypted.
const HEADER: usize = MAGIC.len() + ID_LEN + 32;
/// The Poly1305 tag.
const TAG: usize = 16;
/// The HKDF info of an envelope key.
const KDF_INFO: &[u8] = b"vox-mesh envelope v1";

fn signed(key: &NodeKey, to: Option<&str>, sent_at_ms: i64, wire: &Wire) -> Vec<u8> {
    let payload = serde_json::to_string(&Signed {
        from: key.id().to_owned(),
        to: to.map(str::to_owned),
        sent_at_ms,
        wire: wire.clone(),
    })
    .unwrap_or_default();
    let sig = B64.encode(key.sign(payload.as_bytes()));
    serde_json::to_vec(&Sealed { payload, sig }).unwrap_or_default()
}

/// The one-time key of an envelope: HKDF-SHA-256 of the shared secret, salted with both
/// public keys. `None` if the shared secret is all zeros (a low-order point).
fn envelope_key(
    shared: &[u8; 32],
    ephemeral: &[u8; 32],
    recipient: &[u8; 32],
) -> Option<LessSafeKey> {
    if shared.iter().all(|b| *b == 0) {
        return None;
    }
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ephemeral);
    salt[32..].copy_from_slice(recipient);
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &salt).extract(shared);
    let okm = prk.expand(&[KDF_INFO], &CHACHA20_POLY1305).ok()?;
    Some(LessSafeKey::new(UnboundKey::from(okm)))
}

/// Encrypts `plain` to node `to`.
fn encrypt(to: &str, mut plain: Vec<u8>) -> Result<Vec<u8>, MeshError> {
    let recipient =
        x25519_public(to).ok_or_else(|| MeshError::Config(format!("`{to}` is not a node id")))?;
    let mut secret = [0u8; 32];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| MeshError::Config("no randomness for an envelope key".into()))?;
    let ephemeral = MontgomeryPoint::mul_base_clamped(secret).to_bytes();
    let shared = recipient.mul_clamped(secret).to_bytes();
    let key = envelope_key(&shared, &ephemeral, &recipient.to_bytes())
        .ok_or_else(|| MeshError::Config(format!("no envelope key for node {to}")))?;
    let mut out = Vec::with_capacity(HEADER + plain.len() + TAG);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(to.as_bytes());
    out.extend_from_slice(&ephemeral);
    // Each key seals one envelope, so a fixed nonce is never used twice with it.
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key([0; 12]),
        Aad::from(&out[..HEADER]),
        &mut plain,
    )
    .map_err(|_| MeshError::Config("the envelope is too large to encrypt".into()))?;
    out.extend_from_slice(&plain);
    Ok(out)
}

/// Seals `wire` from `key` to node `to`: signed, then encrypted to `to`.
pub fn seal(key: &NodeKey, to: &str, sent_at_ms: i64, wire: &Wire) -> Result<Vec<u8>, MeshError> {
    encrypt(to, signed(key, Some(to), sent_at_ms, wire))
}

/// Seals `wire` from `key` to every node (a heartbeat): signed, not encrypted.
pub fn seal_broadcast(key: &NodeKey, sent_at_ms: i64, wire: &Wire) -> Vec<u8> {
    signed(key, None, sent_at_ms, wire)
}

fn too_large(bytes: &[u8]) -> Result<(), MeshError> {
    if bytes.len() > MAX_ENVELOPE {
        return Err(MeshError::Refused(format!(
            "an envelope of {} bytes (at most {MAX_ENVELOPE})",
            bytes.len()
        )));
    }
    Ok(())
}

/// Checks the signature of a signed envelope and that its sender is trusted.
fn verified(bytes: &[u8], trusted: impl Fn(&str) -> bool) -> Result<Signed, MeshError> {
    let sealed: Sealed = serde_json::from_slice(bytes)
        .map_err(|e| MeshError::Refused(format!("not an envelope: {e}")))?;
    let signed: Signed = serde_json::from_str(&sealed.payload)
        .map_err(|e| MeshError::Refused(format!("not a signed payload: {e}")))?;
    if !is_node_id(&signed.from) {
        return Err(MeshError::Refused(format!(
            "the sender `{}` is not a node id",
            signed.from
        )));
    }
    let sig = B64
        .decode(&sealed.sig)
        .map_err(|_| MeshError::Refused("the signature is not base64url".into()))?;
    if !verify(&signed.from, sealed.payload.as_bytes(), &sig) {
        return Err(MeshError::Refused(format!(
            "the signature is not node {}'s",
            signed.from
        )));
    }
    if !trusted(&signed.from) {
        return Err(MeshError::Refused(format!(
            "node {} is not on this node's trust list",
            signed.from
        )));
    }
    Ok(signed)
}

/// Opens an envelope received by node `me` on one of its queues: it must be encrypted to
/// `me`, signed by its sender and addressed to `me` inside; `trusted` says whether a sender is
/// on the trust list.
pub fn open(
    bytes: &[u8],
    me: &NodeKey,
    trusted: impl Fn(&str) -> bool,
) -> Result<Opened, MeshError> {
    too_large(bytes)?;
    if bytes.len() < HEADER + TAG || !bytes.starts_with(MAGIC) {
        return Err(MeshError::Refused(
            "not an envelope encrypted to a node".into(),
        ));
    }
    let to = &bytes[MAGIC.len()..MAGIC.len() + ID_LEN];
    if to != me.id().as_bytes() {
        return Err(MeshError::Refused(format!(
            "addressed to node {}, not to this node",
            String::from_utf8_lossy(to)
        )));
    }
    let mut ephemeral = [0u8; 32];
    ephemeral.copy_from_slice(&bytes[MAGIC.len() + ID_LEN..HEADER]);
    let shared = me.diffie_hellman(&MontgomeryPoint(ephemeral));
    let key = envelope_key(&shared, &ephemeral, &me.x25519_public())
        .ok_or_else(|| MeshError::Refused("a degenerate ephemeral key".into()))?;
    let mut body = bytes[HEADER..].to_vec();
    let plain = key
        .open_in_place(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(&bytes[..HEADER]),
            &mut body,
        )
        .map_err(|_| MeshError::Refused("the envelope does not decrypt for this node".into()))?;
    let signed = verified(plain, trusted)?;
    if signed.to.as_deref() != Some(me.id()) {
        return Err(MeshError::Refused(format!(
            "signed for node {}, not for this node",
            signed.to.as_deref().unwrap_or("(every node)")
        )));
    }
    Ok(Opened {
        from: signed.from,
        sent_at_ms: signed.sent_at_ms,
        wire: signed.wire,
    })
}

/// Opens a heartbeat (an envelope to every node, signed, not encrypted); `trusted` says
/// whether a sender is on the trust list. One addressed to a node is refused: those travel
/// encrypted.
pub fn open_broadcast(bytes: &[u8], trusted: impl Fn(&str) -> bool) -> Result<Opened, MeshError> {
    too_large(bytes)?;
    let signed = verified(bytes, trusted)?;
    if let Some(to) = &signed.to {
        return Err(MeshError::Refused(format!(
            "addressed to node {to} in clear, not to every node"
        )));
    }
    Ok(Opened {
        from: signed.from,
        sent_at_ms: signed.sent_at_ms,
        wire: signed.wire,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nkeys::{KeyPair, KeyPairType};

    fn node() -> NodeKey {
        NodeKey::from_seed(&KeyPair::new(KeyPairType::Server).seed().unwrap()).unwrap()
    }

    fn msg() -> Wire {
        Wire::A2a {
            id: "1".into(),
            sender: "a".into(),
            recipient: "b".into(),
            thread: "t".into(),
            body: "hi".into(),
        }
    }

    #[test]
    fn a_sealed_envelope_opens_for_its_recipient_only() {
        let (a, b, c) = (node(), node(), node());
        let env = seal(&a, b.id(), 7, &msg()).unwrap();
        let o = open(&env, &b, |n| n == a.id()).unwrap();
        assert_eq!((o.from.as_str(), o.sent_at_ms, o.wire), (a.id(), 7, msg()));
        let e = open(&env, &c, |_| true).unwrap_err().to_string();
        assert!(e.contains("not to this node"), "{e}");
        let e = open(&env, &b, |_| false).unwrap_err().to_string();
        assert!(e.contains("trust list"), "{e}");
        // Nothing of the message is in clear.
        let clear = String::from_utf8_lossy(&env);
        for word in ["payload", "kind", "a2a", a.id()] {
            assert!(!clear.contains(word), "{word} in {clear}");
        }
        // Two seals of the same message differ (a fresh key each).
        assert_ne!(env, seal(&a, b.id(), 7, &msg()).unwrap());
    }

    #[test]
    fn a_third_key_cannot_open_what_was_sealed_to_another() {
        let (a, b, c) = (node(), node(), node());
        let mut env = seal(&a, b.id(), 7, &msg()).unwrap();
        // c puts its own id in the header: the key no longer agrees, nor does the tag.
        env[MAGIC.len()..MAGIC.len() + ID_LEN].copy_from_slice(c.id().as_bytes());
        let e = open(&env, &c, |_| true).unwrap_err().to_string();
        assert!(e.contains("does not decrypt"), "{e}");
    }

    #[test]
    fn what_a_node_was_sent_cannot_be_passed_on_as_sent_to_another() {
        let (a, b, c) = (node(), node(), node());
        // b re-encrypts to c what a signed for b.
        let inner = signed(&a, Some(b.id()), 7, &msg());
        let env = encrypt(c.id(), inner).unwrap();
        let e = open(&env, &c, |_| true).unwrap_err().to_string();
        assert!(e.contains("signed for node"), "{e}");
        // Nor as a heartbeat, nor a heartbeat as a message.
        let beat = seal_broadcast(&a, 7, &msg());
        let e = open(&encrypt(b.id(), beat.clone()).unwrap(), &b, |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("every node"), "{e}");
        let e = open(&beat, &b, |_| true).unwrap_err().to_string();
        assert!(e.contains("not an envelope encrypted"), "{e}");
        let e = open_broadcast(&signed(&a, Some(b.id()), 7, &msg()), |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("in clear"), "{e}");
        assert_eq!(open_broadcast(&beat, |n| n == a.id()).unwrap().from, a.id());
    }

    #[test]
    fn a_tampered_or_forged_envelope_is_refused() {
        let (a, b, mallory) = (node(), node(), node());
        let env = seal(&a, b.id(), 7, &msg()).unwrap();
        for at in [0, MAGIC.len() + ID_LEN, HEADER, env.len() - 1] {
            let mut t = env.clone();
            t[at] ^= 1;
            let e = open(&t, &b, |_| true).unwrap_err().to_string();
            assert!(e.contains("refused"), "{e}");
        }
        let e = open(&env[..env.len() - 1], &b, |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not decrypt"), "{e}");
        // Mallory signs a payload that claims to be from a and encrypts it to b.
        let forged = String::from_utf8(signed(&mallory, Some(b.id()), 7, &msg()))
            .unwrap()
            .replace(mallory.id(), a.id());
        let e = open(&encrypt(b.id(), forged.into_bytes()).unwrap(), &b, |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("signature"), "{e}");
        let tampered = String::from_utf8(seal_broadcast(&a, 7, &msg()))
            .unwrap()
            .replace("hi", "ho");
        let e = open_broadcast(tampered.as_bytes(), |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("signature"), "{e}");
        let e = open(&vec![b' '; MAX_ENVELOPE + 1], &b, |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most"), "{e}");
        let e = open_broadcast(b"{\"payload\":\"{}\",\"sig\":\"\",\"x\":1}", |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field"), "{e}");
        // A low-order ephemeral key is refused, not used.
        let mut low = env.clone();
        low[MAGIC.len() + ID_LEN..HEADER].copy_from_slice(&[0; 32]);
        let e = open(&low, &b, |_| true).unwrap_err().to_string();
        assert!(e.contains("degenerate"), "{e}");
    }

    #[test]
    fn garbage_never_opens_nor_panics() {
        let b = node();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..400 {
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            if len >= HEADER && len % 2 == 0 {
                bytes[..MAGIC.len()].copy_from_slice(MAGIC);
                bytes[MAGIC.len()..MAGIC.len() + ID_LEN].copy_from_slice(b.id().as_bytes());
            }
            assert!(open(&bytes, &b, |_| true).is_err());
            assert!(open_broadcast(&bytes, |_| true).is_err());
        }
    }
}
