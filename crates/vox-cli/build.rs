//! Link flags for the `vox` and `vox-orchestrator-d` binaries.

fn main() {
    // `vox mcp` is started by every MCP client session, so its start-up counts: packed relative
    // relocations (DT_RELR) shrink the binary's relocation table from about 1.4 MB to a few KB,
    // which the dynamic loader otherwise reads page by page at every start. PIE (and ASLR) stay.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if linux {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
