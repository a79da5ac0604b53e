//! Opaque ids and the hex they are written in.

/// A new opaque id: a prefix and 16 random hex digits.
pub fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        bytes = (now ^ (std::process::id() as u64) << 32).to_le_bytes();
    }
    format!("{prefix}_{}", hex(&bytes))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
