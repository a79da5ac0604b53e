//! Any bytes through lexing, parsing, lowering, checking and both renderings: no panic, no
//! stack overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let a = vox_lang::analyze("fuzz.vox", data);
    let _ = a.render();
    let _ = a.diagnostics_json();
    let _ = a.hir_json();
    let _ = a.into_module();
});
