//! What nodes say to each other, sealed: every envelope names its sender node, its recipient
//! node (none for a heartbeat, which every node hears), and when it was sent, and is signed by
//! the sender's node key. A receiver opens an envelope only if it is small enough, well formed,
//! signed by the node it names, addressed to the receiver, and that node is on its trust list.

use crate::MeshError;
use crate::identity::{NodeKey, is_node_id, verify};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
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

/// Seals `wire` from `key` to node `to` (`None`: every node).
pub fn seal(key: &NodeKey, to: Option<&str>, sent_at_ms: i64, wire: &Wire) -> Vec<u8> {
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

/// Opens an envelope received by node `me`; `trusted` says whether a sender is on the trust
/// list.
pub fn open(bytes: &[u8], me: &str, trusted: impl Fn(&str) -> bool) -> Result<Opened, MeshError> {
    if bytes.len() > MAX_ENVELOPE {
        return Err(MeshError::Refused(format!(
            "an envelope of {} bytes (at most {MAX_ENVELOPE})",
            bytes.len()
        )));
    }
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
    if let Some(to) = &signed.to
        && to != me
    {
        return Err(MeshError::Refused(format!(
            "addressed to node {to}, not to this node"
        )));
    }
    if !trusted(&signed.from) {
        return Err(MeshError::Refused(format!(
            "node {} is not on this node's trust list",
            signed.from
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
        let env = seal(&a, Some(b.id()), 7, &msg());
        let o = open(&env, b.id(), |n| n == a.id()).unwrap();
        assert_eq!((o.from.as_str(), o.sent_at_ms, o.wire), (a.id(), 7, msg()));
        let e = open(&env, c.id(), |_| true).unwrap_err().to_string();
        assert!(e.contains("not to this node"), "{e}");
        let e = open(&env, b.id(), |_| false).unwrap_err().to_string();
        assert!(e.contains("trust list"), "{e}");
    }

    #[test]
    fn a_tampered_or_forged_envelope_is_refused() {
        let (a, b, mallory) = (node(), node(), node());
        let env = String::from_utf8(seal(&a, Some(b.id()), 7, &msg())).unwrap();
        let tampered = env.replace("hi", "ho");
        let e = open(tampered.as_bytes(), b.id(), |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("signature"), "{e}");
        // Mallory signs a payload that claims to be from a.
        let forged = seal(&mallory, Some(b.id()), 7, &msg());
        let forged = String::from_utf8(forged)
            .unwrap()
            .replace(mallory.id(), a.id());
        let e = open(forged.as_bytes(), b.id(), |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("signature"), "{e}");
        let e = open(&vec![b' '; MAX_ENVELOPE + 1], b.id(), |_| true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most"), "{e}");
        let e = open(b"{\"payload\":\"{}\",\"sig\":\"\",\"x\":1}", b.id(), |_| {
            true
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field"), "{e}");
    }
}
