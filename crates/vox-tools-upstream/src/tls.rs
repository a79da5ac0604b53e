//! The TLS crypto provider of HTTPS upstream servers: ring, which the build already has
//! (rmcp's HTTP client is built without one, so it is chosen here, once per process).

/// Installs ring as the process's rustls provider unless one is installed already.
pub fn install_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
