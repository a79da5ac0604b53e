//! Programs that compile are run: every function is called with no arguments and with an
//! argument object derived from the input, under a small budget. Any outcome but a panic, a
//! hang past the budget or a crash is fine. A NUL byte splits the input into the root file and
//! the modules `a` to `d` it may import, so calls across files are run too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use vox_lang::{Budget, CallOptions, Module};

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0);
    let root = parts.next().unwrap_or_default();
    let mut loader = vox_lang::MemoryLoader::default();
    for (name, part) in ["a.vox", "b.vox", "c.vox", "d.vox"].iter().zip(parts) {
        loader.files.insert(name.to_string(), part.to_vec());
    }
    let Ok(module) = Module::compile_with("fuzz.vox", root, &loader) else {
        return;
    };
    let opts = CallOptions {
        budget: Budget {
            max_steps: 20_000,
            max_call_depth: 64,
            max_wall: Duration::from_millis(200),
            max_memory: 4 << 20,
            max_stack_bytes: 512 << 10,
        },
        log: None,
        events: None,
        cancel: None,
        workspace: None,
    };
    let args = serde_json::json!({"a": 1, "b": "x", "n": 3, "xs": [1, 2], "s": "a,b"});
    for f in module.functions() {
        let _ = module.call_json(&f.name, &serde_json::Value::Null, &opts);
        let subset: serde_json::Map<String, serde_json::Value> = f
            .params
            .iter()
            .filter_map(|p| args.get(&p.name).map(|v| (p.name.clone(), v.clone())))
            .collect();
        let _ = module.call_json(&f.name, &serde_json::Value::Object(subset), &opts);
    }
    let _ = module.run_tests(&opts);
});
