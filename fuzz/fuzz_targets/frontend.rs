//! Any bytes through lexing, parsing, lowering, checking and both renderings: no panic, no
//! stack overflow. A NUL byte splits the input into the root file and the modules `a` to `d`
//! it may import (`import a.{f}`), so imports, cycles and cross-file lowering are covered too.
//! The root also goes through `vox fmt`: formatting must succeed whenever the file has no syntax
//! error (never tripping its own token check) and be idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0);
    let root = parts.next().unwrap_or_default();
    let mut loader = vox_lang::MemoryLoader::default();
    for (name, part) in ["a.vox", "b.vox", "c.vox", "d.vox"].iter().zip(parts) {
        loader.files.insert(name.to_string(), part.to_vec());
    }
    let a = vox_lang::analyze_with("fuzz.vox", root, &loader);
    let _ = a.render();
    let _ = a.diagnostics_json();
    let _ = a.hir_json();
    let _ = a.into_module();
    if let Ok(text) = std::str::from_utf8(root) {
        match vox_lang::fmt::format("fuzz.vox", text) {
            Ok(once) => {
                let twice = vox_lang::fmt::format("fuzz.vox", &once);
                assert_eq!(twice.as_deref(), Ok(once.as_str()), "vox fmt is not idempotent");
            }
            Err(vox_lang::fmt::FmtError::Syntax(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
});
