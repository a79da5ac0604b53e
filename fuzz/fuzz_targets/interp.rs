//! Programs that compile are run: every function is called with no arguments and with an
//! argument object derived from the input, under a small budget. Any outcome but a panic, a
//! hang past the budget or a crash is fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use vox_lang::{Budget, CallOptions, Module};

fuzz_target!(|data: &[u8]| {
    let Ok(module) = Module::compile("fuzz.vox", data) else {
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
